"""The series `gpuaudit rules`' recording group would write over a scenario, computed straight
from the scenario's samples, as OpenMetrics for `promtool tsdb create-blocks-from openmetrics`.

A server evaluating the group over a scenario's raw series would need the raw series backfilled
first and then minutes per rule per day of history (`promtool tsdb create-blocks-from rules`
queries a server); at fleet scale that is hours. The scenario's samples follow a fixed pattern
(`emit.write_openmetrics`: in each hour a series alternates between its `hi` and `lo` level,
at half a scrape interval past each scrape mark), so how many `hi` and `lo` samples an
evaluation's 5-minute range holds depends only on where the evaluation falls in the hour. Each
rule's value is then, per raw series, `n_hi * hi + n_lo * lo` (count `n_hi + n_lo`, maximum the
larger level present), added up (maxed) over the raw series of each group of the rules' `by`
labels, exactly as `sum by (...) (sum_over_time(M[5m]))` adds them up. The heartbeat is 1 at
every evaluation. `tests/live/test_recorded_generator.py` proves on a real Prometheus that
promtool-evaluated rules give the same series.

Evaluations fall at `phase_ms` past each 5-minute mark (a server puts them at an offset hashed
from the group's name and file; promtool backfilling does the same). Ranges are closed at both
ends, as Prometheus before 3.0 reads them (`left_open` for 3.0 on); the scenario's samples never
fall on a whole second's 5-minute mark, so the two differ only for a phase that hits one.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import chain
from operator import add
from typing import IO, Any

import numpy as np

from gpuaudit.core.gcpause import without_gc
from gpuaudit.scenario.generator import Scenario
from gpuaudit.scenario.series import Table, Values, levels, sample_offsets_ms, spelling_of
from gpuaudit.sources.prometheus import catalogue
from gpuaudit.sources.prometheus.rules import RULE_INTERVAL_S

Arr = np.ndarray[Any, np.dtype[Any]]
EVERY_MS = RULE_INTERVAL_S * 1000
"""The group's evaluation interval."""
RANGE_MS = 300_000
"""The rules' range (`[5m]`)."""
HOUR_MS = 3_600_000
DEFAULT_PHASE_MS = 67_000
"""Where the benchmarks put the evaluations: 67 s past each 5-minute mark, off the hour (as a
server's hashed offset puts them) and off every sample of an even scrape interval."""
CHUNK_POINTS = 200_000
"""Hourly points of raw series handled at once (each makes about 13 contributions)."""


def _window_counts(sc: Scenario, phase_ms: int, left_open: bool) -> list[tuple[int, int, int]]:
    """For a raw series' points of one hour: (evaluation index from the hour's first one,
    `hi` samples, `lo` samples) of every evaluation whose range holds some of them. An
    evaluation's range reaches back into the hour before it only from the first evaluation of
    an hour (the range is 5 minutes, the interval too)."""
    offs = sample_offsets_ms(sc.scrape_s)
    e0 = (phase_ms - sc.start * 1000) % EVERY_MS
    out = []
    for k in range((HOUR_MS + RANGE_MS) // EVERY_MS + 1):
        t = e0 + k * EVERY_MS
        inside = ((offs > t - RANGE_MS) if left_open else (offs >= t - RANGE_MS)) & (offs <= t)
        n_hi, n_lo = int(inside[0::2].sum()), int(inside[1::2].sum())
        if n_hi or n_lo:
            out.append((k, n_hi, n_lo))
    return out


def _groups(v: Values, by: tuple[str, ...]) -> tuple[Arr, list[dict[str, str]]]:
    """Each raw series' group of the rules' `by` labels (labels with empty values are no
    labels to Prometheus) and each group's labels, in first-seen order."""
    index: dict[tuple[tuple[str, str], ...], int] = {}
    keys: list[dict[str, str]] = []
    gid = np.empty(len(v.labels), dtype=np.int64)
    for i, lab in enumerate(v.labels):
        key = tuple((k, lab[k]) for k in by if lab.get(k))
        g = index.get(key)
        if g is None:
            g = index[key] = len(keys)
            keys.append(dict(key))
        gid[i] = g
    return gid, keys


def _chunks(gid: Arr, off: Arr) -> Iterator[Arr]:
    """Series indices, ordered by group, in runs of whole groups of about `CHUNK_POINTS`
    points."""
    order = np.argsort(gid, kind="stable")
    lens = np.diff(off)[order]
    start, acc = 0, 0
    for i in range(len(order)):
        acc += int(lens[i])
        last = i + 1 == len(order) or gid[order[i + 1]] != gid[order[i]]
        if last and acc >= CHUNK_POINTS:
            yield order[start : i + 1]
            start, acc = i + 1, 0
    if start < len(order):
        yield order[start:]


def _aggregate(
    v: Values,
    hi: Arr,
    lo: Arr,
    gid: Arr,
    series: Arr,
    counts: list[tuple[int, int, int]],
    per_hour_evals: int,
) -> tuple[Arr, Arr, Arr, Arr, Arr]:
    """(group, evaluation index, sum, count, max) of every evaluation of the groups of
    `series` that read a sample, sorted by group then evaluation."""
    lens = np.diff(v.off)[series]
    pts = np.concatenate([np.arange(v.off[s], v.off[s + 1]) for s in series.tolist()])
    g = np.repeat(gid[series], lens)
    h = v.hours[pts].astype(np.int64)
    ph, pl = hi[pts], lo[pts]
    keys, sums, cnts, maxs = [], [], [], []
    for k, n_hi, n_lo in counts:
        keys.append(h * per_hour_evals + k)
        sums.append(n_hi * ph + n_lo * pl)
        cnts.append(np.full(len(pts), n_hi + n_lo, dtype=np.int64))
        top = np.maximum(ph, pl) if n_hi and n_lo else (ph if n_hi else pl)
        maxs.append(top)
    ev, gg = np.concatenate(keys), np.tile(g, len(counts))
    s, c, m = np.concatenate(sums), np.concatenate(cnts), np.concatenate(maxs)
    order = np.lexsort((ev, gg))
    ev, gg, s, c, m = ev[order], gg[order], s[order], c[order], m[order]
    new = np.ones(len(ev), dtype=bool)
    new[1:] = (ev[1:] != ev[:-1]) | (gg[1:] != gg[:-1])
    at = np.flatnonzero(new)
    return (
        gg[at],
        ev[at],
        np.add.reduceat(s, at),
        np.add.reduceat(c, at),
        np.maximum.reduceat(m, at),
    )


def _stamp(t_ms: int) -> str:
    """` <timestamp>\\n` in seconds. promtool reads a timestamp as `int64(seconds * 1000)`,
    which truncates: `.962` can read as 961 ms in float64, so a millisecond timestamp is
    written half a millisecond late and truncates to itself."""
    sec, ms = divmod(t_ms, 1000)
    return f" {sec}\n" if ms == 0 else f" {sec}.{ms:03d}5\n"


Batch = tuple[list[dict[str, str]], Arr, Arr, Arr]
"""(each series' labels, offsets: series i's points are [off[i], off[i + 1]), unix
milliseconds, values)."""


def recorded_families(
    sc: Scenario,
    style: str = "helm",
    phase_ms: int = DEFAULT_PHASE_MS,
    span_ms: tuple[int, int] | None = None,
    left_open: bool = False,
) -> Iterator[tuple[str, Iterator[Batch]]]:
    """Every point the recording group of `gpuaudit rules` (for `style`'s pod label spelling)
    would record over the scenario's raw series (`emit.write_openmetrics` with the same
    `style`), evaluated at `phase_ms` past each 5-minute mark, at the evaluations `span_ms`
    (unix milliseconds, from inclusive to exclusive; default the scenario's window): each
    family's name and its series in batches (each series in ascending time), the heartbeat
    last. Memory is bounded by `CHUNK_POINTS`, not by the scenario's size; read each family's
    batches before the next family."""
    per_hour = 3600 // sc.scrape_s
    if per_hour % 2 or HOUR_MS % EVERY_MS:
        raise ValueError("scrape interval must be a whole number of seconds dividing 30 min")
    lo_ms, hi_ms = span_ms if span_ms is not None else (sc.start * 1000, sc.end * 1000 + 1)
    table = Table(sc, style)
    by = catalogue.IDENTITY_LABELS + catalogue.POD_LABELS[spelling_of(style)]
    counts = _window_counts(sc, phase_ms, left_open)
    per_hour_evals = HOUR_MS // EVERY_MS
    base = sc.start * 1000 + (phase_ms - sc.start * 1000) % EVERY_MS

    def batches(
        v: Values, hi: Arr, lo: Arr, gid: Arr, keys: list[dict[str, str]], i: int
    ) -> Iterator[Batch]:
        for series in _chunks(gid, v.off):
            g, ev, s, c, m = _aggregate(v, hi, lo, gid, series, counts, per_hour_evals)
            t = base + ev * EVERY_MS
            keep = (t >= lo_ms) & (t < hi_ms)
            g, t = g[keep], t[keep]
            if not len(t):  # these series have no point in the span
                continue
            cuts = np.flatnonzero(np.diff(g)) + 1
            off = np.concatenate([[0], cuts, [len(g)]]).astype(np.int64)
            yield [keys[int(x)] for x in g[off[:-1]].tolist()], off, t, (s, c, m)[i][keep]

    for metric in catalogue.RECORDED:
        v = table.values(metric)
        if v is None:
            continue
        hi, lo = levels(v)
        gid, keys = _groups(v, by)
        for i, agg in enumerate(catalogue.AGGS):
            yield catalogue.record_name(metric, agg), batches(v, hi, lo, gid, keys, i)
    first = lo_ms + (phase_ms - lo_ms) % EVERY_MS
    t = np.arange(first, hi_ms, EVERY_MS, dtype=np.int64)
    beat: Batch = ([{}], np.array([0, len(t)], dtype=np.int64), t, np.ones(len(t), dtype=np.int64))
    yield catalogue.HEARTBEAT, iter([beat] if len(t) else [])


@without_gc
def write_recorded(
    sc: Scenario,
    out: IO[str],
    style: str = "helm",
    phase_ms: int = DEFAULT_PHASE_MS,
    span_ms: tuple[int, int] | None = None,
    left_open: bool = False,
) -> int:
    """`recorded_families` as OpenMetrics for `promtool tsdb create-blocks-from openmetrics`:
    one family after another, `# EOF` last. Returns the number of samples."""
    stamps: dict[int, str] = {}
    texts: dict[tuple[tuple[str, str], ...], str] = {}
    """Label text by labels: a group's text is built once, not once per family."""
    n = 0
    for name, batches in recorded_families(sc, style, phase_ms, span_ms, left_open):
        out.write(f"# TYPE {name} gauge\n")
        for labels, off, t, vals in batches:
            n += len(t)
            n_texts = list(map(str, vals.tolist()))
            ts = [stamps.get(x) or stamps.setdefault(x, _stamp(x)) for x in t.tolist()]
            bounds = off.tolist()
            for k, lab in enumerate(labels):
                key = tuple(lab.items())
                text = texts.get(key)
                if text is None:
                    text = texts[key] = ",".join(f'{k}="{_esc(x)}"' for k, x in key)
                prefix = f"{name}{{{text}}} " if text else f"{name} "
                a, b = bounds[k], bounds[k + 1]
                for j in range(a, b, 128):
                    e = min(b, j + 128)
                    out.write(prefix.join(chain(("",), map(add, n_texts[j:e], ts[j:e]))))
    out.write("# EOF\n")
    return n


def _esc(v: str) -> str:
    return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
