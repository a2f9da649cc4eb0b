"""The column-wise scenario writer gives exactly what the per-series reference gives."""

from __future__ import annotations

import gzip
import io
import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gpuaudit import snapshot
from gpuaudit.scenario import builder, emit, generate, series
from gpuaudit.scenario.generator import Scenario
from gpuaudit.sources.prometheus import catalogue as queries
from tests.scenario_perf import reference

CASES = [
    (24, 1, 3, 600, "helm"),
    (60, 2, 5, 300, "helm"),
    (120, 1, 3, 1800, "honor"),
    (60, 1, 7, 900, "old"),
    (200, 3, 11, 1800, "honor"),
]


def _scenario(gpus: int, days: int, seed: int, scrape: int) -> Scenario:
    return generate(gpus, days, seed, scrape_s=scrape)


def _text(snap: snapshot.Snapshot) -> str:
    return json.dumps(snap.to_json(), separators=(",", ":"), sort_keys=True)


@pytest.mark.parametrize(("gpus", "days", "seed", "scrape", "style"), CASES)
def test_snapshot_and_openmetrics_match_the_reference(
    tmp_path: Path, gpus: int, days: int, seed: int, scrape: int, style: str
) -> None:
    sc = _scenario(gpus, days, seed, scrape)
    want = _text(reference.to_snapshot(sc, style, "cmd"))
    assert _text(emit.to_snapshot(sc, style, "cmd")) == want
    for name in ("s.json", "s.json.gz"):
        ref, got = tmp_path / f"ref-{name}", tmp_path / name
        snapshot.write(reference.to_snapshot(sc, style, "cmd"), ref)
        emit.write_snapshot(sc, got, style, "cmd")
        assert got.read_bytes() == ref.read_bytes(), name
    plain = (tmp_path / "s.json").read_bytes()
    assert gzip.decompress((tmp_path / "s.json.gz").read_bytes()) == plain
    # Read back (streamed, answers parsed into arrays), it is the same snapshot.
    assert _text(snapshot.read(tmp_path / "s.json.gz")) == _text(snapshot.read(tmp_path / "s.json"))
    a, b = io.StringIO(), io.StringIO()
    assert emit.write_openmetrics(sc, a, style) == reference.write_openmetrics(sc, b, style)
    assert a.getvalue() == b.getvalue()


def test_the_planted_health_cases_are_covered() -> None:
    """The cases above include XID codes and remapped rows (the irregular series)."""
    sc = _scenario(60, 2, 5, 300)
    assert any(s.health.get(queries.XID) for s in sc.slots)
    assert any(s.health.get(queries.REMAP_FAILURE) for s in sc.slots)


def test_free_holdings_match_holding_zeros(monkeypatch: pytest.MonkeyPatch) -> None:
    """`hold_free` holds what `hold(slot, None, a, b, zeros, 0.0)` holds (whose random draws
    come after all others, so leaving them out changes nothing)."""

    def reference_free(b: Any, slot: Any, h0: int, h1: int) -> None:
        b.hold(slot, None, h0, h1, np.zeros(h1 - h0), 0.0)

    fast = generate(120, 2, 4)
    monkeypatch.setattr(builder.Builder, "hold_free", reference_free)
    slow = generate(120, 2, 4)
    assert len(fast.holdings) == len(slow.holdings)
    fields = ("act", "act_amp", "fb_used", "fb_amp", "power", "util", "util_amp")
    for x, y in zip(fast.holdings, slow.holdings, strict=True):
        assert (x.slot.key, x.pod, x.h0, x.h1) == (y.slot.key, y.pod, y.h0, y.h1)
        for f in fields:
            a, b = getattr(x, f), getattr(y, f)
            assert a.dtype == b.dtype and a.tobytes() == b.tobytes(), f
    assert fast.truth == slow.truth


def test_round_and_clip_are_numpys() -> None:
    rng = np.random.default_rng(0)
    for decimals in (0, 3, 4):
        x = rng.standard_normal(50_000) * 10.0 ** rng.integers(-5, 6, 50_000)
        x[::5] = (rng.integers(-(10**6), 10**6, 10_000) + 0.5) / 10**decimals
        assert builder._round(x, decimals).tobytes() == np.round(x, decimals).tobytes()
    y = rng.uniform(-2, 2, 1000)
    y[:5] = [-0.0, np.nan, np.inf, -np.inf, 0.0]
    assert builder._clip(y, 0, 1.5).tobytes() == np.clip(y, 0, 1.5).tobytes()


def test_ids_are_the_original_formatting() -> None:
    a = builder.Ids(np.random.default_rng(5))
    rng = np.random.default_rng(5)
    for n in (1, 4, 5, 32):
        want = "".join(f"{int(b):02x}" for b in rng.integers(0, 256, size=(n + 1) // 2))[:n]
        assert a.hex(n) == want
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    want = "".join(alphabet[int(i)] for i in rng.integers(0, len(alphabet), size=10))
    assert a.suffix(10) == want


def _exact(a: np.ndarray[Any, Any], b: np.ndarray[Any, Any]) -> bool:
    return a.shape == b.shape and a.tobytes() == b.tobytes()


def test_round6_is_six_decimal_text() -> None:
    rng = np.random.default_rng(1)
    n = 400_000
    parts = [
        rng.integers(0, 10_001, n) / 1e4 + np.round(rng.integers(0, 201, n) / 1e4, 4),
        np.round(rng.integers(0, 10_001, n) / 1e4, 4) - np.round(rng.integers(0, 201, n) / 1e4, 4),
        np.round(rng.uniform(0, 1300, n), 3),
        (rng.integers(-(10**9), 10**9, n) + 0.5) / 1e6,  # ties, as decimals
        rng.standard_normal(n) * 10.0 ** rng.integers(-9, 13, n),
        np.array([0.0, -0.0, 5e-7, -5e-7, 1.5e-6, 2.5e-6, 1e20, -1e20, 5e-324, np.inf, -np.inf]),
    ]
    for x in parts:
        want = np.array([float(f"{v:.6f}") for v in x.tolist()])
        assert _exact(series.round6(x), want)
    nan = series.round6(np.array([np.nan]))
    assert np.isnan(nan).all()


def test_round6_of_four_decimal_levels_is_the_integer_division() -> None:
    """The fact the brief suggested: (k_level +- k_amp) / 10000 from integers is what the
    6-decimal text parses to."""
    rng = np.random.default_rng(2)
    ka, kb = rng.integers(0, 10_001, 500_000), rng.integers(0, 201, 500_000)
    act, amp = np.round(ka / 1e4, 4), np.round(kb / 1e4, 4)
    assert _exact(series.round6(act + amp), (ka + kb) / 1e4)
    assert _exact(series.round6(act - amp), (ka - kb) / 1e4)


def test_distinct_keeps_signed_zeros_and_nans_apart() -> None:
    x = np.array([0.0, -0.0, np.nan, 1.5, 0.0, 1.5, -np.inf] * 50_000)
    texts, codes = series.distinct(x, series.fmt, block=1000)
    assert [texts[c] for c in codes[:7].tolist()] == ["0", "-0", "NaN", "1.5", "0", "1.5", "-Inf"]
    assert [texts[c] for c in codes.tolist()] == [series.fmt(v) for v in x.tolist()]


def _values(hi: list[list[float]], lo: list[list[float]]) -> series.Values:
    off = np.cumsum([0] + [len(h) for h in hi])
    flat_hi = np.array([v for h in hi for v in h], dtype=np.float64)
    flat_lo = np.array([v for h in lo for v in h], dtype=np.float64)
    hours = np.arange(len(flat_hi), dtype=np.float64)
    return series.Values("m", [{} for _ in hi], None, off, hours, flat_hi, flat_lo)


@pytest.mark.parametrize(
    "kind", ["levels", "integers", "big", "negzero", "nan", "inf", "mixed_lengths"]
)
def test_window_stats_match_per_series(kind: str) -> None:
    rng = np.random.default_rng(sum(map(ord, kind)))
    lengths = [int(x) for x in rng.integers(1, 60, 40)] if kind == "mixed_lengths" else [48] * 40
    hi = [rng.integers(0, 10_000, n) / 1e4 for n in lengths]
    if kind in ("integers", "big"):
        hi = [np.round(h * (1e12 if kind == "big" else 100)) for h in hi]
    lo = [h - np.round(rng.uniform(0, 0.02, len(h)), 4) for h in hi]
    special = {"negzero": -0.0, "nan": np.nan, "inf": np.inf}
    if kind in special:
        hi[3][5] = lo[7][0] = special[kind]
        lo[3][1] = 0.0
    v = _values([list(h) for h in hi], [list(x) for x in lo])
    for k in (1, 3, 30):
        for stat in ("sum", "count", "max", "p95"):
            want = [reference.window_stat(stat, h, x, k) for h, x in zip(hi, lo, strict=True)]
            got = v.window(stat, k)
            assert _exact(got, np.array(want, dtype=np.float64)), (stat, k)


@pytest.mark.parametrize("kind", ["levels", "integers", "big", "negzero", "nan", "inf"])
def test_hourly_stats_match_per_point(kind: str) -> None:
    """Each bucket's p95, mean and counter increase, vectorised, equal the per-hour reference
    bit for bit, special values included."""
    rng = np.random.default_rng(sum(map(ord, kind)) + 1)
    hi = [rng.integers(0, 10_000, 24) / 1e4 for _ in range(20)]
    if kind in ("integers", "big"):
        hi = [np.round(h * (1e12 if kind == "big" else 100)) for h in hi]
    lo = [h - np.round(rng.uniform(-0.02, 0.02, len(h)), 4) for h in hi]
    special = {"negzero": -0.0, "nan": np.nan, "inf": np.inf}
    if kind in special:
        hi[3][5] = lo[7][0] = special[kind]
        lo[3][1] = 0.0
    v = _values([list(h) for h in hi], [list(x) for x in lo])
    flat_hi, flat_lo = np.concatenate(hi), np.concatenate(lo)
    for k in (1, 3, 30):
        for stat in ("mean", "p95", "increase"):
            want = [
                reference.hour_stat(stat, flat_hi[i : i + 1], flat_lo[i : i + 1], k)
                for i in range(len(flat_hi))
            ]
            assert _exact(v.hourly(stat, k), np.array(want, dtype=np.float64)), (stat, k)


def test_iso_matches_datetime() -> None:
    rng = np.random.default_rng(3)
    for t in [0, 1795392000, 1795392000 - 86400 * 30 - 120, *rng.integers(0, 4 * 10**9, 2000)]:
        want = datetime.fromtimestamp(int(t), timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        assert emit._iso(int(t)) == want
    assert emit._iso(1795392000.5) == "2026-11-23T00:00:00Z"


def test_write_snapshot_reports_write_errors(tmp_path: Path) -> None:
    sc = _scenario(24, 1, 3, 600)
    with pytest.raises(OSError):
        emit.write_snapshot(sc, tmp_path / "missing" / "s.json.gz")


def test_write_snapshot_raises_a_compression_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = []

    def failing(self: gzip.GzipFile, data: bytes) -> int:
        calls.append(len(data))
        raise OSError("disk full")

    monkeypatch.setattr(gzip.GzipFile, "write", failing)
    with pytest.raises(OSError, match="disk full"):
        emit.write_snapshot(_scenario(24, 1, 3, 600), tmp_path / "s.json.gz")
    assert calls
