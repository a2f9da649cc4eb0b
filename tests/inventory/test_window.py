"""`--window`/`--end` on a snapshot: inside the recorded window they narrow the audit exactly;
what was recorded for the whole window only is missing, never wrong; outside the window or off
its grid is one error line."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from gpuaudit import snapshot
from gpuaudit.audit.summary import summarise
from gpuaudit.cli import app
from gpuaudit.core.errors import ConfigError
from gpuaudit.inventory import Capability, Inventory, Views, build
from gpuaudit.inventory import columns as C
from gpuaudit.inventory.window import narrow, requested
from tests.support.paths import DEMO

runner = CliRunner()
DAY = 86400


@pytest.fixture(scope="module")
def demo_snap() -> snapshot.Snapshot:
    return snapshot.read(DEMO)


@pytest.fixture(scope="module")
def whole(demo_snap: snapshot.Snapshot) -> Inventory:
    return build(demo_snap)


def _scan(*args: str) -> tuple[int, dict[str, Any] | None, str]:
    res = runner.invoke(app, ["scan", "--demo", "-f", "json", "-q", *args])
    doc = json.loads(res.stdout) if res.exit_code in (0, 1) and res.stdout.strip() else None
    return res.exit_code, doc, res.output


def test_a_narrowed_window_keeps_exactly_the_buckets_inside_it(
    demo_snap: snapshot.Snapshot, whole: Inventory
) -> None:
    w = demo_snap.manifest["window"]
    start, end = w["start"] + 3 * DAY, w["end"] - DAY
    part = build(demo_snap, window=(start, end))
    assert (part.window_start, part.window_end) == (start, end)
    # The same rows of the whole inventory, found independently by their times.
    hr, h = whole.hourly, whole.holdings
    inside = hr[(hr[C.TS] > start) & (hr[C.TS] <= end)]
    assert len(part.hourly) == len(inside)
    held = h[C.HELD].to_numpy()[inside[C.HOLDING].to_numpy()]
    frac = h[C.FRACTION].to_numpy()[inside[C.HOLDING].to_numpy()]
    want_alloc = float((inside[C.HELD_H].to_numpy() * frac)[held].sum())
    views = Views(part, {})
    got = summarise(views, idle_activity=0.05, currency="USD")
    # Allocated: the measured GPU-hours plus the unattributed ones (pods without DCGM series).
    unattributed = float(views.unattributed[C.GPU_HOURS].sum())
    assert got.allocated_gpu_hours == pytest.approx(want_alloc + unattributed, rel=1e-12)
    assert got.window_hours == pytest.approx(72.0)
    # Each holding's mean activity is the mean over its samples inside the window (the demo is
    # scraped every 60 s: a bucket's samples are its held hours x 60).
    assert whole.scrape_interval_s == 60.0
    samples = inside[C.HELD_H].to_numpy() * 60.0
    by_slot = (
        inside.assign(
            _w=samples,
            _wa=inside[C.ACT].to_numpy() * samples,
            slot=h[C.SLOT].to_numpy()[inside[C.HOLDING].to_numpy()],
            pod=h[C.POD].to_numpy()[inside[C.HOLDING].to_numpy()],
        )
        .groupby(["slot", "pod"])[["_w", "_wa"]]
        .sum()
    )
    mine = part.holdings.set_index([C.SLOT, C.POD])
    joined = by_slot.join(mine[[C.ACT_MEAN, C.ACT_COUNT, C.HOURS]], how="inner")
    assert len(joined) == len(part.holdings)
    np.testing.assert_allclose(joined[C.ACT_MEAN], joined["_wa"] / joined["_w"], rtol=1e-12)
    np.testing.assert_allclose(joined[C.ACT_COUNT], joined["_w"])
    np.testing.assert_allclose(joined[C.HOURS], joined["_w"] / 60.0)


def test_what_was_recorded_for_the_whole_window_is_missing_not_wrong(
    demo_snap: snapshot.Snapshot,
) -> None:
    w = demo_snap.manifest["window"]
    part = build(demo_snap, window=(w["end"] - 2 * DAY, w["end"]))
    h = part.holdings
    for col in (C.ACT_MAX, C.ACT_P95, C.FB_USED_MAX, C.FB_USED_P95, C.POWER_MEAN, C.XID_MAX):
        assert h[col].isna().all(), col
    for cap in (Capability.FRAMEBUFFER, Capability.GPU_HEALTH, Capability.P2P_STATUS):
        assert cap not in part.capabilities
        assert "whole window only" in part.missing[cap]
    # Ending at the recorded end, the Kubernetes objects still describe the window's end.
    assert Capability.KUBERNETES_PODS in part.capabilities
    assert any("audited" in x and "are missing" in x for x in part.warnings)


def test_an_earlier_end_skips_the_checks_of_the_cluster_state_at_the_end() -> None:
    code, doc, out = _scan("--end", "2026-11-22T00:00:00Z")
    assert code == 0, out
    assert doc is not None
    skipped = {s["check"]: s["reason"] for s in doc["skipped"]}
    for check in ("GPU010", "GPU050", "GPU051", "GPU080"):
        assert "read at the snapshot's end (2026-11-23T00:00:00Z)" in skipped[check]
    for check in ("GPU020", "GPU021", "GPU070"):
        assert "whole window only" in skipped[check]
    assert "GPU001" in doc["checks_run"]
    assert doc["window"] == {
        "start": "2026-11-16T00:00:00Z",
        "end": "2026-11-22T00:00:00Z",
        "hours": 144.0,
    }


def test_the_recorded_window_itself_changes_nothing() -> None:
    _, plain, _ = _scan()
    _, same, _ = _scan("--window", "7d", "--end", "2026-11-23T00:00:00Z")
    assert plain is not None and same is not None
    plain.pop("generated_at")
    same.pop("generated_at")
    assert same == plain


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--window", "8d"], "outside the snapshot's recorded window"),
        (["--end", "2026-11-24T00:00:00Z"], "outside the snapshot's recorded window"),
        (["--end", "2026-11-10T00:00:00Z", "--window", "1d"], "outside"),
        (["--end", "2026-11-22T00:30:00Z"], "not on the snapshot's bucket grid"),
        (["--window", "90m"], "must be a whole number of --step 1h buckets"),
    ],
)
def test_outside_the_window_or_off_its_grid_is_one_error_line(args: list[str], says: str) -> None:
    code, _, out = _scan(*args)
    assert code == 2
    lines = [line for line in out.splitlines() if line.strip()]
    assert len(lines) == 1 and says in lines[0], out
    assert "Traceback" not in out


def test_requested_fills_in_the_recorded_bounds() -> None:
    rec = {"start": 0, "end": 10 * 3600, "step": 3600}
    assert requested(rec, None, None) is None
    assert requested(rec, 3 * 3600, None) == (7 * 3600, 10 * 3600)
    assert requested(rec, None, 5 * 3600) == (0, 5 * 3600)
    assert narrow(rec, (0, 10 * 3600)) is None
    with pytest.raises(ConfigError, match="longer than 0"):
        narrow(rec, (5 * 3600, 5 * 3600))
