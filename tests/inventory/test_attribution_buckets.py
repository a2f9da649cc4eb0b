"""The Kubernetes-side join decided per bucket (issue 32): a series without pod labels is joined
to the only pod that could hold it in each bucket; pods that held it in turn each get their own
buckets, the buckets no pod ran in are unheld, those two pods ran in stay unattributed, and the
ledger adds up to the allocated GPU-hours."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from gpuaudit.audit.ledger import ledger
from gpuaudit.audit.summary import summarise
from gpuaudit.checks import gpu001_idle_reservation as gpu001
from gpuaudit.checks import gpu020_framebuffer_pressure as gpu020
from gpuaudit.checks import gpu080_unmonitored_gpus as gpu080
from gpuaudit.domain.pricing import DEFAULT_PRICES
from gpuaudit.inventory import Views, bucketjoin, build
from gpuaudit.inventory import columns as C
from gpuaudit.inventory.attribution import Method, Reason
from tests.support.factories import (
    START,
    Series,
    gpu_labels,
    inventory,
    iso,
    make_node,
    make_pod,
    run_check,
    snapshot,
)

A100 = "NVIDIA A100-SXM4-80GB"
SLICE = 3 / 7
"""A 3g.40gb instance's share of an A100."""


def _series(act: list[float | None], gi: str = "2", pod: str = "") -> Series:
    lab = gpu_labels(model=A100, mig=("3g.40gb", gi), pod=pod, namespace="ml" if pod else "")
    return Series(lab, act)


def _pod(
    name: str, started: float | None = START - 60, finished: float | None = None, n: int = 1
) -> dict[str, Any]:
    """A pod of `n` 3g.40gb instances; Succeeded at `finished` when given."""
    pod = make_pod(name, started=started, phase="Running" if finished is None else "Succeeded")
    pod["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/mig-3g.40gb": str(n)}
    if finished is not None:
        pod["status"]["containerStatuses"] = [
            {
                "name": "c",
                "state": {"terminated": {"reason": "Completed", "finishedAt": iso(finished)}},
            }
        ]
    return pod


def _inv(series: list[Series], hours: int, pods: list[dict[str, Any]]) -> Any:
    return inventory(series, hours, pods=pods, nodes=[make_node("node-a")])


def _held_hours(inv: Any) -> dict[str, float]:
    h = inv.holdings[inv.holdings[C.HELD]]
    return {str(k): float(v) for k, v in h.groupby(C.POD)[C.HOURS].sum().items()}


def _views(inv: Any) -> Views:
    return Views(inv, DEFAULT_PRICES)


def test_pods_that_held_an_instance_in_turn_each_get_their_buckets() -> None:
    # One instance, 12 hours: pod a (ended at hour 6) idle, then nothing, then pod b busy.
    act: list[float | None] = [0.01] * 6 + [0.0] * 2 + [0.6] * 4
    a = _pod("a", finished=START + 6 * 3600)
    b = _pod("b", started=START + 8 * 3600)
    inv = _inv([_series(act)], 12, [a, b])
    assert _held_hours(inv) == {"a": pytest.approx(6.0), "b": pytest.approx(4.0)}
    h = inv.holdings
    assert set(h.loc[h[C.HELD], C.ATTRIBUTION]) == {Method.KUBERNETES_JOIN.value}
    free = h[~h[C.HELD]]
    assert free[C.HOURS].tolist() == [pytest.approx(2.0)]
    # Each part's activity is its own buckets'.
    means = dict(zip(h[C.POD], h[C.ACT_MEAN], strict=True))
    assert means["a"] == pytest.approx(0.01) and means["b"] == pytest.approx(0.6)
    # Statistics of the whole window cannot be cut in time: the parts have none.
    assert h[C.ACT_MAX].isna().all() and h[C.FB_USED_MEAN].isna().all()
    assert any("split among them by the Kubernetes-side join" in w for w in inv.warnings)
    # The idle pod is found for its own hours, and neither pod is unmonitored.
    found = run_check(gpu001, inv)
    assert [f.resource.name for f in found] == ["a"]
    assert found[0].evidence["hours_held"] == pytest.approx(6.0)
    assert run_check(gpu080, inv) == []
    views = _views(inv)
    book = ledger(views)
    assert book.attributed[Method.KUBERNETES_JOIN.value] == pytest.approx(10 * SLICE)
    assert book.unattributed_gpu_hours == 0.0
    s = summarise(views, 0.05, "USD")
    assert s.allocated_gpu_hours == pytest.approx(10 * SLICE)
    assert s.idle_gpu_hours == pytest.approx(6 * SLICE)  # pod a's hours reach the idle figure


def test_buckets_two_pods_ran_in_stay_unattributed_for_those_hours() -> None:
    # Pod a ran to hour 5, pod b from hour 3: buckets 4 and 5 had two candidates.
    a = _pod("a", finished=START + 5 * 3600)
    b = _pod("b", started=START + 3 * 3600)
    inv = _inv([_series([0.5] * 8)], 8, [a, b])
    assert _held_hours(inv) == {"a": pytest.approx(3.0), "b": pytest.approx(3.0)}
    views = _views(inv)
    un = views.unattributed
    assert sorted(zip(un[C.POD], un[C.HOURS], un["reason"], strict=True)) == [
        ("a", pytest.approx(2.0), Reason.NO_POD_LABEL.value),
        ("b", pytest.approx(2.0), Reason.NO_POD_LABEL.value),
    ]
    found = run_check(gpu080, inv)
    assert [(f.resource.name, f.evidence["hours"]) for f in found] == [("a", 2.0), ("b", 2.0)]
    assert found[0].impact.gpu_hours == pytest.approx(2 * SLICE)
    book = ledger(views)
    assert book.attributed[Method.KUBERNETES_JOIN.value] == pytest.approx(6 * SLICE)
    assert book.unattributed[Reason.NO_POD_LABEL.value] == pytest.approx(4 * SLICE)
    assert book.allocated_gpu_hours == pytest.approx(10 * SLICE)
    assert summarise(views, 0.05, "USD").allocated_gpu_hours == pytest.approx(10 * SLICE)
    rounded = book.rounded()
    assert round(sum(rounded.values()), 2) == round(book.allocated_gpu_hours, 2)


def test_a_pod_that_starts_inside_a_bucket_gets_the_part_it_ran() -> None:
    # Started 30 minutes into hour 3: half of that bucket is its, half no pod's.
    inv = _inv([_series([0.5] * 8)], 8, [_pod("a", started=START + 3 * 3600 + 1800)])
    assert _held_hours(inv) == {"a": pytest.approx(4.5)}
    free = inv.holdings[~inv.holdings[C.HELD]]
    assert free[C.HOURS].tolist() == [pytest.approx(3.5)]
    # The split bucket has a row for each: their held hours add up to the bucket's.
    hr = inv.hourly
    at = hr[hr[C.TS] == START + 4 * 3600]
    assert sorted(at[C.HELD_H].tolist()) == [pytest.approx(0.5), pytest.approx(0.5)]
    # The hourly table is still sorted by holding, then time, and holding ids are positions.
    keys = list(zip(hr[C.HOLDING], hr[C.TS], strict=True))
    assert keys == sorted(keys)
    assert inv.holdings[C.HOLDING].tolist() == list(range(len(inv.holdings)))
    assert ledger(_views(inv)).allocated_gpu_hours == pytest.approx(4.5 * SLICE)


def test_a_pod_whose_series_went_to_it_whole_keeps_its_window_statistics() -> None:
    inv = _inv([_series([0.5] * 8)], 8, [_pod("a")])
    h = inv.holdings.iloc[0]
    assert (h[C.POD], h[C.HOURS]) == ("a", pytest.approx(8.0))
    assert h[C.ACT_MAX] == pytest.approx(0.5)  # relabelled as it is, not split
    assert len(inv.holdings) == 1


def test_an_ended_pod_of_unknown_end_neither_holds_nor_blocks() -> None:
    gone = _pod("gone", finished=START + 2 * 3600)
    del gone["status"]["containerStatuses"]  # a snapshot that did not keep `finishedAt`
    inv = _inv([_series([0.5] * 8)], 8, [gone, _pod("b", started=START + 4 * 3600)])
    assert _held_hours(inv) == {"b": pytest.approx(4.0)}
    assert _views(inv).unattributed.empty


def test_a_running_pod_of_unknown_start_blocks_the_join_and_is_never_joined() -> None:
    unknown = _pod("u", started=None)
    inv = _inv([_series([0.5] * 8)], 8, [unknown, _pod("b", started=START + 4 * 3600)])
    assert not inv.holdings[C.HELD].any()
    un = _views(inv).unattributed
    assert dict(zip(un[C.POD], un[C.HOURS], strict=True)) == {
        "u": pytest.approx(8.0),
        "b": pytest.approx(4.0),
    }


def test_buckets_a_series_names_a_pod_in_are_not_the_joins() -> None:
    # The instance's series names pod x in hours 1-4 (an exporter that labelled it then) and
    # has no pod labels all window: in those buckets it is x's, not another pod's.
    labelled = _series([0.5] * 4 + [None] * 4, pod="x")
    inv = _inv([labelled, _series([0.5] * 8)], 8, [_pod("x"), _pod("y")])
    held = inv.holdings[inv.holdings[C.HELD]]
    by_pod = dict(zip(held[C.POD], held[C.ATTRIBUTION], strict=True))
    assert by_pod == {"x": Method.DCGM_POD_LABEL.value, "y": Method.KUBERNETES_JOIN.value}
    assert _held_hours(inv) == {"x": pytest.approx(4.0), "y": pytest.approx(4.0)}


def test_the_join_needs_the_request_to_match_the_unlabelled_instances_of_each_bucket() -> None:
    # Two instances with data in hours 1-4, one (GI 5) afterwards: a pod of two is joined in
    # the first four buckets only.
    series = [_series([0.5] * 8), _series([0.5] * 4 + [None] * 4, gi="5")]
    inv = _inv(series, 8, [_pod("a", n=2)])
    held = inv.holdings[inv.holdings[C.HELD]]
    assert sorted(held[C.HOURS].tolist()) == [pytest.approx(4.0), pytest.approx(4.0)]
    un = _views(inv).unattributed
    assert un[C.HOURS].tolist() == [pytest.approx(4.0)]
    assert np.isclose(un[C.GPU_HOURS].sum(), 2 * SLICE * 4)


def _answer(snap: Any, qid: str, labels: dict[str, str], by_hour: dict[int, float]) -> None:
    """Replace the answer of hourly query `qid` with one series of `labels`: its value in each
    hour of `by_hour` (hour i's bucket ends at START + (i + 1) h)."""
    pts = [[START + (i + 1) * 3600, repr(float(v))] for i, v in sorted(by_hour.items())]
    data = {"resultType": "matrix", "result": [{"metric": dict(labels), "values": pts}]}
    body = {"status": "success", "data": data}
    snap.prometheus[qid] = [{"query": qid, "params": {}, "body": body}]


def _split_of_two(
    extra: dict[str, dict[int, float]], fb: float | None = None, built: bool = True
) -> Any:
    """An instance of 12 hours (30 samples in hour 2, 60 in the others) held by pod a in hours
    0-5 and by pod b in hours 8-11 (whole buckets), unheld in hours 6 and 7, with hourly p95s
    of activity and power means of its own, and the answers `extra` (query id -> value by
    hour); `fb`: framebuffer used (MiB) of 40,000, every hour. The inventory, or the snapshot
    where not `built`."""
    samples = [60, 60, 30] + [60] * 9
    s = Series(_series([0.5] * 12).labels, [0.5] * 12, samples=samples, power=100.0)
    if fb is not None:
        s.fb_used, s.fb_free = fb, 40_000.0 - fb
    pods = [_pod("a", finished=START + 6 * 3600), _pod("b", started=START + 8 * 3600)]
    snap = snapshot([s], 12, pods=pods, nodes=[make_node("node-a")])
    p95 = [0.1, 0.3, 0.2, 0.5, 0.4, 0.2, 0.9, 0.8, 0.6, 0.7, 0.65, 0.6]
    power = [100, 200, 300, 150, 250, 120, 90, 80, 400, 410, 390, 420]
    _answer(snap, "act_p95_hourly", s.labels, dict(enumerate(p95)))
    _answer(snap, "power_hourly", s.labels, dict(enumerate(power)))
    for qid, by_hour in extra.items():
        _answer(snap, qid, s.labels, by_hour)
    return build(snap) if built else snap


def test_the_parts_of_a_split_series_take_the_bucket_figures_of_their_own_buckets() -> None:
    power_s = {0: 5.0, 1: 0.0, 2: 7.5, 6: 100.0, 9: 30.0, 11: 12.0}
    inv = _split_of_two({"power_violation_increase_hourly": power_s})
    h = inv.holdings.set_index(C.POD)
    assert h.loc["a", C.HOURS] == pytest.approx(5.5) and h.loc["b", C.HOURS] == pytest.approx(4)
    # The largest hourly p95 of each one's hours: a 0-5, the unheld rest 6-7, b 8-11.
    assert h.loc["a", C.ACT_P95] == 0.5
    assert h.loc["", C.ACT_P95] == 0.9
    assert h.loc["b", C.ACT_P95] == 0.7
    # Power: the hourly means weighted by samples (held time); hour 2 has half the samples.
    a_w = (100 * 60 + 200 * 60 + 300 * 30 + 150 * 60 + 250 * 60 + 120 * 60) / (5 * 60 + 30)
    assert h.loc["a", C.POWER_MEAN] == pytest.approx(a_w, rel=1e-12)
    assert h.loc["", C.POWER_MEAN] == pytest.approx((90 + 80) / 2, rel=1e-12)
    assert h.loc["b", C.POWER_MEAN] == pytest.approx((400 + 410 + 390 + 420) / 4, rel=1e-12)
    # Violation seconds: the sum of each one's hourly increases.
    assert h.loc["a", C.POWER_VIOLATION_S] == 12.5
    assert h.loc["", C.POWER_VIOLATION_S] == 100.0
    assert h.loc["b", C.POWER_VIOLATION_S] == 42.0
    # Read once over the whole window, with no figure per bucket: still none for any part.
    for col in bucketjoin.LOST:
        assert h[col].isna().all(), col


def test_a_part_whose_buckets_lack_a_figure_has_none() -> None:
    # Thermal violations were read in pod a's hours alone; no framebuffer p95 at all.
    inv = _split_of_two({"thermal_violation_increase_hourly": {1: 4.0, 3: 2.0}})
    h = inv.holdings.set_index(C.POD)
    assert h.loc["a", C.THERMAL_VIOLATION_S] == 6.0
    assert np.isnan(h.loc["b", C.THERMAL_VIOLATION_S])  # missing, not zero
    assert np.isnan(h.loc["", C.THERMAL_VIOLATION_S])
    assert h[C.FB_USED_P95].isna().all()
    assert h[C.POWER_VIOLATION_S].isna().all()


def test_a_bucket_cut_between_a_pod_and_the_rest_leaves_both_without_bucket_figures() -> None:
    # Pod a started 30 minutes into hour 3: that bucket's p95 covers a's half and the rest's.
    s = _series([0.5] * 8)
    snap = snapshot(
        [s], 8, pods=[_pod("a", started=START + 3 * 3600 + 1800)], nodes=[make_node("node-a")]
    )
    _answer(snap, "act_p95_hourly", s.labels, {i: 0.1 * (i + 1) for i in range(8)})
    h = build(snap).holdings.set_index(C.POD)
    assert h.loc["a", C.HOURS] == pytest.approx(4.5)
    assert np.isnan(h.loc["a", C.ACT_P95]) and np.isnan(h.loc["", C.ACT_P95])


def test_framebuffer_pressure_of_a_part_is_found_from_its_fullest_hour_without_a_peak() -> None:
    # Pod b's hours are near the slice's 40,000 MiB; pod a's and the rest's are not.
    fb_p95 = dict.fromkeys(range(8), 1_000.0) | dict.fromkeys(range(8, 12), 38_600.0)
    inv = _split_of_two({"fb_used_p95_hourly": fb_p95}, fb=1_000.0)
    h = inv.holdings.set_index(C.POD)
    assert (h.loc["a", C.FB_USED_P95], h.loc["b", C.FB_USED_P95]) == (1_000.0, 38_600.0)
    assert h[C.FB_USED_MAX].isna().all()  # a window maximum: no part's
    (found,) = run_check(gpu020, inv)
    assert found.resource.name == "b"
    assert found.message == (
        "Pod ml/b used 96.5 % of the memory of its 3g.40gb MIG slice at p95 in its fullest "
        "hour (of 39.1 GiB; its peak is not known: it held a part of a series split among the "
        "pods that held it in turn)."
    )
    assert found.recommendation.startswith("Move it from 3g.40gb to 7g.80gb or larger (fits")
    assert found.evidence["fb_used_max_mib"] is None


def test_in_a_narrowed_window_the_parts_have_the_violation_seconds_of_their_buckets_in_it() -> None:
    power_s = {0: 5.0, 1: 0.0, 2: 7.5, 6: 100.0, 9: 30.0, 11: 12.0}
    snap = _split_of_two({"power_violation_increase_hourly": power_s}, built=False)
    inv = build(snap, window=(START + 2 * 3600, START + 12 * 3600))
    h = inv.holdings.set_index(C.POD)
    # Hours 2-11: a's are 2-5 (hour 2 of 30 samples), the rest's 6-7, b's 8-11.
    assert h.loc["a", C.HOURS] == pytest.approx(3.5)
    assert h.loc["a", C.POWER_VIOLATION_S] == 7.5
    assert h.loc["", C.POWER_VIOLATION_S] == 100.0
    assert h.loc["b", C.POWER_VIOLATION_S] == 42.0
    # A narrowed window has no p95s or power: nor have the parts.
    assert h[C.ACT_P95].isna().all() and h[C.POWER_MEAN].isna().all()
