"""Prometheus query answers held as arrays.

An answer of the HTTP API (`{"status": "success", "data": {"resultType": ..., "result": [...]}}`)
is parsed once into an `Answer`: the label sets of its series, and their samples as float64
numpy arrays. Held that way, a fleet's week of hourly points takes a small part of the memory
the same JSON takes as Python lists and strings (`benchmarks/README.md` has the figures).

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
from typing import Any, TypeGuard

import numpy as np

from gpuaudit.core.errors import SnapshotError
from gpuaudit.core.numbers import sample_time, sample_value

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
            if not isinstance(parsed, dict) or not _labels(parsed):
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
    numbers: Arr | None = None
    """Read from a columnar side-file (`columns`): each series' number in the side-file's table
    of distinct label sets (one label object per number, shared by every answer), so that a
    reader may look series up by number; None otherwise."""

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
    return sample_value(raw[1])


def _time(raw: Any) -> float:
    """A vector sample's timestamp (kept to write the answer back); NaN when unreadable."""
    t = sample_time(raw)
    return math.nan if t is None else t


def _labels(metric: Any) -> TypeGuard[Labels]:
    """Whether `metric` is a label set: an object whose every value is a string (Prometheus
    writes nothing else; a series with a number or a list for a label value is malformed)."""
    return isinstance(metric, Mapping) and all(isinstance(v, str) for v in metric.values())


_NUMBER_TYPES = (int, float)
_VALUE_TYPES = (str, int, float)


def _points(values: list[Any]) -> tuple[Arr, Arr, int]:
    """One series' points as arrays, unusable ones left out; and how many were left out.

    A point is usable when it is a [time, value] pair with a finite JSON number for the time
    and a finite value (`numbers.sample_value`). The usual answer, all pairs of the right
    types, is converted in one step; any other goes point by point, to the same result."""
    pairs = all(type(p) in (list, tuple) and len(p) == 2 for p in values)
    if (
        pairs
        and all(type(p[0]) in _NUMBER_TYPES for p in values)
        and all(type(p[1]) in _VALUE_TYPES for p in values)
    ):
        try:
            ts = np.array([p[0] for p in values], dtype=np.float64)
            vs = np.array([p[1] for p in values], dtype=np.float64)
        except (ValueError, OverflowError):
            pass  # a value that is not a number, or a time too large: point by point
        else:
            ok = np.isfinite(vs) & np.isfinite(ts)
            bad = int(len(ok) - int(ok.sum()))
            if bad:
                ts, vs = ts[ok], vs[ok]
            return ts, vs, bad
    tl: list[float] = []
    vl: list[float] = []
    bad = 0
    for raw in values:
        v = _value(raw)
        t = sample_time(raw[0]) if v is not None else None
        if v is None or t is None:
            bad += 1
            continue
        tl.append(t)
        vl.append(v)
    return np.array(tl, dtype=np.float64), np.array(vl, dtype=np.float64), bad


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
            if not _labels(metric):
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
        if not _labels(metric) or not isinstance(values, list):
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
    `NaN` and `+Inf`. Only text in exactly the form Prometheus writes is read this way
    (`_well_formed`): anything else, even valid JSON, is left to the general parse."""
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
        if text.strip(b"\n"):  # series without points are empty lines, and nothing else
            raise _NotCompact
        return np.empty(0), np.empty(0), per
    if rtype == "matrix":
        text = text.replace(b"],[", b"\n")
        # What is left of the brackets: one pair around each series' points.
        pairs = int((per > 0).sum())
        if text.count(b"[") != pairs or text.count(b"]") != pairs:
            raise _NotCompact
    elif b"[" in text or b"]" in text:
        raise _NotCompact
    if not _well_formed(text, points):
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
    if len(frame) != points or frame.index[0] != 0:
        raise _NotCompact
    ts = frame["t"].to_numpy(dtype=np.float64)
    vs = frame["v"].to_numpy(dtype=np.float64)
    return ts, vs, per


def _well_formed(text: bytes, points: int) -> bool:
    """Whether `text` (one point `t,"v"` a line, a matrix series in `[` `]`) is exactly what
    Prometheus writes: each time a JSON number (`-`, digits, a `.` between digits, no leading
    zero) ending at its comma, each value one quoted number right after it. Text that pandas
    would also read, but that JSON does not allow or reads otherwise (`NaN` or `Infinity` as a
    time, `.5`, `01`, a third element, an empty time), is not. The checks run on whole arrays,
    a block of lines at a time, so that memory stays a small multiple of one block."""
    if b"\\" in text:  # an escape inside a string: never in a value Prometheus writes
        return False
    if text.count(b'"') != 2 * points or text.count(b",") != points:
        return False
    at = 0
    while at < len(text):
        end = text.find(b"\n", at + _BLOCK)
        end = len(text) if end < 0 else end + 1
        if not _block_well_formed(np.frombuffer(text, dtype=np.uint8, count=end - at, offset=at)):
            return False
        at = end
    return True


_BLOCK = 1 << 22
"""Bytes of sample text checked at once by `_well_formed`."""

# Classes of the characters other than digits. Within a value, they become `_V`, and the
# quotes around it `_OPEN` and `_CLOSE`.
_OTHER, _DOT, _MINUS, _COMMA, _QUOTE, _NL, _LB, _RB, _LETTER, _V, _OPEN, _CLOSE = range(12)
_CLASS = np.zeros(256, dtype=np.uint8)
for _chars, _cls in (
    (b".", _DOT),
    (b"-", _MINUS),
    (b",", _COMMA),
    (b'"', _QUOTE),
    (b"\n", _NL),
    (b"[", _LB),
    (b"]", _RB),
    (b"+eEInfNa", _LETTER),  # `1e-05`, `+Inf`, `NaN`: inside a value only
):
    _CLASS[np.frombuffer(_chars, dtype=np.uint8)] = _cls
_IN_VALUE = np.zeros(16, dtype=bool)
_IN_VALUE[[_DOT, _MINUS, _LETTER]] = True
_NEXT: dict[tuple[int, bool], tuple[int, ...]] = {
    (_NL, False): (_NL, _LB, _MINUS),
    (_NL, True): (_COMMA, _DOT),
    (_LB, False): (_MINUS,),
    (_LB, True): (_COMMA, _DOT),
    (_MINUS, True): (_COMMA, _DOT),
    (_DOT, True): (_COMMA,),
    (_COMMA, False): (_OPEN,),
    (_OPEN, False): (_V, _CLOSE),
    (_OPEN, True): (_V, _CLOSE),
    (_V, False): (_V, _CLOSE),
    (_V, True): (_V, _CLOSE),
    (_CLOSE, False): (_NL, _RB),
    (_RB, False): (_NL,),
}
"""The whole grammar of the sample text: (a class, whether digits follow it) -> the classes that
may come next. A time is `-?[0-9]+(.[0-9]+)?` (without a leading zero, checked apart), then
`,"`, the value, `"`, then the end of the point (a newline) or of the series (`]`)."""
_PAIR = np.zeros(512, dtype=bool)
for (_a, _digits), _bs in _NEXT.items():
    _PAIR[[_a * 32 + _digits * 16 + _b for _b in _bs]] = True


def _block_well_formed(c: Arr) -> bool:
    """`_well_formed` for whole lines of sample text. Runs of digits are looked at only as
    runs: the grammar is checked on the other characters, a few in every point."""
    pos = np.flatnonzero(np.subtract(c, np.uint8(ord("0"))) > np.uint8(9))
    cls = _CLASS[c[pos]]
    quotes = np.flatnonzero(cls == _QUOTE)
    if len(quotes) % 2:
        return False
    opens, closes = quotes[0::2], quotes[1::2]
    edges = np.zeros(len(cls) + 1, dtype=np.int8)
    edges[opens + 1] += 1
    edges[closes] -= 1
    within = np.cumsum(edges[:-1], dtype=np.int8).view(bool)
    del edges
    if not _IN_VALUE[cls[within]].all():
        return False
    cls[within] = _V
    cls[opens] = _OPEN
    cls[closes] = _CLOSE
    # The classes with a newline before the first and after the last; where each character
    # stands (-1 and the end for those newlines), and whether digits stand between neighbours.
    seq = np.empty(len(cls) + 2, dtype=np.uint16)
    seq[0] = seq[-1] = _NL
    seq[1:-1] = cls
    at = np.empty(len(pos) + 2, dtype=np.int64)
    at[0], at[-1] = -1, len(c)
    at[1:-1] = pos
    digits = (np.diff(at) > 1).view(np.uint8)
    if not _PAIR[(seq[:-1] << 5) | (digits << 4) | seq[1:]].all():
        return False
    # No leading zero in a time (`01`, `-01`): a number for pandas, not in JSON.
    before = seq[:-1]
    token = np.flatnonzero(
        digits.view(bool) & ((before == _NL) | (before == _LB) | (before == _MINUS))
    )
    first = at[token] + 1
    return not bool(((c[first] == ord("0")) & (at[token + 1] - first > 1)).any())


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
