"""GPU041 CPU-starved GPU work, on hand-computed inventories (buckets of 1 h, CFS periods of
100 ms: 36,000 a full hour)."""

from __future__ import annotations

from typing import Any

import pytest

from gpuaudit.checks import gpu041_cpu_starved as gpu041
from gpuaudit.checks.findings import Finding, Severity
from gpuaudit.inventory import Capability, Inventory, build, container_cpu
from gpuaudit.snapshot import Snapshot
from tests.support.factories import (
    START,
    STEP,
    Series,
    gpu_labels,
    make_pod,
    run_check,
    snapshot,
)

PERIODS = 36_000.0


def _pod(cpu_limit: str | None = "2", cpu_request: str | None = None) -> dict[str, Any]:
    pod = make_pod("train-0", gpus=2)
    res = pod["spec"]["containers"][0]["resources"]
    if cpu_limit is not None:
        res["limits"]["cpu"] = cpu_limit
    if cpu_request is not None:
        res["requests"] = {"cpu": cpu_request}
    return pod


def _matrix(rows: list[tuple[dict[str, str], list[float | None]]]) -> list[dict[str, Any]]:
    result = [
        {
            "metric": labels,
            "values": [
                [START + (i + 1) * STEP, repr(v)] for i, v in enumerate(vals) if v is not None
            ],
        }
        for labels, vals in rows
    ]
    body = {"status": "success", "data": {"resultType": "matrix", "result": result}}
    return [{"query": "", "params": {}, "body": body}]


def _snap(
    acts: list[float | None],
    cores: list[float | None],
    throttled: list[float | None],
    periods: list[float | None] | None = None,
    pod: dict[str, Any] | None = None,
    with_cpu: bool = True,
    samples: list[int] | None = None,
) -> Snapshot:
    """`cores`: the CPU used over each hour (CPU seconds / 3,600); `samples`: the GPUs' samples
    per hour (default 60 a full hour: a pod there 20 minutes has 20)."""
    series = [
        Series(
            gpu_labels(uuid=f"G{i}", gpu=str(i), pod="train-0", namespace="ml"),
            act=acts,
            samples=samples,
        )
        for i in range(2)
    ]
    snap = snapshot(series, len(acts), pods=[pod or _pod()])
    for qid in container_cpu.QUERIES:
        snap.prometheus.pop(qid, None)
    if with_cpu:
        who = {"namespace": "ml", "pod": "train-0", "container": "c"}
        full = [PERIODS if c is not None else None for c in cores]
        per = periods if periods is not None else full
        used = [None if c is None else c * STEP for c in cores]
        throttled_n = [
            None if s is None or p is None else s * p for s, p in zip(throttled, per, strict=True)
        ]
        snap.prometheus[container_cpu.USAGE] = _matrix([(who, used)])
        snap.prometheus[container_cpu.PERIODS] = _matrix([(who, per)])
        snap.prometheus[container_cpu.THROTTLED] = _matrix([(who, throttled_n)])
    return snap


def _run(*args: Any, settings: dict[str, float] | None = None, **kw: Any) -> list[Finding]:
    return run_check(gpu041, build(_snap(*args, **kw)), **(settings or {}))


def test_a_trainer_throttled_at_two_cores_while_its_gpus_wait_is_reported() -> None:
    """2 GPUs at 20 % for 24 h; its container used 1.98 of its 2 cores, throttled in 60 % of
    its periods: 24 starved hours, 2 x 24 x 0.8 = 38.4 idle of 48 GPU-hours held."""
    (f,) = _run([0.2] * 24, [1.98] * 24, [0.6] * 24)
    assert f.code == "GPU041" and f.severity is Severity.MEDIUM
    assert f.impact.gpu_hours == pytest.approx(38.4)
    assert f.message == (
        "Pod ml/train-0 held 2 GPUs (H100 80GB HBM3) at 20 % mean engine activity for 24 h "
        "while its container c was CPU-starved (CPU limit 2 cores, 1.98 cores used at the 95th "
        "percentile, throttled in 60 % of its CFS periods): 38.4 of the 48.0 GPU-hours held in "
        "those hours were idle."
    )
    # Throttled: the need is at least the limit, plus 50 %: 3 cores; the request its p95.
    assert "container c: limits.cpu 3, requests.cpu 2" in f.recommendation
    (c,) = f.evidence["containers"]
    assert c["cpu_limit_cores"] == 2.0 and c["cpu_request_cores"] is None
    assert c["throttled_share"] == pytest.approx(0.6) and c["starved_hours"] == 24
    assert f.evidence["starved_hours"] == 24
    assert f.evidence["gpu_hours_held_in_starved_hours"] == pytest.approx(48.0)


def test_at_its_limit_without_much_throttling_counts_too() -> None:
    """3.7 of 4 cores (0.925 of the limit, over 0.9), throttled in 5 % of its periods: the
    need is its p95, 3.7 cores, x 1.5 = 5.55, rounded up to 5600m."""
    (f,) = _run([0.1] * 6, [3.7] * 6, [0.05] * 6, pod=_pod("4", "1"))
    assert f.impact.gpu_hours == pytest.approx(2 * 6 * 0.9)
    assert f.severity is Severity.LOW
    assert "limits.cpu 5600m, requests.cpu 3700m" in f.recommendation
    assert "CPU limit 4 cores, 3.70 cores used" in f.message


def test_only_the_hours_of_low_activity_count() -> None:
    """Throttled all day; the GPUs wait 10 h at 20 % and are busy 14 h at 90 %."""
    (f,) = _run([0.2] * 10 + [0.9] * 14, [2.0] * 24, [0.6] * 24)
    assert f.evidence["starved_hours"] == 10
    assert f.impact.gpu_hours == pytest.approx(2 * 10 * 0.8)


def test_near_miss_cpu_at_its_limit_while_the_gpus_are_busy() -> None:
    assert _run([0.85] * 24, [2.0] * 24, [0.6] * 24) == []


def test_near_miss_idle_gpus_with_cpu_to_spare() -> None:
    """Idle for other reasons (GPU001's case): 0.3 of 2 cores, never throttled."""
    assert _run([0.02] * 24, [0.3] * 24, [0.0] * 24) == []


def test_near_miss_mild_throttling_under_the_share() -> None:
    """Throttled in 10 % of its periods at half its limit: not starved."""
    assert _run([0.2] * 24, [1.0] * 24, [0.1] * 24) == []


def test_near_miss_one_starved_hour_is_under_the_minimum() -> None:
    assert _run([0.2] + [0.9] * 23, [2.0] * 24, [0.6] * 24) == []
    (f,) = _run([0.2] + [0.9] * 23, [2.0] * 24, [0.6] * 24, settings={"cpu_starved_min_hours": 1.0})
    assert f.evidence["starved_hours"] == 1


def test_hours_without_cpu_data_are_not_starved() -> None:
    """cAdvisor answered 3 of 24 hours: the other 21 are unknown, never starved."""
    cores = [2.0] * 3 + [None] * 21
    (f,) = _run([0.2] * 24, cores, [0.6] * 3 + [None] * 21)
    assert f.evidence["starved_hours"] == 3


def test_a_pod_there_twenty_minutes_at_its_limit_is_at_its_limit() -> None:
    """Busy 3 h, then in its last hour it held its GPUs 20 of the 60 minutes (20 samples of a
    60 s scrape) at 20 % and used 2,400 CPU seconds in them: 2 cores, its limit, throttled in
    5 % of its periods. Over the hour that is 0.67 cores, a third of the limit, which hid it;
    over the 1,200 s it was there, 2.0."""
    (f,) = _run(
        [0.9, 0.9, 0.9, 0.2],
        [0.5, 0.5, 0.5, 2400 / STEP],
        [0.0, 0.0, 0.0, 0.05],
        periods=[PERIODS] * 3 + [12_000.0],
        samples=[60, 60, 60, 20],
        settings={"cpu_starved_min_hours": 1.0},
    )
    (c,) = f.evidence["containers"]
    assert c["cores_used_max"] == pytest.approx(2.0) and c["starved_hours"] == 1
    assert f.impact.gpu_hours == pytest.approx(2 * (20 / 60) * 0.8)


def test_the_recommendation_reads_the_use_over_the_time_there() -> None:
    """Busy 4 h at 0.5 cores, then waiting at 1.9 of its 2 cores whenever it is there: one
    whole hour (6,840 CPU seconds) and three of 20 minutes (2,280 each). Over the time there,
    1.9 cores each of the 4 hours: the p95 of its 8 hours 1.9, plus 50 % 2.85, rounded up to
    2900m. Over whole hours the short ones read 0.63 (not at the limit: 1 starved hour), and
    the p95 would be 1.46."""
    short = 1.9 * 1200 / STEP
    (f,) = _run(
        [0.9] * 4 + [0.2] * 4,
        [0.5] * 4 + [1.9, short, short, short],
        [0.0] * 4 + [0.05] * 4,
        periods=[PERIODS] * 5 + [12_000.0] * 3,
        samples=[60] * 5 + [20] * 3,
    )
    (c,) = f.evidence["containers"]
    assert c["starved_hours"] == 4 and c["cores_used_p95"] == pytest.approx(1.9)
    assert c["recommended_cpu_limit"] == "2900m" and c["recommended_cpu_request"] == "1900m"


def test_near_miss_a_pod_there_the_whole_hour_at_a_third_of_its_limit() -> None:
    """The same 2,400 CPU seconds over a whole hour held: 0.67 of 2 cores, not at its limit."""
    settings = {"cpu_starved_min_hours": 1.0}
    acts, throttled = [0.9, 0.9, 0.9, 0.2], [0.0, 0.0, 0.0, 0.05]
    assert _run(acts, [0.5, 0.5, 0.5, 2400 / STEP], throttled, settings=settings) == []


def _inv(**kw: Any) -> Inventory:
    return build(_snap([0.2] * 24, [2.0] * 24, [0.6] * 24, **kw))


def test_without_cadvisor_answers_the_check_is_skipped_with_the_reason() -> None:
    inv = _inv(with_cpu=False)
    assert Capability.CONTAINER_CPU not in inv.capabilities
    assert inv.missing[Capability.CONTAINER_CPU] == container_cpu.MISSING_ANSWER


def test_with_empty_cadvisor_answers_the_check_is_skipped_with_the_reason() -> None:
    snap = _snap([0.2] * 24, [2.0] * 24, [0.6] * 24)
    for qid in container_cpu.QUERIES:
        snap.prometheus[qid] = _matrix([])
    inv = build(snap)
    assert Capability.CONTAINER_CPU not in inv.capabilities
    assert "kubelet's /metrics/cadvisor" in inv.missing[Capability.CONTAINER_CPU]


def test_limits_and_requests_are_read_from_the_pod() -> None:
    inv = _inv(pod=_pod("1500m", "500m"))
    assert Capability.CONTAINER_CPU in inv.capabilities
    res = inv.cpu.resources[("ml", "train-0")]["c"]
    assert (res.request, res.limit) == (0.5, 1.5)
    use = inv.cpu.use[("ml", "train-0")]["c"]
    assert use.used_s[0] == pytest.approx(7200.0) and len(use.ts) == 24


def test_a_container_without_a_limit_is_starved_only_by_throttling() -> None:
    """No CPU limit and no CFS periods: 2 cores used is not 'at a limit'."""
    pod = _pod(cpu_limit=None)
    assert _run([0.2] * 24, [2.0] * 24, [None] * 24, periods=[None] * 24, pod=pod) == []


def test_quantity() -> None:
    assert gpu041.quantity(3.0) == "3"
    assert gpu041.quantity(2.5) == "2500m"
    assert gpu041.quantity(0.1) == "100m"


def _two_clusters(pods: list[dict[str, Any]]) -> Inventory:
    """Pod ml/train-0 in clusters a and b (a scan of every cluster, `--cluster-label cluster`),
    2 GPUs each at 20 % for 24 h. In a its container used 1.98 cores, throttled in 60 % of its
    periods; in b 1.2 cores, throttled in 30 %."""
    series = [
        Series(
            {**gpu_labels(uuid=f"G{i}", gpu=str(i), pod="train-0", namespace="ml"), "cluster": c},
            act=[0.2] * 24,
        )
        for c in ("a", "b")
        for i in range(2)
    ]
    snap = snapshot(series, 24, pods=pods)
    snap.manifest["capabilities"].update(cluster_label="cluster", clusters=["a", "b"])
    rows: dict[str, list[tuple[dict[str, str], list[float | None]]]] = {}
    for c, cores, share in (("a", 1.98, 0.6), ("b", 1.2, 0.3)):
        who = {"namespace": "ml", "pod": "train-0", "container": "c", "cluster": c}
        rows.setdefault(container_cpu.USAGE, []).append((who, [cores * STEP] * 24))
        rows.setdefault(container_cpu.PERIODS, []).append((who, [PERIODS] * 24))
        rows.setdefault(container_cpu.THROTTLED, []).append((who, [share * PERIODS] * 24))
    for qid, got in rows.items():
        snap.prometheus[qid] = _matrix(got)
    return build(snap)


def test_two_clusters_pods_of_one_name_keep_their_own_cpu() -> None:
    """Each cluster's pod gets its own cluster's CPU, none the other's, and neither is lost."""
    inv = _two_clusters([])
    assert sorted(inv.cpu.use) == [("a/ml", "train-0"), ("b/ml", "train-0")]
    assert inv.cpu.use[("b/ml", "train-0")]["c"].used_s[0] == pytest.approx(1.2 * STEP)
    a, b = sorted(run_check(gpu041, inv), key=lambda f: f.resource.namespace)
    assert (a.resource.namespace, b.resource.namespace) == ("a/ml", "b/ml")
    (ca,), (cb,) = a.evidence["containers"], b.evidence["containers"]
    assert (ca["cores_used_p95"], ca["throttled_share"]) == (1.98, 0.6)
    assert (cb["cores_used_p95"], cb["throttled_share"]) == (1.2, 0.3)
    assert a.message.startswith("Pod a/ml/train-0 held 2 GPUs") and "1.98 cores" in a.message


def test_two_clusters_never_take_a_spec_no_cluster_names() -> None:
    """A spec of ml/train-0 (limit 4 cores) in the snapshot names no cluster: neither cluster's
    pod is given it, and its limit is said not read, never 'none'. Throttled, each is found."""
    inv = _two_clusters([_pod("4")])
    for f in run_check(gpu041, inv):
        assert "(CPU limit not read, " in f.message
        (c,) = f.evidence["containers"]
        assert c["cpu_limit_cores"] is None and c["cpu_limit_read"] is False


def test_a_container_its_spec_does_not_list_has_its_limit_not_read() -> None:
    pod = _pod("2")
    pod["spec"]["containers"][0]["name"] = "other"
    (f,) = _run([0.2] * 24, [1.98] * 24, [0.6] * 24, pod=pod)
    assert "(CPU limit not read, 1.98 cores used" in f.message
