"""Prometheus query answers held as arrays.

An answer of the HTTP API (`{"status": "success", "data": {"resultType": ..., "result": [...]}}`)
is parsed once into an `Answer`: the label sets of its series, and their samples as float64
numpy arrays. Held that way, the 2.7 million hourly points of a 10,000-GPU week take 43 MB
instead of the 1.9 GB the same JSON takes as Python lists and strings.

Every path goes through here: live answers, answers in a version 1 snapshot, and answer lines of
a version 2 snapshot, which are streamed and, for range vectors, parsed straight from their bytes
(`from_record_line`). Unusable samples (NaN, infinities, malformed points) are left out and
counted; a malformed series is left out and counted; an answer that is not a successful vector
or matrix raises `SnapshotError` naming where it came from.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpuaudit.errors import SnapshotError

Arr = np.ndarray[Any, np.dtype[Any]]
Labels = Mapping[str, Any]


class Interner:
    """One shared object per distinct label set. The same series comes back from every query;
    sharing its labels saves memory and lets the inventory recognise a series by identity."""

    def __init__(self) -> None:
        self._seen: dict[tuple[tuple[str, Any], ...], Labels] = {}
        self.texts: dict[bytes, Labels] = {}
        """Label sets by their JSON text, as `text` parsed them."""

    def __call__(self, labels: Labels) -> Labels:
        try:
            key = tuple(labels.items())
            return self._seen.setdefault(key, labels)
        except TypeError:  # an unhashable label value: keep the object as it is
            return labels

    def text(self, raw: bytes) -> Labels:
        """The label set written as `raw` (a JSON object), parsed once per distinct text."""
        import orjson

        labels = self.texts.get(raw)
        if labels is None:
            try:
                parsed = orjson.loads(raw)
            except orjson.JSONDecodeError:
                raise _NotCompact from None
            if not isinstance(parsed, dict):
                raise _NotCompact
            labels = self.texts[raw] = self(parsed)
        return labels


@dataclass
class Answer:
    """The series of one answer. For a vector, `values[i]` is series i's sample; for a matrix,
    series i's points are `ts[offsets[i]:offsets[i + 1]]` and `vs[...]` (in the answer's order)."""

    rtype: str
    """`vector` or `matrix`."""
    metrics: list[Labels]
    values: Arr = field(default_factory=lambda: np.empty(0))
    offsets: Arr = field(default_factory=lambda: np.zeros(1, dtype=np.int64))
    ts: Arr = field(default_factory=lambda: np.empty(0))
    vs: Arr = field(default_factory=lambda: np.empty(0))
    dropped: int = 0
    """Sample values left out: NaN, infinite or malformed."""
    malformed: int = 0
    """Series left out: no label object, or no list of points."""

    def series(self, i: int) -> tuple[Arr, Arr]:
        """Series i's (timestamps, values) of a matrix."""
        a, b = int(self.offsets[i]), int(self.offsets[i + 1])
        return self.ts[a:b], self.vs[a:b]

    def to_body(self) -> dict[str, Any]:
        """An API answer with these series (values written as Python writes floats)."""
        if self.rtype == "vector":
            result: list[dict[str, Any]] = [
                {"metric": dict(m), "value": [_json_time(t), repr(float(v))]}
                for m, t, v in zip(
                    self.metrics,
                    _times(self.ts, len(self.values)),
                    self.values.tolist(),
                    strict=True,
                )
            ]
        else:
            result = []
            for i, m in enumerate(self.metrics):
                ts, vs = self.series(i)
                result.append(
                    {
                        "metric": dict(m),
                        "values": [
                            [_json_time(t), repr(v)]
                            for t, v in zip(ts.tolist(), vs.tolist(), strict=True)
                        ],
                    }
                )
        return {"status": "success", "data": {"resultType": self.rtype, "result": result}}


def one_line(raw: bytes) -> bool:
    """Whether an answer's bytes are one JSON object on one line, fit to go into a snapshot
    line as they are (a JSON string holds no raw newline, so one can only be spacing)."""
    text = raw.strip()
    return text.startswith(b"{") and text.endswith(b"}") and b"\n" not in text and b"\r" not in text


def _json_time(t: float) -> int | float | None:
    """A sample time as the API writes it in JSON: whole seconds as an integer."""
    if not math.isfinite(t):  # not written as JSON's invalid NaN or Infinity
        return None
    return int(t) if float(t).is_integer() else t


def _times(ts: Arr, n: int) -> list[float]:
    """A vector's sample times (NaN where unknown, as for answers built without them)."""
    return ts.tolist() if len(ts) == n else [math.nan] * n


def _result(body: Any, where: str) -> tuple[str, list[Any]]:
    if not isinstance(body, Mapping):
        raise SnapshotError(f"{where}: answer is not a JSON object")
    if body.get("status") != "success":
        err = body.get("error", "no error text")
        raise SnapshotError(f"{where}: Prometheus answered status {body.get('status')!r}: {err}")
    data = body.get("data")
    if not isinstance(data, Mapping):
        raise SnapshotError(f"{where}: answer has no data object")
    rtype = data.get("resultType")
    if rtype not in ("vector", "matrix"):
        raise SnapshotError(f"{where}: expected resultType 'vector' or 'matrix', got {rtype!r}")
    result = data.get("result")
    if not isinstance(result, list):
        raise SnapshotError(f"{where}: data.result is not a list")
    return str(rtype), result


def _value(raw: Any) -> float | None:
    """A sample value as Prometheus encodes it ([ts, "str"]); None for unusable values."""
    if not isinstance(raw, (list, tuple)) or len(raw) != 2:
        return None
    try:
        v = float(raw[1])
    except (TypeError, ValueError):
        return None
    if math.isnan(v) or math.isinf(v):
        return None
    return v


def _time(raw: Any) -> float:
    """A vector sample's timestamp (kept to write the answer back); NaN when unreadable."""
    try:
        return float(raw)
    except (TypeError, ValueError):
        return math.nan


def _points(values: list[Any]) -> tuple[Arr, Arr, int]:
    """One series' points as arrays, unusable ones left out; and how many were left out."""
    try:
        ts = np.array([p[0] for p in values], dtype=np.float64)
        vs = np.array([p[1] for p in values], dtype=np.float64)
        if any(not isinstance(p, (list, tuple)) or len(p) != 2 for p in values):
            raise ValueError("not a [time, value] pair")
    except (TypeError, ValueError, IndexError, KeyError):
        tl: list[float] = []
        vl: list[float] = []
        bad = 0
        for raw in values:
            v = _value(raw)
            try:
                t = float(raw[0]) if v is not None else math.nan
            except (TypeError, ValueError):
                t = math.nan
            if v is None or not math.isfinite(t):
                bad += 1
                continue
            tl.append(t)
            vl.append(v)
        return np.array(tl, dtype=np.float64), np.array(vl, dtype=np.float64), bad
    ok = np.isfinite(vs) & np.isfinite(ts)
    bad = int(len(ok) - int(ok.sum()))
    if bad:
        ts, vs = ts[ok], vs[ok]
    return ts, vs, bad


def parse(body: Any, where: str, intern: Interner | None = None) -> Answer:
    """Parse one API answer (a vector or a matrix)."""
    rtype, result = _result(body, where)
    keep = intern or (lambda m: m)
    metrics: list[Labels] = []
    malformed = dropped = 0
    if rtype == "vector":
        vals: list[float] = []
        times: list[float] = []
        for item in result:
            metric = item.get("metric") if isinstance(item, Mapping) else None
            if not isinstance(metric, Mapping):
                malformed += 1
                continue
            raw = item.get("value")
            v = _value(raw)
            if v is None:
                dropped += 1
                continue
            metrics.append(keep(metric))
            vals.append(v)
            times.append(_time(raw[0]))
        return Answer(
            rtype,
            metrics,
            values=np.array(vals, dtype=np.float64),
            ts=np.array(times, dtype=np.float64),
            dropped=dropped,
            malformed=malformed,
        )
    tss: list[Arr] = []
    vss: list[Arr] = []
    for item in result:
        metric = item.get("metric") if isinstance(item, Mapping) else None
        values = item.get("values") if isinstance(item, Mapping) else None
        if not isinstance(metric, Mapping) or not isinstance(values, list):
            malformed += 1
            continue
        ts, vs, bad = _points(values)
        dropped += bad
        metrics.append(keep(metric))
        tss.append(ts)
        vss.append(vs)
    return _matrix(metrics, tss, vss, dropped, malformed)


def from_bytes(raw: bytes, where: str, intern: Interner | None = None) -> Answer:
    """Parse one API answer from its bytes: through the fast reader when they are in the
    usual compact form, else the general way (same result)."""
    import orjson

    fast = from_record_line(b'{"body":' + raw + b"}", intern)
    if fast is not None:
        answer: Answer = fast["answer"]
        return answer
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise SnapshotError(f"{where}: answer is not valid JSON: {exc}") from None
    return parse(body, where, intern)


def _matrix(
    metrics: list[Labels], tss: list[Arr], vss: list[Arr], dropped: int, malformed: int
) -> Answer:
    lengths = np.array([len(t) for t in tss], dtype=np.int64)
    offsets = np.zeros(len(tss) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    empty = np.empty(0, dtype=np.float64)
    return Answer(
        "matrix",
        metrics,
        offsets=offsets,
        ts=np.concatenate(tss) if tss else empty,
        vs=np.concatenate(vss) if vss else empty,
        dropped=dropped,
        malformed=malformed,
    )


# ---- answers straight from their bytes ----------------------------------------------------

_METRIC = b'{"metric":'
_VALUE = b',"value":['
_VALUES = b',"values":['
_STRIP = b'[]"'


_PRECISE: dict[str, Any] = {}
"""pandas 3 reads floats exactly by default (and deprecates the option); pandas 2 needs
`float_precision="round_trip"` for that."""


def _read_pairs(text: bytes, series: int, rtype: str) -> tuple[Arr, Arr, Arr]:
    """The samples cut out of an answer, one series per line of `text` (`t,"v"` for a vector,
    `[t,"v"],[t,"v"]` for a matrix), as two float64 arrays and the number of points of each
    series. Read by pandas' C CSV reader, which rounds correctly, as `float()` does, and reads
    `NaN` and `+Inf`. The brackets and quotes must add up exactly, so that nothing but numbers
    is read."""
    import io

    import pandas as pd

    if not _PRECISE and int(pd.__version__.split(".")[0]) < 3:
        _PRECISE["float_precision"] = "round_trip"
    chars = np.frombuffer(text, dtype=np.uint8)
    # The series' lines (no sample holds a newline: the text came from one JSON line).
    bounds = np.concatenate(([0], np.flatnonzero(chars == ord("\n")) + 1, [len(chars) + 1]))
    if len(bounds) != series + 1:
        raise _NotCompact
    if rtype == "vector":
        per = np.ones(series, dtype=np.int64)
    else:
        opens = np.flatnonzero(chars == ord("["))
        per = np.diff(np.searchsorted(opens, bounds)).astype(np.int64)
    del chars
    points = int(per.sum())
    if points == 0:
        return np.empty(0), np.empty(0), per
    if rtype == "matrix":
        text = text.replace(b"],[", b"\n")
        # What is left of the brackets: one pair around each series' points.
        pairs = int((per > 0).sum())
        if text.count(b"[") != pairs or text.count(b"]") != pairs:
            raise _NotCompact
    elif b"[" in text or b"]" in text:
        raise _NotCompact
    if text.count(b'"') != 2 * points:
        raise _NotCompact
    text = text.translate(None, _STRIP)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            frame = pd.read_csv(
                io.BytesIO(text),
                header=None,
                names=["t", "v"],
                dtype=np.float64,
                engine="c",
                skip_blank_lines=True,
                **_PRECISE,
            )
    except (ValueError, TypeError, pd.errors.ParserError, Warning):
        raise _NotCompact from None
    if len(frame) != points:
        raise _NotCompact
    ts = frame["t"].to_numpy(dtype=np.float64)
    vs = frame["v"].to_numpy(dtype=np.float64)
    return ts, vs, per


class _NotCompact(Exception):
    """The line is not in the compact form the fast path reads; parse it the general way."""


def from_record_line(line: bytes, intern: Interner | None = None) -> dict[str, Any] | None:
    """A version 2 snapshot line holding an answer, parsed without a Python object per
    series or point: each series' labels text is looked up (parsed once per distinct label
    set), the samples are cut out of the text and read by numpy, and the rest (query, params,
    envelope) by orjson. Returns the record with `answer` in place of `body`, or None when the
    line is not in the compact form written by gpuaudit and Prometheus (the caller then parses
    it the general way, to the same result).

    The markers searched for cannot occur inside a JSON string, where every `"` is escaped;
    anything unexpected (other keys, spacing, a count that does not add up) gives None."""
    # With sorted keys `resultType` follows the series, near the end of the line.
    at = line.rfind(b'"resultType":"')
    kind = line[at + 14 : at + 20] if at >= 0 else b""
    if kind == b"matrix":
        rtype = "matrix"
    elif kind == b"vector":
        rtype = "vector"
    else:
        return None
    try:
        return _fast(line, rtype, intern or Interner())
    except _NotCompact:
        return None


def _fast(line: bytes, rtype: str, intern: Interner) -> dict[str, Any]:
    import orjson

    head, *rows = line.split(_METRIC)
    if not rows:
        raise _NotCompact
    mark = _VALUES if rtype == "matrix" else _VALUE
    cut = [r.partition(mark) for r in rows]
    texts = [c[0] for c in cut]
    tails = [c[2] for c in cut]
    # Every series but the last ends `]},` (the next one follows); the last ends `]}` and the
    # rest of the document follows it.
    last = tails[-1]
    end = last.find(b"]}" if rtype == "vector" or last.startswith(b"]") else b"]]}")
    if end < 0:
        raise _NotCompact
    end += 1 if rtype == "vector" or last.startswith(b"]") else 2
    tails[-1] = last[:end] + b"},"
    rest = last[end + 1 :]
    if not all(c[1] for c in cut):
        raise _NotCompact
    # The samples, one series a line. A JSON line holds no newline, so every `]},` + newline
    # below is the end of one series: as many as there are joins means each ends right.
    joined = b"\n".join(tails)
    del tails
    if joined.count(b"]},\n") != len(rows) - 1 or not joined.endswith(b"]},"):
        raise _NotCompact
    text = joined.replace(b"]},\n", b"\n")[:-3]
    del joined
    try:
        record = orjson.loads(head + b",".join([b"0"] * len(rows)) + rest)
        rt, result = _result(record["body"], "")
    except (orjson.JSONDecodeError, SnapshotError, TypeError, KeyError):
        raise _NotCompact from None
    if rt != rtype or len(result) != len(rows) or any(x != 0 for x in result):
        raise _NotCompact
    known = intern.texts
    metrics = [known.get(t) or intern.text(t) for t in texts]
    ts, vs, per = _read_pairs(text, len(rows), rtype)
    # As the general parse: a vector row is judged by its value, a matrix point by both.
    ok = np.isfinite(vs) if rtype == "vector" else np.isfinite(vs) & np.isfinite(ts)
    dropped = int(len(ok) - int(ok.sum()))
    del record["body"]
    if rtype == "vector":
        if dropped:
            metrics = [m for m, good in zip(metrics, ok.tolist(), strict=True) if good]
        record["answer"] = Answer("vector", metrics, values=vs[ok], ts=ts[ok], dropped=dropped)
        return dict(record)
    offsets = np.zeros(len(per) + 1, dtype=np.int64)
    np.cumsum(per, out=offsets[1:])
    if dropped:
        kept = np.zeros(len(ok) + 1, dtype=np.int64)
        np.cumsum(ok, out=kept[1:])
        offsets = kept[offsets]
        ts, vs = ts[ok], vs[ok]
    record["answer"] = Answer("matrix", metrics, offsets=offsets, ts=ts, vs=vs, dropped=dropped)
    return dict(record)
