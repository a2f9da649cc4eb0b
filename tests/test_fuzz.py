"""Property-based tests: arbitrary and malformed input ends in a clear error or a warning with
the bad data left out and counted; never a traceback."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuaudit import snapshot
from gpuaudit.core import numbers
from gpuaudit.core.errors import SnapshotError
from gpuaudit.inventory import build, kube
from gpuaudit.inventory import columns as C
from gpuaudit.snapshot import answers
from gpuaudit.sources.prometheus.http import PromClient, PromConfig, PromError
from tests.support.factories import Series, gpu_labels
from tests.support.factories import snapshot as make_snapshot

json_scalars = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
FAST = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@FAST
@given(doc=json_values)
def test_snapshot_envelope_accepts_or_refuses_cleanly(doc: Any) -> None:
    try:
        snapshot.from_json(doc)
    except SnapshotError:
        pass


@FAST
@given(body=json_values)
def test_prometheus_answer_parsers_never_crash(body: Any) -> None:
    try:
        answer = answers.parse(body, "q")
    except SnapshotError:
        answer = None
    if answer is not None:
        assert np.isfinite(answer.values).all() and np.isfinite(answer.vs).all()
    # A snapshot line holding it: the fast reader gives the general parse, or declines.
    line = json.dumps({"body": body, "prometheus": "q"}, separators=(",", ":")).encode()
    fast = answers.from_record_line(line)
    if fast is not None:
        assert answer is not None
        _same(fast["answer"], answer)


def _same(a: answers.Answer, b: answers.Answer) -> None:
    assert a.rtype == b.rtype
    assert [dict(m) for m in a.metrics] == [dict(m) for m in b.metrics]
    for name in ("values", "offsets", "ts", "vs"):
        assert np.array_equal(getattr(a, name), getattr(b, name), equal_nan=True), name
    assert (a.dropped, a.malformed) == (b.dropped, b.malformed)


label_text = st.lists(
    st.sampled_from([*'ab{}[]",:\\ \n\u00e9\u202e', '{"metric":', ',"values":[[', ',"value":[']),
    max_size=8,
).map("".join)
sample_value = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["NaN", "+Inf", "-Inf", "1e-05", "0.008700000000000001", "x", "", "1]"]),
    st.integers(-(10**6), 10**6),
)


@FAST
@given(
    series=st.lists(
        st.tuples(
            st.dictionaries(st.sampled_from(["UUID", "pod", "exported_pod", "x"]), label_text),
            st.lists(st.tuples(st.integers(0, 10**10) | st.floats(0, 1e10), sample_value)),
        ),
        max_size=5,
    ),
    matrix=st.booleans(),
)
def test_fast_snapshot_reading_equals_the_general_parse(
    series: list[tuple[dict[str, str], list[tuple[Any, Any]]]], matrix: bool
) -> None:
    """Labels that spell the markers the fast reader looks for, brackets, quotes, escapes and
    odd values: the fast reader gives exactly the general parse, or declines."""
    if matrix:
        result: list[Any] = [{"metric": m, "values": [list(p) for p in pts]} for m, pts in series]
    else:
        result = [{"metric": m, "value": list(pts[0]) if pts else []} for m, pts in series]
    body = {
        "status": "success",
        "data": {"resultType": "matrix" if matrix else "vector", "result": result},
    }
    line = json.dumps(
        {"body": body, "params": {}, "prometheus": "q", "query": "up"},
        separators=(",", ":"),
        sort_keys=True,
    ).encode()
    general = answers.parse(body, "q")
    fast = answers.from_record_line(line)
    if fast is not None:
        _same(fast["answer"], general)


@FAST
@given(pages=st.lists(json_values, max_size=3))
def test_kubernetes_list_parsers_never_crash(pages: Any) -> None:
    for obj in kube.items(pages):
        kube.pod_row(obj)
        kube.node_row(obj)


values = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.just("NaN"),
    st.just("+Inf"),
    st.just("-1"),
    st.just("garbage"),
    st.integers(-5, 5),
)


@FAST
@given(
    vals=st.lists(values, min_size=1, max_size=8),
    dup=st.booleans(),
    ts=st.integers(-10_000, 10_000),
)
def test_bad_values_are_left_out_and_counted(vals: list[Any], dup: bool, ts: int) -> None:
    snap = make_snapshot([Series(gpu_labels(pod="p", namespace="ns"), act=[0.5] * 4)], hours=4)
    body = snap.prometheus["act_hourly"][0]["body"]
    series = body["data"]["result"][0]
    series["values"] = [
        [1_700_000_000 + ts + i, v if isinstance(v, str) else repr(v)] for i, v in enumerate(vals)
    ]
    if dup:  # a duplicate series (say, two Prometheus replicas)
        body["data"]["result"].append(json.loads(json.dumps(series)))
    inv = build(snap)
    assert inv.hourly[C.ACT].map(math.isfinite).all()
    bad = sum(1 for v in vals if not _finite(v))
    if bad:
        assert any("left out" in w for w in inv.warnings)


def _finite(v: Any) -> bool:
    try:
        return math.isfinite(float(v))
    except (TypeError, ValueError):
        return False


@FAST
@given(cut=st.integers(min_value=1, max_value=400))
def test_truncated_snapshot_files_are_one_clear_error(cut: int, tmp_path_factory: Any) -> None:
    snap = make_snapshot([Series(gpu_labels(pod="p", namespace="ns"), act=[0.5] * 4)], hours=4)
    data = json.dumps(snap.to_json()).encode()
    path = tmp_path_factory.mktemp("t") / "s.json"
    path.write_bytes(data[: max(1, len(data) - cut)])
    with pytest.raises(SnapshotError):
        snapshot.read(path)


def test_gzip_bomb_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "bomb.json.gz"
    with gzip.open(path, "wb") as fh:
        fh.write(b'{"format": "gpuaudit-snapshot", "pad": "')
        chunk = b"0" * (1 << 20)
        for _ in range(64):
            fh.write(chunk)
        fh.write(b'"}')
    assert path.stat().st_size < 1 << 20
    with pytest.raises(SnapshotError, match="more than"):
        snapshot.read(path, limit=16 << 20)


def test_corrupt_gzip_is_one_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "c.json.gz"
    path.write_bytes(b"\x1f\x8b" + b"\x00" * 40)
    with pytest.raises(SnapshotError):
        snapshot.read(path)


@FAST
@given(body=st.binary(max_size=200), status=st.sampled_from([200, 400, 422, 500, 503]))
def test_prometheus_client_turns_garbage_into_one_error(body: bytes, status: int) -> None:
    import httpx

    def handler(req: httpx.Request) -> httpx.Response:
        return httpx.Response(status, content=body)

    client = PromClient(
        PromConfig(url="http://p.test", retries=0),
        transport=httpx.MockTransport(handler),
        sleep=lambda s: None,
    )
    try:
        client.query("up", 0)
    except PromError as exc:
        assert "\n" not in str(exc)


# ---- the fast answer reader and the general parse agree on malformed samples ------------------

TIME_TOKENS = st.one_of(
    st.integers(-(10**12), 10**12).map(str),
    st.floats(-1e12, 1e12, allow_nan=False).map(repr),
    st.sampled_from(
        ["NaN", "Infinity", "-Infinity", "null", "true", '"1"', "01", "-01", ".5", "5.", "+1"]
        + ["1e5", "1E+5", "-0", "0", "", "1.2.3", "-", "0.5", "1e400", " 1", "00"]
    ),
)
VALUE_TOKENS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(lambda f: f'"{f!r}"'),
    st.sampled_from(
        ['"0.5"', '"NaN"', '"+Inf"', '"-Inf"', '""', '"1e-05"', "5", "NaN", "Infinity", "null"]
        + ["true", '"1,5"', '"x"', '"-.5"', '"01"', '" 1"', '"1_0"', '"\u0661"', '"Inf"', '"nan"']
        + ['"-NaN"', '"NA"', '"1e"', '"0.5]"', '"[1"', '"\\n"', '"\\""', "[]", "{}"]
    ),
)
POINT = st.one_of(
    st.tuples(TIME_TOKENS, VALUE_TOKENS).map(lambda p: f"[{p[0]},{p[1]}]"),
    st.tuples(TIME_TOKENS, VALUE_TOKENS, VALUE_TOKENS).map(lambda p: f"[{p[0]},{p[1]},{p[2]}]"),
    st.sampled_from(["[1]", "[]", "1", "{}", '"x"', '[[1,"2"]]']),
)
LABELS = st.one_of(
    st.dictionaries(st.sampled_from(["UUID", "gpu", "pod"]), st.text(max_size=4), max_size=3).map(
        lambda d: json.dumps(d, separators=(",", ":"))
    ),
    st.sampled_from(['{"gpu":5}', '{"gpu":["x"]}', '{"gpu":null}', '{"a":true}']),
)


@FAST
@given(
    series=st.lists(st.tuples(LABELS, st.lists(POINT, max_size=5)), max_size=6),
    matrix=st.booleans(),
)
def test_both_answer_readers_agree_on_malformed_samples(
    series: list[tuple[str, list[str]]], matrix: bool
) -> None:
    """Text as a hostile backend might write it, sample by sample (a third element, `NaN` or
    `Infinity` literals, `.5`, `01`, labels that are not strings): the fast reader gives
    exactly what the general parse gives, or leaves the answer to it; JSON the general parse
    refuses, the fast reader refuses too."""
    if matrix:
        items = [f'{{"metric":{m},"values":[{",".join(pts)}]}}' for m, pts in series]
    else:
        items = [f'{{"metric":{m},"value":{pts[0] if pts else "[]"}}}' for m, pts in series]
    rtype = "matrix" if matrix else "vector"
    raw = (
        f'{{"status":"success","data":{{"resultType":"{rtype}","result":[{",".join(items)}]}}}}'
    ).encode()
    try:
        general: answers.Answer | None = answers.parse(orjson.loads(raw), "q")
    except (orjson.JSONDecodeError, SnapshotError):
        general = None
    fast = answers.from_record_line(b'{"body":' + raw + b"}")
    if general is None:
        assert fast is None
        with pytest.raises(SnapshotError):
            answers.from_bytes(raw, "q")
        return
    if fast is not None:
        _same(fast["answer"], general)
    _same(answers.from_bytes(raw, "q"), general)


def test_one_malformed_sample_drops_only_itself_in_both_readers() -> None:
    """The report of issue 20: `[t, "v", 5]` first among eight series made the fast reader
    keep one series with the value 5 and drop the seven others."""
    for rtype, key in (("vector", "value"), ("matrix", "values")):
        good = '[1700000000,"0.5"]'
        bad = '[1700000000,"0.5",5]'
        pts = [bad if i == 0 else good for i in range(8)]
        items = [
            f'{{"metric":{{"gpu":"{i}"}},"{key}":{p if rtype == "vector" else f"[{p},{good}]"}}}'
            for i, p in enumerate(pts)
        ]
        raw = (
            f'{{"status":"success","data":{{"resultType":"{rtype}","result":[{",".join(items)}]}}}}'
        )
        for answer in (
            answers.from_bytes(raw.encode(), "q"),
            answers.parse(orjson.loads(raw), "q"),
        ):
            assert answer.dropped == 1 and len(answer.metrics) == (7 if rtype == "vector" else 8)
            values = answer.values if rtype == "vector" else answer.vs
            assert set(values.tolist()) == {0.5}


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_literals_are_refused_by_both_readers(literal: str) -> None:
    for point in (f'[{literal},"1"]', f"[1700000000,{literal}]"):
        raw = (
            '{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},'
            f'"values":[{point},[1700003600,"1"]]}}]}}}}'
        ).encode()
        assert answers.from_record_line(b'{"body":' + raw + b"}") is None
        with pytest.raises(SnapshotError, match="not valid JSON"):
            answers.from_bytes(raw, "q")


# ---- the one reader of outside numbers --------------------------------------------------------


@FAST
@given(value=json_values | st.text() | st.integers() | st.floats())
def test_outside_numbers_are_finite_or_none(value: Any) -> None:
    """Whatever a file, label or answer holds: a finite number, or None. Never NaN, an
    infinity, a boolean read as 1, or digit-like text (`²`, `٣`) read as a count."""
    for read in (numbers.json_number, numbers.sample_value, numbers.sample_time):
        got = read(value)
        assert got is None or (isinstance(got, float) and math.isfinite(got))
    q = numbers.quantity(value)
    assert q is None or (math.isfinite(q) and q >= 0)
    n = numbers.whole_number(value)
    assert n is None or (isinstance(n, int) and n >= 0)
    if isinstance(value, str) and n is not None:
        assert value.strip().isascii()
    i = numbers.index_label(value)
    assert i is None or 0 <= i < 10**6
    if isinstance(value, bool):
        assert all(
            r(value) is None for r in (numbers.json_number, numbers.sample_value, numbers.quantity)
        )


@pytest.mark.parametrize(
    ("text", "want"),
    [("8", 8.0), ("500m", 0.5), ("2Gi", 2.0 * 2**30), ("1k", 1e3), ("1e3", 1e3), ("nan", None)]
    + [("Infinity", None), ("inf", None), ("-1", None), ("²", None), ("1_0", None), ("", None)]
    + [("1e999", None), ("E", None), ("٣", None)]
    # The grammar of k8s.io/apimachinery resource.Quantity: one suffix at most, no spaces.
    + [(".5", 0.5), ("1.", 1.0), ("+2", 2.0), ("1E", 1e18), ("1E3", 1e3), ("1e-3", 1e-3)]
    + [("3n", 3e-9), ("2u", 2e-6), ("1Ki", 1024.0), ("-0", 0.0), ("1e400", None), ("١٢", None)]
    + [(" 8", None), ("8 ", None), ("1e3Ki", None), ("1.5.2", None), (".", None), ("1e", None)]
    + [("1e1.5", None), ("1ki", None), ("0x10", None), ("8\n", None)],
)
def test_kubernetes_quantities(text: str, want: float | None) -> None:
    assert numbers.quantity(text) == want


@pytest.mark.parametrize(("text", "want"), [("-4", -4.0), ("-1.5Ki", -1536.0), ("+3", 3.0)])
def test_signed_kubernetes_quantities(text: str, want: float) -> None:
    assert numbers.signed_quantity(text) == want
    assert numbers.quantity(text) == (want if want >= 0 else None)
