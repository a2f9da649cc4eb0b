"""Held time is the samples present times the scrape interval, never whole buckets; the interval
is detected from the samples per bucket, through gaps, jitter and odd targets."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from gpuaudit.audit.assemble import run_checks
from gpuaudit.audit.settings import Settings
from gpuaudit.audit.summary import summarise
from gpuaudit.checks import gpu001_idle_reservation as gpu001
from gpuaudit.core.errors import SnapshotError
from gpuaudit.inventory import Views, build, held
from gpuaudit.inventory import columns as C
from gpuaudit.report import json_report
from tests.support.factories import (
    SAMPLES_PER_HOUR,
    Series,
    gpu_labels,
    inventory,
    run_check,
    snapshot,
)

HOURS = 6


def _twenty_minute_job() -> list[Series]:
    """GPU 0 of a node idle all window but for a 20-minute job in hour 3 (20 of the hour's 60
    samples carry the job's labels, 40 the GPU's own); GPU 1 idle throughout."""
    free_samples = [SAMPLES_PER_HOUR] * HOURS
    free_samples[2] = 40
    job = [None] * HOURS
    job[2] = 0.0
    job_samples = [0] * HOURS
    job_samples[2] = 20
    return [
        Series(gpu_labels(uuid="GPU-0", gpu="0"), act=[0.0] * HOURS, samples=free_samples),
        Series(
            gpu_labels(uuid="GPU-0", gpu="0", pod="eval-1", namespace="ci"),
            act=job,
            samples=job_samples,
        ),
        Series(gpu_labels(uuid="GPU-1", gpu="1"), act=[0.0] * HOURS),
    ]


def test_a_twenty_minute_job_counts_as_a_third_of_a_gpu_hour() -> None:
    inv = inventory(_twenty_minute_job(), HOURS)
    assert inv.scrape_interval_s == pytest.approx(60.0)
    assert not inv.held_time_rounded
    h = inv.holdings.set_index(C.POD)
    assert h.loc["eval-1", C.HOURS] == pytest.approx(1 / 3)
    assert h.loc["eval-1", C.GPU_HOURS] == pytest.approx(1 / 3)
    s = summarise(Views(inv, Settings().prices), idle_activity=0.05, currency="USD")
    assert s.allocated_gpu_hours == pytest.approx(1 / 3)
    assert s.idle_gpu_hours == pytest.approx(1 / 3)
    assert s.wasted_cost == pytest.approx(6.88 / 3)
    assert s.held_time == "samples" and s.scrape_interval_s == pytest.approx(60.0)
    # The bucket it ran in is still one row of the hourly grid, held for a third of it.
    rows = inv.hourly[
        inv.hourly[C.HOLDING] == inv.holdings.index[inv.holdings[C.POD] == "eval-1"][0]
    ]
    assert rows[C.HELD_H].tolist() == pytest.approx([1 / 3])


def test_mean_activity_weighs_each_sample_not_each_bucket() -> None:
    """Two hours held: one full hour at 0.9 (60 samples), one of 6 minutes at 0.0 (6 samples).
    The mean over samples is 0.9 x 60 / 66; a mean over buckets would say 0.45."""
    s = Series(
        gpu_labels(pod="p", namespace="ml"),
        act=[0.9, 0.9, 0.0, None],
        samples=[60, 60, 6, 0],
    )
    other = Series(gpu_labels(uuid="GPU-9", gpu="9"), act=[0.5] * 4)
    inv = inventory([s, other], 4)
    summary = summarise(Views(inv, {}), idle_activity=0.05, currency="USD")
    assert summary.mean_activity == pytest.approx(0.9 * 120 / 126)
    assert summary.allocated_gpu_hours == pytest.approx(126 / 60)
    assert summary.idle_gpu_hours == pytest.approx(0.1)


def test_gpu001_counts_held_hours_not_buckets() -> None:
    """Five buckets touched, 3.5 h held: under the 4-hour minimum; 4.5 h held: reported with
    4.5 GPU-hours."""
    short = Series(
        gpu_labels(pod="short", namespace="ml"),
        act=[None, 0.0, 0.0, 0.0, 0.0, 0.0, None],
        samples=[0, 15, 60, 60, 60, 15, 0],
    )
    longer = Series(
        gpu_labels(uuid="GPU-1", gpu="1", pod="longer", namespace="ml"),
        act=[None, 0.0, 0.0, 0.0, 0.0, 0.0, None],
        samples=[0, 45, 60, 60, 60, 45, 0],
    )
    (f,) = run_check(gpu001, inventory([short, longer], 7))
    assert f.resource.name == "longer"
    assert f.impact.gpu_hours == pytest.approx(4.5)
    assert f.evidence["hours_held"] == pytest.approx(4.5)


def test_an_older_snapshot_without_counts_says_its_held_time_is_bucket_rounded() -> None:
    snap = snapshot(_twenty_minute_job(), HOURS)
    old = dataclasses.replace(
        snap,
        prometheus={k: v for k, v in snap.prometheus.items() if "count_hourly" not in k},
    )
    inv = build(old)
    assert inv.scrape_interval_s is None and inv.held_time_rounded
    assert any("whole --step buckets (approximate)" in w for w in inv.warnings)
    assert inv.holdings.set_index(C.POD).loc["eval-1", C.HOURS] == pytest.approx(1.0)
    result = run_checks(inv, Settings())
    doc = json.loads(json_report.render(result))
    assert doc["summary"]["held_time"] == "buckets"
    assert doc["summary"]["scrape_interval_s"] is None
    assert any("approximate" in w for w in doc["warnings"])


def test_no_bucket_covered_end_to_end_means_no_interval_and_a_warning() -> None:
    """A window of two buckets with only a short job: nothing tells the scrape interval."""
    s = Series(gpu_labels(pod="blip", namespace="ml"), act=[0.0, None], samples=[10, 0])
    inv = inventory([s], 2)
    assert inv.scrape_interval_s is None and inv.held_time_rounded
    assert any("could not be detected" in w for w in inv.warnings)


# ---- detection on its own -------------------------------------------------------------------


def _detect(group: np.ndarray, counts: np.ndarray, groups: int, step: float) -> held.Intervals:
    """`held.detect_chunks` of (group, counts) in one piece."""
    return held.detect_chunks(lambda: iter([(group, counts)]), groups, step)


def _counts_of(times: np.ndarray, step: float = 3600.0) -> np.ndarray:
    """Samples per bucket (t - step, t] of sample times starting after 0."""
    buckets = np.ceil(times / step).astype(np.int64)
    return np.bincount(buckets)[1:].astype(np.float64)


def test_detects_an_interval_that_does_not_divide_the_hour() -> None:
    """57 s (the GenAI trace's): buckets of 63 and 64 samples; the mean gives 57 s exactly,
    the mode alone would say 57.14 s."""
    counts = _counts_of(np.arange(1, 24 * 3600 // 57) * 57.0)[1:-1]
    assert set(counts.tolist()) == {63.0, 64.0}
    got = _detect(np.zeros(len(counts), dtype=np.int64), counts, 1, 3600.0)
    assert got.fleet == pytest.approx(57.0, rel=2e-3)


def test_missed_scrapes_and_an_odd_target_do_not_move_the_fleet_interval() -> None:
    rng = np.random.default_rng(7)
    fleet = np.full(400, 60.0)
    fleet[rng.choice(400, 30, replace=False)] -= 1  # one missed scrape
    fleet[rng.choice(400, 5, replace=False)] -= 7  # a longer outage
    odd = np.full(40, 120.0)  # one target scraped every 30 s
    counts = np.concatenate([fleet, odd])
    group = np.r_[np.zeros(400, dtype=np.int64), np.ones(40, dtype=np.int64)]
    got = _detect(group, counts, 2, 3600.0)
    assert got.fleet == pytest.approx(60.0)
    assert got.of_group.tolist() == pytest.approx([60.0, 30.0])


def test_jitter_at_a_bucket_edge_averages_out() -> None:
    """A 60 s scrape whose samples straddle the hour: 59, 60 and 61 in turn."""
    counts = np.array([59.0, 61.0, 60.0] * 20)
    got = _detect(np.zeros(len(counts), dtype=np.int64), counts, 1, 3600.0)
    assert got.fleet == pytest.approx(60.0)


def test_a_target_close_to_the_fleet_uses_the_fleet_interval() -> None:
    counts = np.r_[np.full(50, 60.0), np.full(4, 58.0)]
    group = np.r_[np.zeros(50, dtype=np.int64), np.ones(4, dtype=np.int64)]
    got = _detect(group, counts, 2, 3600.0)
    assert got.of_group.tolist() == pytest.approx([60.0, 60.0])


@pytest.mark.parametrize("piece", [1 << 20, 1, 2, 4])
def test_covered_buckets_need_both_neighbours_or_the_window_edge(
    piece: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Read in one slice or several (each with its neighbours), the same rows."""
    from gpuaudit.inventory import arrays

    monkeypatch.setattr(arrays, "_SLICE", piece)
    k = np.array([0, 0, 0, 0, 1, 1], dtype=np.int64)
    t = np.array([1, 2, 3, 5, 2, 3], dtype=np.float64) * 3600
    got = held.covered(k, t, start=0.0, end=5 * 3600.0, step=3600)
    # key 0: bucket 1 (window edge, next present), 2 (both), 3 (next missing), 5 (edge, prev
    # missing); key 1: bucket 2 (prev missing), 3 (next missing).
    assert got.tolist() == [True, True, False, False, False, False]


@pytest.mark.parametrize("seed", range(4))
def test_counting_in_a_table_and_sorting_agree(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(seed)
    group = rng.integers(0, 30, 5000)
    counts = rng.choice([58, 59, 60, 60, 60, 61, 120, 3], 5000).astype(np.float64)
    table = _detect(group, counts, 30, 3600.0)
    pieces = held.detect_chunks(
        lambda: ((group[i : i + 777], counts[i : i + 777]) for i in range(0, 5000, 777)),
        30,
        3600.0,
    )
    monkeypatch.setattr(held, "HISTOGRAM_CELLS", 0)
    sorted_ = _detect(group, counts, 30, 3600.0)
    assert table.fleet == sorted_.fleet == pieces.fleet
    np.testing.assert_array_equal(table.of_group, sorted_.of_group)
    np.testing.assert_array_equal(table.of_group, pieces.of_group)


def test_gpu_util_buckets_without_profiling_count_their_own_samples() -> None:
    """A profiled GPU whose profiling series missed an hour: that hour's GPU_UTIL samples
    (counted only where no profiling series is) are held time too."""
    s = Series(
        gpu_labels(pod="p", namespace="ml"),
        act=[0.5, None, 0.5, 0.5],
        util=[50.0, 40.0, 50.0, 50.0],
        samples=[60, 30, 60, 60],
    )
    other = Series(gpu_labels(uuid="GPU-9", gpu="9"), act=[0.5] * 4)
    inv = inventory([s, other], 4)
    assert not inv.held_time_rounded
    assert inv.holdings.set_index(C.POD).loc["p", C.HOURS] == pytest.approx(3.5)


def _uneven_counts() -> list[Series]:
    """Series whose hourly sample counts differ: partial first and last hours, a missed
    scrape, a gap, a target at another interval, a profiled GPU whose profiling series missed
    hours (GPU_UTIL counted there), and a GPU with GPU_UTIL alone."""
    return [
        *_twenty_minute_job(),
        Series(
            gpu_labels(uuid="GPU-2", gpu="2", pod="train", namespace="ml"),
            act=[0.4, 0.5, None, 0.6, 0.6, 0.2],
            samples=[35, 59, 0, 60, 60, 12],
        ),
        Series(
            {**gpu_labels(uuid="GPU-3", gpu="3", pod="fast", namespace="ml"), "instance": "x:9400"},
            act=[0.9] * HOURS,
            samples=[120] * HOURS,
        ),
        Series(
            gpu_labels(uuid="GPU-4", gpu="4", pod="blind", namespace="ml"),
            act=[0.5, None, None, 0.5, None, 0.5],
            util=[50.0, 40.0, 30.0, 50.0, 20.0, 50.0],
            samples=[60, 30, 60, 60, 45, 60],
        ),
        Series(
            gpu_labels(uuid="GPU-5", gpu="5", pod="old", namespace="ml"),
            act=[None] * HOURS,
            util=[10.0, 10.0, None, 20.0, 20.0, 20.0],
            samples=[60, 60, 0, 30, 60, 60],
        ),
    ]


@pytest.mark.parametrize("full", [60, 59, 120, 1])
def test_counts_of_full_buckets_left_out_read_as_those_of_changes(full: int) -> None:
    """A scan that measured the interval answers only the buckets that are not full
    (`count != F`); whatever F it took, the reader's fill gives the inventory that the
    counts answered where they change give."""
    series = _uneven_counts()
    changes, sparse = build(snapshot(series, HOURS)), build(snapshot(series, HOURS, full=full))
    answered = {
        q: sum(
            len(r["values"])
            for r in snapshot(series, HOURS, full=full).prometheus[q][0]["body"]["data"]["result"]
        )
        for q in ("act_count_hourly", "util_count_hourly")
    }
    if full == 60:
        # Only the uneven buckets are answered: 11 of the activity series', 3 of GPU_UTIL's.
        assert answered == {"act_count_hourly": 11, "util_count_hourly": 3}
    assert sparse.scrape_interval_s == changes.scrape_interval_s
    assert sparse.held_time_rounded == changes.held_time_rounded
    cols = [C.HOLDING, C.TS, C.HELD_H]
    np.testing.assert_array_equal(sparse.hourly[cols].to_numpy(), changes.hourly[cols].to_numpy())
    h = changes.holdings.set_index(C.POD)
    assert sparse.holdings.set_index(C.POD)[C.HOURS].to_dict() == h[C.HOURS].to_dict()
    assert h.loc["blind", C.HOURS] == pytest.approx(3 + 30 / 60 + 60 / 60 + 45 / 60)
    assert h.loc["fast", C.HOURS] == pytest.approx(HOURS)


def test_a_full_count_that_is_no_whole_number_is_refused() -> None:
    snap = snapshot(_uneven_counts(), HOURS, full=60)
    bad = snap.with_manifest(
        queries=({"id": "act_count_hourly", "full": "60; drop"},),
    )
    with pytest.raises(SnapshotError, match="act_count_hourly's full"):
        build(bad)
