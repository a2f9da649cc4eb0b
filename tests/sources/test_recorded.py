"""How a range is cut into raw and recorded pieces (`recorded.Coverage.parts`): the pieces
cover the range exactly once, on either reading of a range's left end."""

from __future__ import annotations

import pytest

from gpuaudit.sources.interface import Window
from gpuaudit.sources.prometheus.catalogue import Part
from gpuaudit.sources.prometheus.recorded import INTERVAL_MS, Coverage

H = 3_600_000
T = 1_795_392_000_000  # on the hour


def _cover(parts: tuple[Part, ...], t: int, left_open: bool) -> list[tuple[int, int, bool]]:
    """The milliseconds of raw time each piece reads, as closed spans `[lo, hi]`: a raw piece
    its range (`(hi - r, hi]` from Prometheus 3.0, `[hi - r, hi]` before); a recorded piece
    the 5 minutes before each of its evaluations, read the same way."""
    out = []
    for p in parts:
        hi = t - p.offset_ms
        lo = hi - p.range_ms + (1 if left_open else 0)
        if p.recorded:
            evals = range(hi, lo - 1, -INTERVAL_MS)
            lo = min(evals) - INTERVAL_MS + (1 if left_open else 0)
        out.append((lo, hi, p.recorded))
    return out


@pytest.mark.parametrize("left_open", [False, True])
@pytest.mark.parametrize("phase", [0, 1, 7_000, 67_123, 299_999])
def test_the_pieces_tile_the_bucket(phase: int, left_open: bool) -> None:
    cov = Coverage(frozenset({"m"}), phase, 0, left_open)
    parts = cov.parts(T - H, T)
    assert parts is not None
    spans = _cover(parts, T, left_open)
    # The bucket as the server reads a raw range, each piece from where the last one ended.
    assert spans[0][0] == T - H + (1 if left_open else 0) and spans[-1][1] == T
    assert all(a[1] + 1 == b[0] for a, b in zip(spans, spans[1:], strict=False))
    rec = [s for s in spans if s[2]]
    assert len(rec) == 1
    lo, hi, _ = rec[0]
    # The recorded piece ends on an evaluation and reads at least 55 minutes of them.
    assert (hi - phase) % INTERVAL_MS == 0 and hi - lo >= H - 2 * INTERVAL_MS


def test_no_recorded_piece_before_the_rules_ran_and_raw_up_to_them() -> None:
    since = T - H // 2
    cov = Coverage(frozenset({"m"}), 0, since, True)
    assert cov.parts(T - 2 * H, T - H) is None
    parts = cov.parts(T - H, T)
    assert parts == (Part(False, H // 2, H // 2), Part(True, H // 2, 0))
    w = Window((T - 2 * H) // 1000, T // 1000, 3600)
    assert cov.covers(w) == "part"
    assert Coverage(frozenset({"m"}), 0, T - 3 * H, True).covers(w) == "whole"
    assert Coverage(frozenset({"m"}), 0, T, True).covers(w) == "none"
