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
from gpuaudit.checks import gpu080_unmonitored_gpus as gpu080
from gpuaudit.domain.pricing import DEFAULT_PRICES
from gpuaudit.inventory import Views
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
