from __future__ import annotations

import functools
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuaudit.audit.assemble import run_checks
from gpuaudit.audit.settings import Settings
from gpuaudit.checks import by_code
from gpuaudit.checks import gpu090_idle_queue_quota as gpu090
from gpuaudit.checks.findings import Severity
from gpuaudit.domain.pricing import DEFAULT_PRICES
from gpuaudit.inventory import Inventory, Views
from gpuaudit.inventory.queue_usage import Pending, QueueUsage
from tests.support.factories import (
    START,
    STEP,
    Series,
    gpu_labels,
    inventory,
    iso,
    make_node,
    make_pod,
    run_check,
)
from tests.support.queue_objects import (
    cluster_queue,
    flavor,
    local_queue,
    podgroup,
    volcano_queue,
    workload,
)

HOURS = 30
H100 = 6.88


def _node(name: str, pool: str, gpus: int = 8) -> dict[str, Any]:
    n = make_node(name, gpus=gpus)
    n["metadata"]["labels"]["pool"] = pool
    return n


def _running(ns: str, job: str, node: str, gpus: int, first: int = 0, act: float = 0.6):  # type: ignore[no-untyped-def]
    """A Job's pod holding `gpus` GPUs of `node` from hour `first` to the end, its series, and
    its admitted Workload's owner."""
    pod = f"{job}-x"
    series = [
        Series(
            gpu_labels(f"GPU-{node}-{job}-{i}", str(i), node, pod=pod, namespace=ns),
            act=[act if h >= first else None for h in range(HOURS)],
        )
        for i in range(gpus)
    ]
    return make_pod(pod, namespace=ns, node=node, gpus=gpus, owner=("Job", job)), series


def _inv(
    cqs: list[dict[str, Any]],
    wls: list[dict[str, Any]],
    held: list[tuple[str, str, str, int]],
    nodes: list[dict[str, Any]] | None = None,
    **more: list[dict[str, Any]],
) -> Inventory:
    """`held`: (namespace, job, node, GPUs) of pods running all window."""
    pods, series = [], []
    for ns, job, node, gpus in held:
        p, s = _running(ns, job, node, gpus)
        pods.append(p)
        series += s
    if not series:
        series = [Series(gpu_labels("GPU-idle", "7", "a"), act=[0.0] * HOURS)]
    lists = {
        "kueue_resourceflavors": [flavor("fx", {"pool": "x"}), flavor("fy", {"pool": "y"})],
        "kueue_clusterqueues": cqs,
        "kueue_workloads": wls,
        **more,
    }
    return inventory(
        series, HOURS, pods=pods, nodes=nodes or [_node("a", "x"), _node("b", "x")], lists=lists
    )


def _admitted(ns: str, job: str, cq: str, gpus: int, flavor_name: str = "fx") -> dict[str, Any]:
    return workload(ns, f"wl-{job}", cq, flavor_name, gpus, START - STEP, owner=("Job", job))


def test_idle_quota_outside_a_cohort() -> None:
    inv = _inv(
        [cluster_queue("team-a", [("fx", "nvidia.com/gpu", "8")])],
        [_admitted("a", "train", "team-a", 1)],
        [("a", "train", "a", 1)],
    )
    (f,) = run_check(gpu090, inv)
    assert f.code == "GPU090" and f.severity is Severity.MEDIUM
    assert (f.resource.kind, f.resource.name, f.resource.gpus) == ("ClusterQueue", "team-a", 7.0)
    assert f.message == (
        "ClusterQueue team-a holds 8 GPUs of quota in flavor fx, but what it admitted or used "
        "peaked at 1 GPU over the 30 h window (30 of 240 quota GPU-hours admitted, 30 busy); "
        "7 GPUs of it sat idle and no other queue may borrow it (no cohort)."
    )
    assert f.recommendation == (
        "Lower nominalQuota of nvidia.com/gpu in flavor fx of ClusterQueue team-a from 8 to 1, "
        "or put it in a cohort with lendingLimit so other queues can borrow the idle quota."
    )
    assert f.impact.gpu_hours == pytest.approx(7 * 30)
    assert f.impact.cost == pytest.approx(7 * 30 * H100)
    assert f.evidence["reclaimable"] == 7 and f.evidence["peak_use"] == 1.0


def test_idle_quota_in_a_cohort_counts_only_what_it_may_not_lend() -> None:
    limits = {("fx", "nvidia.com/gpu"): {"lendingLimit": "2"}}
    cqs = [
        cluster_queue("fenced", [("fx", "nvidia.com/gpu", "8")], "c", limits),
        cluster_queue("lends", [("fy", "nvidia.com/gpu", "8")], "c"),
    ]
    wls = [_admitted("a", "t1", "fenced", 1), _admitted("b", "t2", "lends", 1, "fy")]
    nodes = [_node("a", "x"), _node("b", "y")]
    findings = run_check(gpu090, _inv(cqs, wls, [("a", "t1", "a", 1), ("b", "t2", "b", 1)], nodes))
    (f,) = findings  # `lends` lends all its idle quota to its cohort: quiet
    assert f.resource.name == "fenced"
    # nominal 8 - lendingLimit 2 = 6 fenced; 1 used; 5 reclaimable.
    assert f.evidence["reclaimable"] == 5
    assert "its cohort c may not borrow it (lendingLimit 2)" in f.message
    assert "raise its lendingLimit to 7 (or remove it)" in f.recommendation


def test_quota_used_above_half_at_its_peak_is_quiet() -> None:
    # A queue busy part of the time (5 of 8 GPUs at its peak) is not idle, however low its mean.
    cqs = [cluster_queue("weekday", [("fx", "nvidia.com/gpu", "8")])]
    wls = [
        workload(
            "a",
            "wl-day",
            "weekday",
            "fx",
            5,
            START + 2 * STEP,
            START + 4 * STEP,
            owner=("Job", "d"),
        ),
    ]
    assert run_check(gpu090, _inv(cqs, wls, [])) == []
    # At exactly half it is.
    wls = [workload("a", "wl-day", "weekday", "fx", 4, START + 2 * STEP, START + 4 * STEP)]
    (f,) = run_check(gpu090, _inv(cqs, wls, []))
    assert f.evidence["reclaimable"] == 4


def test_pods_of_its_namespaces_keep_deleted_workloads_from_reading_as_idle() -> None:
    cqs = [cluster_queue("team-a", [("fx", "nvidia.com/gpu", "8")])]
    # No Workload is left (deleted with their Jobs), but namespace a, which submits to team-a,
    # held 6 GPUs on the flavor's nodes: quiet. The same pods on node c (no flavor) would not.
    lq = [local_queue("a", "lq", "team-a")]
    held = [("a", "gone", "a", 6)]
    assert run_check(gpu090, _inv(cqs, [], held, kueue_localqueues=lq)) == []
    nodes = [_node("a", "x"), _node("c", "z")]
    (f,) = run_check(gpu090, _inv(cqs, [], [("a", "gone", "c", 6)], nodes, kueue_localqueues=lq))
    assert f.evidence["peak_held_in_namespaces"] == 0.0


def test_short_windows_are_not_judged() -> None:
    inv = _inv([cluster_queue("q", [("fx", "nvidia.com/gpu", "8")])], [], [])
    assert run_check(gpu090, inv, quota_min_hours=31.0) == []
    assert len(run_check(gpu090, inv)) == 1


def test_quota_a_flavor_cannot_honour() -> None:
    cqs = [cluster_queue("vip", [("fy", "nvidia.com/gpu", "12")])]
    nodes = [_node("a", "x"), _node("b", "y", gpus=4)]
    wls = [_admitted("v", "serve", "vip", 4, "fy")]
    (f,) = run_check(gpu090, _inv(cqs, wls, [("v", "serve", "b", 4)], nodes))
    assert f.severity is Severity.MEDIUM and f.impact.gpu_hours == 0.0
    assert f.message == (
        "ClusterQueue vip has a nominal quota of 12 GPUs in flavor fy, but the flavor's 1 "
        "schedulable node allocates only 4 GPUs: 8 GPUs of quota cannot be honoured, so Kueue "
        "admits Workloads whose pods then wait for GPUs."
    )
    assert f.evidence["rule"] == "quota_not_honoured"
    # Idle is judged against the honourable part: 4 of 4 used, so no idle-quota finding.


def test_quota_of_a_flavor_nodes_cannot_honour_together() -> None:
    nodes = [_node("a", "x"), _node("b", "x")]  # fx allocates 16
    over = [
        cluster_queue("q1", [("fx", "nvidia.com/gpu", "10")], "c"),
        cluster_queue("q2", [("fx", "nvidia.com/gpu", "8")], "c"),
    ]
    wls = [_admitted("a", "j1", "q1", 8), _admitted("b", "j2", "q2", 8)]
    held = [("a", "j1", "a", 8), ("b", "j2", "b", 8)]
    (f,) = run_check(gpu090, _inv(over, wls, held, nodes))
    assert (f.resource.kind, f.resource.name) == ("ResourceFlavor", "fx")
    assert f.message == (
        "ResourceFlavor fx is promised 18 GPUs of quota by ClusterQueue q1 (10), ClusterQueue "
        "q2 (8), but its 2 nodes allocate only 16 GPUs: 2 GPUs of quota cannot be honoured when "
        "every queue claims its share."
    )
    exact = [
        cluster_queue("q1", [("fx", "nvidia.com/gpu", "8")], "c"),
        cluster_queue("q2", [("fx", "nvidia.com/gpu", "8")], "c"),
    ]
    assert run_check(gpu090, _inv(exact, wls, held, nodes)) == []


def _flavor_fx(quotas: dict[str, tuple[int, int]]) -> Inventory:
    """ClusterQueues of cohort c on fx (2 nodes, 16 GPUs): name -> (nominal quota, GPUs
    admitted all window)."""
    cqs = [
        cluster_queue(q, [("fx", "nvidia.com/gpu", str(n))], "c") for q, (n, _) in quotas.items()
    ]
    wls = [_admitted(q, f"j-{q}", q, peak) for q, (_, peak) in quotas.items() if peak]
    return _inv(cqs, wls, [])


def test_flavor_quota_advice_names_the_queues_with_most_unused_quota_first() -> None:
    # 22 of quota on 16 GPUs: 6 to take off. q1 leaves 4 unused, q2 3, q3 none: q1 goes down
    # to its peak (6), q2 by the 2 still needed (to 6, above its peak of 5), q3 is kept.
    inv = _flavor_fx({"q1": (10, 6), "q2": (8, 5), "q3": (4, 4)})
    (f,) = run_check(gpu090, inv)
    assert f.evidence["rule"] == "flavor_quota_not_honoured"
    assert f.recommendation == (
        "Lower nominalQuota of nvidia.com/gpu in flavor fx: q1 from 10 to 6 (peak admitted 6), "
        "q2 from 8 to 6 (peak admitted 5); together 6 above what the flavor's nodes allocate "
        "(16 of 22 quota). Or add nodes that match the flavor's nodeLabels."
    )
    assert f.evidence["quota_changes"] == [
        {
            "queue": "q1",
            "kind": "ClusterQueue",
            "from": 10.0,
            "to": 6.0,
            "peak": 6.0,
            "borrows_at_peak": 0.0,
        },
        {
            "queue": "q2",
            "kind": "ClusterQueue",
            "from": 8.0,
            "to": 6.0,
            "peak": 5.0,
            "borrows_at_peak": 0.0,
        },
    ]
    assert f.evidence["short_after_changes"] == 0.0
    # Admitted all window, all at once: together 15, each queue its own peak.
    assert f.evidence["peak_admitted_together"] == 15.0
    assert f.evidence["queue_peaks_admitted"] == {"q1": 6.0, "q2": 5.0, "q3": 4.0}
    assert f.evidence["cohort_peaks_admitted_together"] == {}


def test_flavor_quota_equal_to_what_its_nodes_allocate_is_quiet() -> None:
    assert run_check(gpu090, _flavor_fx({"q1": (10, 2), "q2": (6, 6)})) == []
    # One GPU more is one GPU off the queue with the most unused quota.
    (f,) = run_check(gpu090, _flavor_fx({"q1": (10, 2), "q2": (7, 6)}))
    assert [(c["queue"], c["from"], c["to"]) for c in f.evidence["quota_changes"]] == [
        ("q1", 10.0, 9.0)
    ]


def test_flavor_quota_whose_peaks_alone_exceed_the_nodes_asks_for_nodes() -> None:
    # Peaks admitted 9 + 8 = 17 on 16 GPUs: lowering q1 to its peak takes off 1 of the 2.
    (f,) = run_check(gpu090, _flavor_fx({"q1": (10, 9), "q2": (8, 8)}))
    assert f.recommendation == (
        "Add nodes that match the flavor's nodeLabels for at least 1 GPU: the nodes are too few "
        "for what was admitted (the ClusterQueues admitted up to 17 at once, the flavor's "
        "nodes allocate 16). Lowering nominalQuota of nvidia.com/gpu in flavor fx to the peaks "
        "(q1 from 10 to 9 (peak admitted 9)) takes off only 1 of the 2 above what they "
        "allocate (16 of 18 quota)."
    )
    assert f.evidence["quota_changes"] == [
        {
            "queue": "q1",
            "kind": "ClusterQueue",
            "from": 10.0,
            "to": 9.0,
            "peak": 9.0,
            "borrows_at_peak": 0.0,
        }
    ]
    assert f.evidence["short_after_changes"] == 1.0


def _apart(cohorts: tuple[str, str] = ("c", "c"), **limits: dict[str, str]) -> Inventory:
    """fx (2 nodes, 16 GPUs): q1 has 10 GPUs of quota and admits 9 in hours 0-9, q2 has 8 and
    admits 8 in hours 15-24; `cohorts`: theirs; `limits`: a queue's limits of its GPU quota."""
    cqs = [
        cluster_queue(
            q,
            [("fx", "nvidia.com/gpu", str(n))],
            c,
            {("fx", "nvidia.com/gpu"): limits[q]} if q in limits else None,
        )
        for (q, n), c in zip((("q1", 10), ("q2", 8)), cohorts, strict=True)
    ]
    wls = [
        workload("a", "wl-1", "q1", "fx", 9, START, START + 10 * STEP, owner=("Job", "j1")),
        workload("b", "wl-2", "q2", "fx", 8, START + 15 * STEP, START + 25 * STEP),
    ]
    return _inv(cqs, wls, [])


def test_flavor_quota_lowered_together_to_what_its_queues_admitted_at_once() -> None:
    """Their own peaks (9 + 8 = 17) exceed the flavor's 16 GPUs, but they came 5 hours apart:
    at most 9 at once. Lowering q1 to its peak (9) leaves 1 above the nodes; in one cohort
    without lendingLimit the queues may share, so the largest quota goes one lower (8: q1
    borrows 1 of q2's idle quota at its peak), and their 16 stays above the 9 they admitted
    at once."""
    inv = _apart()
    views = Views(inv, DEFAULT_PRICES)
    by_queue = {u.queue: u for u in views.queue_usage(0.05)}
    assert by_queue["q1"].admitted_by_bucket == (9.0,) * 10 + (0.0,) * 20
    assert by_queue["q2"].admitted_by_bucket == (0.0,) * 15 + (8.0,) * 10 + (0.0,) * 5
    (f,) = run_check(gpu090, inv)
    assert [
        (c["queue"], c["from"], c["to"], c["borrows_at_peak"]) for c in f.evidence["quota_changes"]
    ] == [("q1", 10.0, 8.0, 1.0)]
    assert f.evidence["short_after_changes"] == 0.0
    assert f.evidence["queue_peaks_admitted"] == {"q1": 9.0, "q2": 8.0}
    assert f.evidence["peak_admitted_together"] == 9.0
    assert f.evidence["peak_admitted_together_at"] == iso(START + STEP)
    assert f.evidence["cohort_peaks_admitted_together"] == {"c": 9.0}
    assert f.recommendation == (
        "Lower nominalQuota of nvidia.com/gpu in flavor fx: q1 from 10 to 8 (peak admitted 9, "
        "borrowing 1 from cohort c at its peak); together 2 above what the flavor's nodes "
        "allocate (16 of 18 quota). Or add nodes that match the flavor's nodeLabels. Cohort c's "
        "ClusterQueues peaked in different hours: together they admitted at most 9 at once "
        "(their own peaks add up to 17), so their quota together stays at or above 9 and each "
        "borrows the rest from the others' idle quota at its peak."
    )


def test_the_sum_of_quotas_never_goes_below_what_was_admitted_at_once() -> None:
    """fx on node a only (8 GPUs). Cohort c: q1 (8 of quota) admits 6 in hours 0-9, q2 (8)
    admits 6 in hours 15-24; q3 (5, in no cohort) admits 4 in hours 10-14. 21 of quota, 13 to
    take off: each to its own peak takes 5; q1 and q2 share down to the 6 they admitted at
    once, 6 more; 2 are left. No hour saw more than 6 admitted: the queues could fit in one
    cohort, and the advice says so rather than asking for nodes."""
    cqs = [
        cluster_queue("q1", [("fx", "nvidia.com/gpu", "8")], "c"),
        cluster_queue("q2", [("fx", "nvidia.com/gpu", "8")], "c"),
        cluster_queue("q3", [("fx", "nvidia.com/gpu", "5")]),
    ]
    wls = [
        workload("a", "wl-1", "q1", "fx", 6, START, START + 10 * STEP),
        workload("b", "wl-2", "q2", "fx", 6, START + 15 * STEP, START + 25 * STEP),
        workload("c", "wl-3", "q3", "fx", 4, START + 10 * STEP, START + 15 * STEP),
    ]
    (f,) = run_check(gpu090, _inv(cqs, wls, [], [_node("a", "x"), _node("b", "y")]))
    changes = {c["queue"]: (c["to"], c["borrows_at_peak"]) for c in f.evidence["quota_changes"]}
    assert changes == {"q1": (3.0, 3.0), "q2": (3.0, 3.0), "q3": (4.0, 0.0)}
    # Cohort c's quota together: 6, what its queues admitted at once, never less.
    assert f.evidence["cohort_peaks_admitted_together"] == {"c": 6.0}
    assert f.evidence["peak_admitted_together"] == 6.0
    assert f.evidence["short_after_changes"] == 2.0
    assert f.recommendation == (
        "Lower nominalQuota of nvidia.com/gpu in flavor fx: q1 from 8 to 3 (peak admitted 6, "
        "borrowing 3 from cohort c at its peak), q2 from 8 to 3 (peak admitted 6, borrowing 3 "
        "from cohort c at its peak), q3 from 5 to 4 (peak admitted 4); that leaves 2 GPUs "
        "above what the flavor's nodes allocate (8 of 21 quota), though its ClusterQueues "
        "admitted at most 6 at once (their own peaks, in different hours, add up to 16): to "
        "lower their quota together to no less than 6, put them in one cohort in which none "
        "has a lendingLimit, so that each borrows the others' idle quota at its peak; or add "
        "nodes that match the flavor's nodeLabels for 2."
    )


@pytest.mark.parametrize(
    ("kw", "why"),
    [
        ({"cohorts": ("c1", "c2")}, "in different cohorts"),
        ({"q2": {"lendingLimit": "0"}}, "q2 lends none of its idle quota"),
        ({"q1": {"borrowingLimit": "0"}, "q2": {"borrowingLimit": "0"}}, "neither may borrow"),
    ],
)
def test_queues_that_cannot_share_are_not_lowered_below_their_peaks(
    kw: dict[str, Any], why: str
) -> None:
    (f,) = run_check(gpu090, _apart(**kw))
    assert [(c["queue"], c["to"]) for c in f.evidence["quota_changes"]] == [("q1", 9.0)], why
    assert f.evidence["short_after_changes"] == 1.0
    assert f.evidence["cohort_peaks_admitted_together"] == {}
    assert f.recommendation == (
        "Lower nominalQuota of nvidia.com/gpu in flavor fx: q1 from 10 to 9 (peak admitted 9); "
        "that leaves 1 GPU above what the flavor's nodes allocate (16 of 18 quota), though its "
        "ClusterQueues admitted at most 9 at once (their own peaks, in different hours, add up "
        "to 17): to lower their quota together to no less than 9, put them in one cohort in "
        "which none has a lendingLimit, so that each borrows the others' idle quota at its "
        "peak; or add nodes that match the flavor's nodeLabels for 1."
    ), why


def test_flavor_quota_over_the_nodes_by_a_cohorts_own_quota() -> None:
    # q1 and q2 fit at their peaks (2 + 6 of 16); the Cohort's own 10 keeps 2 above the nodes.
    cohort = cluster_queue("c", [("fx", "nvidia.com/gpu", "10")])
    cqs = [
        cluster_queue("q1", [("fx", "nvidia.com/gpu", "4")], "c"),
        cluster_queue("q2", [("fx", "nvidia.com/gpu", "8")], "c"),
    ]
    wls = [_admitted("a", "j1", "q1", 2), _admitted("b", "j2", "q2", 6)]
    (f,) = run_check(gpu090, _inv(cqs, wls, [], kueue_cohorts=[cohort]))
    assert f.recommendation == (
        "Lower nominalQuota of nvidia.com/gpu in flavor fx: q1 from 4 to 2 (peak admitted 2), "
        "q2 from 8 to 6 (peak admitted 6); the Cohorts' own quota (Cohort c (10)) keeps 2 GPUs "
        "above what the flavor's nodes allocate (16 of 22 quota): lower it by 2, or add nodes "
        "that match the flavor's nodeLabels."
    )


def _cohort(borrowing: Any = None, lending: Any = "0", since_h: int = 5) -> Inventory:
    """A and B in cohort c on fx (16 GPUs): A has 4 GPUs of quota, lends `lending` and uses 1;
    B has 4, uses 4 and has a Workload waiting `since_h` hours for 2 more."""
    a_lim = {("fx", "nvidia.com/gpu"): {"lendingLimit": lending}} if lending is not None else {}
    b_lim = (
        {("fx", "nvidia.com/gpu"): {"borrowingLimit": borrowing}} if borrowing is not None else {}
    )
    cqs = [
        cluster_queue("A", [("fx", "nvidia.com/gpu", "4")], "c", a_lim),
        cluster_queue("B", [("fx", "nvidia.com/gpu", "4")], "c", b_lim),
    ]
    wls = [
        _admitted("a", "ta", "A", 1),
        _admitted("b", "tb", "B", 4),
        workload(
            "b", "big", "", "", 2, pending_since=START + (HOURS - since_h) * STEP, local_queue="lq"
        ),
    ]
    lq = [local_queue("b", "lq", "B")]
    return _inv(cqs, wls, [("a", "ta", "a", 1), ("b", "tb", "b", 4)], kueue_localqueues=lq)


def test_queue_starved_next_to_a_peer_that_does_not_lend() -> None:
    findings = run_check(gpu090, _cohort())
    starved = [f for f in findings if f.evidence["rule"] == "starved_next_to_idle_quota"]
    (f,) = starved
    assert (f.resource.name, f.severity) == ("B", Severity.HIGH)
    assert f.message == (
        "ClusterQueue B has Workloads waiting for nvidia.com/gpu quota in flavor fx (b/big "
        "(2 GPUs, 5.0 h)) while cohort c peers kept idle quota they would not lend: A (3 GPUs "
        "idle, lendingLimit 0)."
    )
    assert f.impact.gpu_hours == pytest.approx(2 * 5)
    assert f.impact.cost == pytest.approx(2 * 5 * H100)
    assert f.evidence["waiting"][0]["shortfall"] == 2.0
    # A's own idle quota is a finding of its own.
    assert {x.resource.name for x in findings} == {"A", "B"}


@pytest.mark.parametrize(
    ("kw", "why"),
    [
        ({"borrowing": "0"}, "B may not borrow"),
        ({"lending": None}, "A lends all its idle quota"),
        ({"lending": "3"}, "A lends enough"),
        ({"since_h": 0}, "waiting for less than 30 minutes"),
    ],
)
def test_starvation_near_misses(kw: dict[str, Any], why: str) -> None:
    findings = run_check(gpu090, _cohort(**kw))
    assert not [f for f in findings if f.evidence["rule"] == "starved_next_to_idle_quota"], why


def test_volcano_idle_guarantee_and_a_share_above_the_cluster() -> None:
    vqs = [
        volcano_queue("reserved", guarantee=8, deserved=8, allocated=1),
        volcano_queue("burst", deserved=40),
        volcano_queue("used", guarantee=2, allocated=2),
    ]
    pgs = [podgroup("v", "pg", "reserved"), podgroup("u", "pg2", "used", 2)]
    pods, series = [], []
    for ns, job, node, gpus, pg in (("v", "vj", "a", 1, "pg"), ("u", "uj", "b", 2, "pg2")):
        p, s = _running(ns, job, node, gpus)
        p["metadata"]["annotations"] = {"scheduling.k8s.io/group-name": pg}
        pods.append(p)
        series += s
    lists = {"volcano_queues": vqs, "volcano_podgroups": pgs}
    inv = inventory(series, HOURS, pods=pods, nodes=[_node("a", "x"), _node("b", "x")], lists=lists)
    by_name = {f.resource.name: f for f in run_check(gpu090, inv)}
    assert set(by_name) == {"reserved", "burst"}
    idle = by_name["reserved"]
    assert idle.message == (
        "Volcano queue reserved guarantees 8 GPUs, but its use peaked at 1 GPU over the 30 h "
        "window (30 GPU-hours held, 30 busy); 7 GPUs of guarantee sat reserved for nobody."
    )
    assert idle.impact.gpu_hours == pytest.approx(7 * 30)
    burst = by_name["burst"]
    assert burst.message == (
        "Volcano queue burst deserves 40 GPUs, but the cluster's 2 schedulable nodes allocate "
        "only 16 GPUs: 24 GPUs cannot be honoured, so its fair share and reclaim decisions rest "
        "on GPUs that do not exist."
    )


def test_skipped_with_the_reason_without_queue_objects() -> None:
    inv = inventory(
        [Series(gpu_labels(), act=[0.1] * HOURS)], HOURS, pods=[], nodes=[make_node("a")]
    )
    check = by_code("GPU090")
    assert check is not None
    res = run_checks(inv, Settings(), checks=[check])
    (s,) = res.skipped
    assert s.code == "GPU090"
    assert "no Kueue ClusterQueues with Workloads" in s.reason
    assert "no Volcano Queues with PodGroups" in s.reason


def test_kueue_rules_need_the_workloads_list() -> None:
    # Volcano objects were read, Kueue Workloads were not: ClusterQueues are left alone rather
    # than read as idle.
    lists = {
        "kueue_clusterqueues": [cluster_queue("q", [("fx", "nvidia.com/gpu", "8")])],
        "volcano_queues": [volcano_queue("v", deserved=1)],
        "volcano_podgroups": [],
    }
    inv = inventory(
        [Series(gpu_labels(), act=[0.1] * HOURS)],
        HOURS,
        pods=[],
        nodes=[make_node("a")],
        lists=lists,
    )
    assert run_check(gpu090, inv) == []


def test_a_cohort_of_one_lends_to_nobody() -> None:
    cqs = [cluster_queue("lonely", [("fx", "nvidia.com/gpu", "8")], "solo")]
    (f,) = run_check(gpu090, _inv(cqs, [_admitted("a", "t", "lonely", 1)], [("a", "t", "a", 1)]))
    assert f.evidence["reclaimable"] == 7
    assert f.message.endswith(
        "7 GPUs of it sat idle and its cohort solo has no other queue to lend it to."
    )


def test_a_flavor_that_does_not_exist() -> None:
    cqs = [cluster_queue("ghost", [("nope", "nvidia.com/gpu", "2")])]
    (f,) = run_check(gpu090, _inv(cqs, [], []))
    assert f.message.startswith(
        "ClusterQueue ghost has a nominal quota of 2 GPUs in flavor nope, but the cluster has no "
        "ResourceFlavor of that name: 2 GPUs of quota cannot be honoured"
    )


def test_the_queue_status_covers_workloads_the_scan_did_not_read() -> None:
    # A scan narrowed to other namespaces sees none of its Workloads, but the ClusterQueue
    # itself says 6 GPUs are reserved now: not idle.
    cq = cluster_queue("busy", [("fx", "nvidia.com/gpu", "8")])
    cq["status"] = {
        "flavorsReservation": [
            {"name": "fx", "resources": [{"name": "nvidia.com/gpu", "total": "6"}]}
        ]
    }
    assert run_check(gpu090, _inv([cq], [], [])) == []
    cq["status"]["flavorsReservation"][0]["resources"][0]["total"] = "1"
    (f,) = run_check(gpu090, _inv([cq], [], []))
    assert f.evidence["peak_admitted"] == 1.0 and f.evidence["reclaimable"] == 7


# ---- quantities that cannot be read ----------------------------------------------------------


@pytest.mark.parametrize("raw", ["1e9", "NaN", "1e400", "-4", "\u0661\u0662"])
def test_a_queue_whose_quota_cannot_be_read_is_not_judged(raw: str) -> None:
    """Never read as 0 or clamped to a bound: the queue is left out, a warning names it and
    the audit is incomplete; its readable neighbour is judged as before."""
    cqs = [
        cluster_queue("team-a", [("fx", "nvidia.com/gpu", raw)]),
        cluster_queue("team-b", [("fx", "nvidia.com/gpu", "8")]),
    ]
    wls = [_admitted("a", "ta", "team-a", 1), _admitted("b", "tb", "team-b", 1)]
    inv = _inv(cqs, wls, [("a", "ta", "a", 1), ("b", "tb", "b", 1)])
    assert {f.resource.name for f in run_check(gpu090, inv)} == {"team-b"}
    (said,) = [w for w in inv.warnings if w.startswith("ClusterQueue team-a:")]
    assert said.startswith(
        f"ClusterQueue team-a: nominalQuota of nvidia.com/gpu in flavor fx is {raw!r}"
    )
    assert said.endswith("; its quota is not audited")
    assert not inv.complete and inv.incomplete_reasons


def test_a_workload_whose_usage_cannot_be_read_leaves_its_queue_unjudged() -> None:
    # Its admitted GPUs read as 0 would make the queue's quota look idle.
    wl = _admitted("a", "ta", "team-a", 6)
    wl["status"]["admission"]["podSetAssignments"][0]["resourceUsage"] = {"nvidia.com/gpu": "NaN"}
    inv = _inv([cluster_queue("team-a", [("fx", "nvidia.com/gpu", "8")])], [wl], [])
    assert run_check(gpu090, inv) == []
    assert any(
        w.startswith("Workload a/wl-ta: podSetAssignments[main].resourceUsage of nvidia.com/gpu")
        and w.endswith("ClusterQueue team-a is not audited")
        for w in inv.warnings
    )


def test_a_flavor_total_leaves_a_quota_nobody_could_read_out() -> None:
    nodes = [_node("a", "x"), _node("b", "x")]  # fx allocates 16
    cqs = [
        cluster_queue("q1", [("fx", "nvidia.com/gpu", "10")], "c"),
        cluster_queue("q2", [("fx", "nvidia.com/gpu", "8")], "c"),
        cluster_queue("q3", [("fx", "nvidia.com/gpu", "eight")], "c"),
    ]
    wls = [_admitted("a", "j1", "q1", 8), _admitted("b", "j2", "q2", 8)]
    held = [("a", "j1", "a", 8), ("b", "j2", "b", 8)]
    # The readable quotas alone are 2 above the nodes: judged, and q3 is left out of the advice.
    (f,) = run_check(gpu090, _inv(cqs, wls, held, nodes))
    assert "promised at least 18 GPUs" in f.message
    assert f.recommendation.endswith(
        " It leaves out ClusterQueue q3, whose quota or use could not be read; their quota "
        "comes on top."
    )
    assert [c["queue"] for c in f.evidence["quota_changes"]] == ["q1"]
    assert f.evidence["left_out_unaudited"] == ["ClusterQueue q3"]
    # Within the nodes without it: no finding, whatever q3 holds.
    cqs[0] = cluster_queue("q1", [("fx", "nvidia.com/gpu", "8")], "c")
    assert run_check(gpu090, _inv(cqs, wls, held, nodes)) == []


def test_a_cohort_with_a_quota_nobody_could_read_is_not_judged_for_starvation() -> None:
    inv = _cohort(lending="lots")  # A's lendingLimit: what A could lend is unknown
    rules = {f.evidence["rule"] for f in run_check(gpu090, inv)}
    assert "starved_next_to_idle_quota" not in rules
    assert any(w.startswith("ClusterQueue A: lendingLimit") for w in inv.warnings)


# ---- the cohort's peers, summed once ---------------------------------------------------------


def _literal_starved(u: Any, p: Any, lines: list[Any], pool: float) -> Any:
    """The starvation rule as the docstring says it, peer by peer."""
    eps = gpu090.EPS
    shortfall = p.quantity - max(0.0, u.quota - u.admitted_now)
    room = float("inf") if u.borrowing_limit is None else u.borrowing_limit
    if shortfall <= eps or shortfall > room + eps:
        return None
    lendable, fenced, named = pool, 0.0, []
    for peer in lines:
        if peer.queue == u.queue:
            continue
        idle = peer.quota - peer.use_since(p.since)
        if idle < 1 - eps:
            continue
        lend = idle if peer.lending_limit is None else min(idle, peer.lending_limit)
        lendable += lend
        if idle - lend >= 1 - eps:
            fenced += idle - lend
            named.append((peer.queue, idle, peer.lending_limit))
    if not named or lendable >= shortfall - eps or lendable + fenced < shortfall - eps:
        return None
    return tuple(named)


@functools.cache
def _line_of_b() -> QueueUsage:
    views = Views(_cohort(), DEFAULT_PRICES)
    (line,) = [u for u in views.queue_usage(0.05) if u.queue == "B"]
    return line


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_peers_summed_once_agree_with_the_rule_peer_by_peer(data: st.DataObject) -> None:
    base = _line_of_b()
    nb = len(base.use_by_bucket)
    small = st.integers(0, 6).map(float)
    lines = [
        replace(
            base,
            queue=data.draw(st.sampled_from(["A", "B", "C", "D"])),
            quota=data.draw(small),
            lending_limit=data.draw(st.none() | small),
            borrowing_limit=data.draw(st.none() | small),
            admitted_now=data.draw(small),
            use_by_bucket=tuple(data.draw(st.lists(small, min_size=nb, max_size=nb))),
        )
        for _ in range(data.draw(st.integers(1, 6)))
    ]
    u = data.draw(st.sampled_from(lines))
    since = base.bucket_start + data.draw(st.integers(-2, nb + 1)) * base.step_s
    since += data.draw(st.sampled_from([0.0, -1.0, 1.0]))
    p = Pending("ns", "w", base.resource, data.draw(st.integers(1, 9).map(float)), since)
    pool = data.draw(small)
    got = gpu090._starved(u, p, gpu090._Peers(lines), pool)
    want = _literal_starved(u, p, lines, pool)
    assert (got.peers if got is not None else None) == want
