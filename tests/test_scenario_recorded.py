"""The scenario's recorded series (`gpuaudit.scenario.recorded_series`) against the rules'
definition applied sample by sample to the scenario's raw OpenMetrics: for each evaluation, the
sum, count and maximum of the raw samples in its 5-minute range, grouped by the rules' `by` labels.
The phases include ones that fall on samples, where Prometheus before 3.0 (closed ranges) counts a
sample in two evaluations and 3.0 on (left-open ranges) in one. The promtool comparison is in
`tests/live/test_recorded_generator.py`."""

from __future__ import annotations

import io
import re
from collections import defaultdict

import numpy as np
import pytest

from gpuaudit.scenario import generate, write_openmetrics
from gpuaudit.scenario import recorded_series as recorded
from gpuaudit.scenario.recorded_series import write_recorded
from gpuaudit.sources.prometheus import catalogue

LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
CHECKED = (catalogue.ACT_PROF, catalogue.FB_USED)
"""The metrics compared sample by sample (one read as decimals, one as integers): the
definition applied to every raw sample of a scenario is slow in Python."""
Series = dict[tuple[str, tuple[tuple[str, str], ...]], list[tuple[int, float]]]


def _series(text: str, names: tuple[str, ...] | None = None) -> Series:
    by = catalogue.IDENTITY_LABELS + catalogue.POD_LABELS["exported"]
    out: Series = defaultdict(list)
    keys: dict[str, tuple[tuple[str, str], ...]] = {}
    for line in text.splitlines():
        if line.startswith("#") or (names is not None and not line.startswith(names)):
            continue
        head, val, ts = line.rsplit(" ", 2)
        name, _, labels = head.partition("{")
        if names is not None and name not in names:
            continue
        key = keys.get(labels)
        if key is None:
            d = dict(LABEL.findall(labels))
            key = keys[labels] = tuple((k, d[k]) for k in by if d.get(k))
        out[(name, key)].append((int(float(ts) * 1000), float(val)))
    return out


def _by_definition(raw: str, evals: range, left_open: bool) -> Series:
    """Each evaluation's sum, count and maximum of the raw samples in its range, per group."""
    out: Series = defaultdict(list)
    t = np.array(evals, dtype=np.int64)
    for (name, key), pts in _series(raw, CHECKED).items():
        pts.sort()
        ts = np.array([p[0] for p in pts])
        vs = np.array([p[1] for p in pts])
        a = np.searchsorted(ts, t - 300_000, "right" if left_open else "left")
        b = np.searchsorted(ts, t, "right")
        for i in np.flatnonzero(b > a).tolist():
            w = vs[a[i] : b[i]]
            for agg, x in (("sum", w.sum()), ("count", len(w)), ("max", w.max())):
                out[(catalogue.record_name(name, agg), key)].append((int(t[i]), float(x)))
    return out


@pytest.mark.parametrize(
    ("phase_ms", "left_open"), [(67_000, False), (30_000, False), (30_000, True)]
)
def test_recorded_series_follow_the_rules_definition(phase_ms: int, left_open: bool) -> None:
    sc = generate(12, 1, 4, scrape_s=60)
    raw, rec = io.StringIO(), io.StringIO()
    write_openmetrics(sc, raw)
    n = write_recorded(sc, rec, phase_ms=phase_ms, left_open=left_open)
    first = sc.start * 1000 + (phase_ms - sc.start * 1000) % 300_000
    evals = range(first, sc.end * 1000 + 1, 300_000)
    want = _by_definition(raw.getvalue(), evals, left_open)
    text = rec.getvalue()
    names = [catalogue.record_name(m, a) for m in catalogue.RECORDED for a in catalogue.AGGS]
    families = [x.split()[2] for x in text.splitlines() if x.startswith("# TYPE ")]
    assert families == [*names, catalogue.HEARTBEAT]
    assert n == text.count("\n") - len(families) - 1
    mine = tuple(catalogue.record_name(m, a) for m in CHECKED for a in catalogue.AGGS)
    checked = _series(text, (*mine, catalogue.HEARTBEAT))
    assert checked.pop((catalogue.HEARTBEAT, ())) == [(t, 1.0) for t in evals]
    assert checked.keys() == want.keys()
    for key, pts in want.items():
        assert [t for t, _ in checked[key]] == [t for t, _ in pts], key
        np.testing.assert_allclose([v for _, v in checked[key]], [v for _, v in pts], rtol=1e-12)
    # Samples on an evaluation count twice with closed ranges, once with left-open ones.
    counts = {v for (name, _), pts in want.items() if name.endswith("count5m") for _, v in pts}
    assert 5.0 in counts and (6.0 in counts) == (phase_ms == 30_000 and not left_open)


def test_span_keeps_the_evaluations_inside_it(monkeypatch: pytest.MonkeyPatch) -> None:
    sc = generate(12, 1, 4, scrape_s=300)
    whole, first_half, second_half = io.StringIO(), io.StringIO(), io.StringIO()
    mid = (sc.start + 43_200) * 1000
    write_recorded(sc, whole)
    # Small chunks: some hold series with no point in a half, and the figures stay the same.
    monkeypatch.setattr(recorded, "CHUNK_POINTS", 30)
    write_recorded(sc, first_half, span_ms=(sc.start * 1000, mid))
    write_recorded(sc, second_half, span_ms=(mid, sc.end * 1000 + 1))
    halves = sorted(first_half.getvalue().splitlines() + second_half.getvalue().splitlines())
    lines = sorted(whole.getvalue().splitlines())
    assert halves == sorted(lines + ["# EOF"] + [x for x in lines if x.startswith("# TYPE")])
