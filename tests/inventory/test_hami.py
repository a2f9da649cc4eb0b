"""GPUs shared by HAMi: a pod holds its share of the GPU (the larger of cores and memory), never
the whole GPU (opencost/opencost#3828); its activity is its own where HAMi's vGPU monitor
measures it, else its GPU's split by share; the ledger adds up; the annotations are read in
every version's format, and refused when malformed."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from gpuaudit.audit import capacity
from gpuaudit.audit.ledger import ledger
from gpuaudit.audit.summary import summarise
from gpuaudit.checks import gpu080_unmonitored_gpus as gpu080
from gpuaudit.domain.pricing import DEFAULT_PRICES
from gpuaudit.inventory import Capability, Inventory, Views, build, hami
from gpuaudit.inventory import columns as C
from gpuaudit.inventory.attribution import Method
from gpuaudit.snapshot.fields import keep_object
from tests.support.factories import START, STEP, run_check, snapshot
from tests.support.hami import HOURS, MIB, UUID, device, hami_node, hami_pod, with_hami


def build_two(util: dict[str, list[float | None]] | None = None, **kw: Any) -> Inventory:
    """A 25 % pod (idle by HAMi's monitor) and a 50 % pod on one GPU."""
    pods = [hami_pod("quarter", 25, 20_390), hami_pod("half", 50, 40_780)]
    snap = snapshot([device()], HOURS, pods=pods, nodes=[hami_node()])
    if util is not None:
        snap = with_hami(snap, util, **kw)
    return build(snap)


def tenant(inv: Inventory, pod: str) -> Any:
    h = inv.holdings
    rows = h[(h[C.POD] == pod) & h[C.HELD]]
    assert len(rows) == 1, rows
    return rows.iloc[0]


def test_a_quarter_pod_is_charged_a_quarter_of_the_gpu_everywhere() -> None:
    # OpenCost charges a 25 % HAMi pod the whole GPU (opencost/opencost#3828): here it holds
    # 0.25 of it in allocation, idle GPU-hours and cost.
    inv = build_two({"quarter": [1.0] * HOURS, "half": [40.0] * HOURS})
    q, half = tenant(inv, "quarter"), tenant(inv, "half")
    assert q[C.FRACTION] == pytest.approx(0.25) and half[C.FRACTION] == pytest.approx(0.5)
    assert q[C.ATTRIBUTION] == half[C.ATTRIBUTION] == Method.HAMI_SHARE.value
    assert q[C.GPU_HOURS] == pytest.approx(0.25 * HOURS)
    # The GPU's own series stays, unheld: the quarter not held by anyone is not allocated.
    h = inv.holdings
    assert len(h[(h[C.UUID] == UUID) & ~h[C.HELD]]) == 1
    views = Views(inv, DEFAULT_PRICES)
    led = ledger(views)
    assert led.attributed[Method.HAMI_SHARE.value] == pytest.approx(0.75 * HOURS)
    assert led.allocated_gpu_hours == pytest.approx(0.75 * HOURS)
    summary = summarise(views, 0.05, "USD")
    assert summary.allocated_gpu_hours == pytest.approx(0.75 * HOURS)
    assert summary.gpus_total == 1 and summary.gpus_allocated_now == pytest.approx(0.75)
    # The quarter pod is idle (1 % of the GPU, 4 % of its share); the half pod is not.
    price = views.price("NVIDIA H100 80GB HBM3")
    assert summary.idle_gpu_hours == pytest.approx(0.25 * HOURS)
    assert summary.wasted_cost == pytest.approx(0.25 * HOURS * price)
    per = views.per_pod.set_index(C.POD)
    assert per.loc["quarter", C.POD_GPUS] == pytest.approx(0.25)
    assert per.loc["quarter", C.COST] == pytest.approx(0.25 * HOURS * price)


def test_hamis_memory_and_cores_are_no_gpus_a_pod_needs() -> None:
    # `nvidia.com/gpumem: 20390` is MiB, not 20,390 GPUs: no note, no incomplete audit, and the
    # pod needs one `nvidia.com/gpu` (a vGPU) of the scheduler.
    inv = build_two()
    assert inv.complete and not [w for w in inv.warnings if "gpumem" in w or "gpucores" in w]
    assert all(r == {"nvidia.com/gpu": 1.0} for r in inv.pods[C.REQUESTS])


def test_activity_is_the_pods_own_use_of_its_share() -> None:
    inv = build_two({"quarter": [1.0] * HOURS, "half": [60.0] * HOURS})
    q, half = tenant(inv, "quarter"), tenant(inv, "half")
    assert q[C.ACT_MEAN] == pytest.approx(0.04)  # 1 % of the GPU over its 25 %
    assert half[C.ACT_MEAN] == pytest.approx(1.0)  # 60 % of the GPU: all of its 50 % and more
    assert q[C.ACT_SOURCE] == "hami_container_device_utilization_ratio"
    assert Capability.HAMI in inv.capabilities
    usage = inv.hami.usage
    assert usage is not None and len(usage) == 2 * HOURS
    ten = inv.hami.tenants
    assert ten is not None and set(ten[C.HAMI_SHARE_BY]) == {"cores"}


def test_without_hamis_monitor_the_gpus_activity_is_split_by_share_and_said_so() -> None:
    inv = build_two()
    q, half = tenant(inv, "quarter"), tenant(inv, "half")
    # The GPU reads 0.3 with 0.75 of it held: each pod is credited 0.3 / 0.75 of its share.
    assert q[C.ACT_MEAN] == pytest.approx(0.4) and half[C.ACT_MEAN] == pytest.approx(0.4)
    assert q[C.ACT_SOURCE] == hami.ACT_SOURCE_DEVICE
    assert Capability.HAMI not in inv.capabilities
    assert "no HAMi vGPU monitor series" in inv.missing[Capability.HAMI]
    assert any("GPU022 is skipped" in w for w in inv.warnings)


def test_the_legacy_spelling_and_honoured_labels_are_read_alike() -> None:
    util: dict[str, list[float | None]] = {"quarter": [1.0] * HOURS, "half": [40.0] * HOURS}
    for kw in ({"legacy": True}, {"exported": False}):
        inv = build_two(util, **kw)
        assert tenant(inv, "quarter")[C.ACT_MEAN] == pytest.approx(0.04), kw
        assert tenant(inv, "half")[C.ACT_MEAN] == pytest.approx(0.8), kw


def test_a_zero_core_pods_monitor_series_is_never_read_as_idle() -> None:
    # HAMi records a container's utilization only under a core limit between 0 and 100: a
    # `gpucores: 0` pod's series reads 0 whatever it runs, so its GPU's activity is used.
    pods = [hami_pod("free", 0, 20_390)]
    snap = with_hami(
        snapshot([device(0.5)], HOURS, pods=pods, nodes=[hami_node()]), {"free": [0.0] * HOURS}
    )
    inv = build(snap)
    t = tenant(inv, "free")
    assert t[C.FRACTION] == pytest.approx(0.25)  # its memory: 20,390 of 81,559 MiB
    assert t[C.ACT_MEAN] == pytest.approx(1.0)  # 0.5 of the GPU over its 0.25
    ten = inv.hami.tenants
    assert ten is not None and not ten[C.HAMI_MEASURED].iloc[0]
    assert ten[C.HAMI_SHARE_BY].iloc[0] == "memory"


def test_shares_that_overfill_a_gpu_are_scaled_down_together() -> None:
    # 70 % cores + 10 % memory beside 10 % cores + 70 % memory: each blocks 70 %, 140 % in all.
    pods = [hami_pod("compute", 70, 8_156), hami_pod("memory", 10, 57_092)]
    inv = build(snapshot([device()], HOURS, pods=pods, nodes=[hami_node(legacy=True)]))
    c, m = tenant(inv, "compute"), tenant(inv, "memory")
    assert c[C.FRACTION] == pytest.approx(0.5) and m[C.FRACTION] == pytest.approx(0.5)
    assert ledger(Views(inv, DEFAULT_PRICES)).allocated_gpu_hours == pytest.approx(HOURS)


def test_a_pod_that_started_in_the_window_holds_from_its_start() -> None:
    pods = [hami_pod("late", 50, 40_780, started=START + 3 * STEP + 60)]
    inv = build(snapshot([device()], HOURS, pods=pods, nodes=[hami_node()]))
    # From its start, exactly: the bucket it started in counts for the 59 minutes it ran.
    assert tenant(inv, "late")[C.HOURS] == pytest.approx(HOURS - 3 - 60 / 3600)


def test_only_running_pods_hold_shares() -> None:
    pods = [hami_pod("done", 50, 40_780, phase="Succeeded")]
    inv = build(snapshot([device()], HOURS, pods=pods, nodes=[hami_node()]))
    assert not inv.holdings[C.HELD].any()
    assert inv.hami.tenants is None
    assert "no running pod holds a GPU share" in inv.missing[Capability.HAMI]


def _ended(util: dict[str, list[float | None]] | None = None) -> Inventory:
    """`done` (50 %) ended 3.5 h into the 8 h window; `stay` (25 %) runs all of it."""
    pods = [
        hami_pod("done", 50, 40_780, finished=START + 3 * STEP + STEP / 2),
        hami_pod("stay", 25, 20_390),
    ]
    snap = snapshot([device()], HOURS, pods=pods, nodes=[hami_node()])
    return build(snap if util is None else with_hami(snap, util))


def test_a_pod_that_ended_holds_its_share_for_the_time_it_ran() -> None:
    # Its share from its start to its containers' finishedAt, the bucket it ended in counted
    # for the half it ran; its activity its own (2 % of the GPU over its 50 %) in those hours.
    inv = _ended({"done": [2.0] * 4 + [None] * 4, "stay": [20.0] * HOURS})
    done = tenant(inv, "done")
    assert done[C.ATTRIBUTION] == Method.HAMI_SHARE.value and done[C.FRACTION] == 0.5
    assert done[C.HOURS] == pytest.approx(3.5) and done[C.GPU_HOURS] == pytest.approx(1.75)
    assert done[C.LAST_TS] == START + 4 * STEP
    assert done[C.ACT_MEAN] == pytest.approx(0.04)
    assert done[C.ACT_SOURCE] == "hami_container_device_utilization_ratio"
    hr = inv.hourly[inv.hourly[C.HOLDING] == done[C.HOLDING]]
    assert hr[C.HELD_H].tolist() == pytest.approx([1.0, 1.0, 1.0, 0.5])
    views = Views(inv, DEFAULT_PRICES)
    assert views.unattributed.empty  # not a pod without DCGM series
    led = ledger(views)
    assert led.attributed[Method.HAMI_SHARE.value] == pytest.approx(1.75 + 0.25 * HOURS)
    assert led.unattributed_gpu_hours == 0
    assert summarise(views, 0.05, "USD").allocated_gpu_hours == pytest.approx(1.75 + 2.0)


def test_without_hamis_monitor_an_ended_pods_gpu_is_split_among_those_that_ran() -> None:
    # The GPU reads 0.3: while both ran (0.75 held) each is credited 0.3 / 0.75 of its share;
    # once `done` ended, `stay` alone (0.25 held) is credited all of its share.
    inv = _ended()
    assert tenant(inv, "done")[C.ACT_MEAN] == pytest.approx(0.4)
    assert tenant(inv, "stay")[C.ACT_MEAN] == pytest.approx((4 * 0.4 + 4 * 1.0) / HOURS)


def test_shares_held_one_after_another_are_not_scaled_down() -> None:
    # 70 % until hour 4, then another 70 %: never more than the GPU at once.
    pods = [
        hami_pod("first", 70, 8_156, finished=START + 4 * STEP),
        hami_pod("then", 70, 8_156, started=START + 4 * STEP),
    ]
    inv = build(snapshot([device()], HOURS, pods=pods, nodes=[hami_node()]))
    first, then = tenant(inv, "first"), tenant(inv, "then")
    assert first[C.FRACTION] == pytest.approx(0.7) and then[C.FRACTION] == pytest.approx(0.7)
    assert first[C.HOURS] == pytest.approx(4.0) and then[C.HOURS] == pytest.approx(4.0)
    assert ledger(Views(inv, DEFAULT_PRICES)).allocated_gpu_hours == pytest.approx(0.7 * HOURS)


UUID2 = "GPU-4f1a2b3c-0000-1111-2222-999999999999"


def test_a_share_of_a_gpu_without_dcgm_series_is_unattributed_at_its_share() -> None:
    # `dark` holds 10 % of the cores and half the memory (40,780 of 81,560 MiB) of a GPU no DCGM
    # series describes, all 8 h: 0.5 x 8 = 4 GPU-hours unattributed, not 1 / the split count
    # (0.1 GPU) as for a time-sliced replica; `lit`, on the GPU with series, holds its 0.25.
    pods = [hami_pod("lit", 25, 20_390), hami_pod("dark", 10, 40_780, uuid=UUID2)]
    node = hami_node(uuids=(UUID, UUID2))
    inv = build(snapshot([device()], HOURS, pods=pods, nodes=[node]))
    views = Views(inv, DEFAULT_PRICES)
    un = views.unattributed
    assert un[C.POD].tolist() == ["dark"]
    row = un.iloc[0]
    assert (row["gpus"], row[C.HOURS], row[C.GPU_HOURS]) == pytest.approx((0.5, 8.0, 4.0))
    assert row["kind"] == "shared" and row["reason"] == "no_pod_label"
    led = ledger(views)
    assert led.attributed[Method.HAMI_SHARE.value] == pytest.approx(0.25 * HOURS)
    assert led.unattributed_gpu_hours == pytest.approx(4.0)
    assert led.allocated_gpu_hours == pytest.approx(2.0 + 4.0)
    assert summarise(views, 0.05, "USD").allocated_gpu_hours == pytest.approx(6.0)
    (f,) = [f for f in run_check(gpu080, inv) if f.resource.name == "dark"]
    assert f.resource.gpus == pytest.approx(0.5) and f.impact.gpu_hours == pytest.approx(4.0)
    assert "HAMi" in f.message
    # The capacity plan counts it held at its share, of unknown activity.
    h100 = capacity.plan(views, 0.05, "USD", []).by_product["NVIDIA-H100-80GB-HBM3"]
    assert h100.held_by_hour == pytest.approx((0.75,) * HOURS)
    assert h100.without_dcgm_by_hour == pytest.approx((0.5,) * HOURS)


def test_a_pod_with_shares_of_a_gpu_with_series_and_one_without_is_counted_for_both() -> None:
    # `both`: 25 % of the GPU with series (joined) and half of the one without (unattributed).
    pod = hami_pod("both", 25, 20_390)
    pod["metadata"]["annotations"][hami.ALLOCATED] = (
        f"{UUID},NVIDIA,20390,25:{UUID2},NVIDIA,40780,10:;"
    )
    node = hami_node(uuids=(UUID, UUID2))
    inv = build(snapshot([device()], HOURS, pods=[pod], nodes=[node]))
    views = Views(inv, DEFAULT_PRICES)
    assert tenant(inv, "both")[C.GPU_HOURS] == pytest.approx(0.25 * HOURS)
    un = views.unattributed
    assert un[C.POD].tolist() == ["both"] and un["gpus"].tolist() == pytest.approx([0.5])
    assert ledger(views).allocated_gpu_hours == pytest.approx(0.75 * HOURS)


def test_a_pod_that_ended_before_the_window_holds_nothing() -> None:
    pods = [hami_pod("old", 25, 20_390, started=START - 2 * STEP, finished=START - STEP)]
    inv = build(snapshot([device()], HOURS, pods=pods, nodes=[hami_node()]))
    assert not inv.holdings[C.HELD].any() and inv.hami.tenants is None
    assert Views(inv, DEFAULT_PRICES).unattributed.empty


def test_a_share_on_a_node_without_an_exporter_is_unattributed_at_its_share() -> None:
    # No DCGM series at all: the node's pods' shares, over the time each ran (`gone` ended at
    # hour 5.25: 5.25 h of 0.3, its cores being more than its memory).
    pods = [
        hami_pod("dark", 10, 40_780),
        hami_pod("gone", 30, 8_156, finished=START + 5 * STEP + STEP / 4),
    ]
    inv = build(snapshot([], HOURS, pods=pods, nodes=[hami_node()]))
    views = Views(inv, DEFAULT_PRICES)
    un = views.unattributed.set_index(C.POD)
    assert set(un["reason"]) == {"no_exporter"}
    assert un.loc["dark", C.GPU_HOURS] == pytest.approx(0.5 * HOURS)
    assert un.loc["gone", C.GPU_HOURS] == pytest.approx(0.3 * 5.25)
    assert ledger(views).allocated_gpu_hours == pytest.approx(0.5 * HOURS + 0.3 * 5.25)
    (f,) = run_check(gpu080, inv)
    assert f.resource.gpus == pytest.approx(0.8)


def test_the_most_shares_at_once_while_each_ran_is_that_of_brute_force() -> None:
    rng = np.random.default_rng(3)
    for _ in range(200):
        n = int(rng.integers(1, 12))
        begin = rng.integers(0, 10, n).astype(float)
        end = begin + rng.integers(1, 6, n)
        begin[rng.random(n) < 0.2] = -np.inf
        end[rng.random(n) < 0.3] = np.inf
        shares = rng.random(n).round(2).tolist()
        runs = list(zip(begin.tolist(), end.tolist(), strict=True))
        # At each start, the shares of those running then; per pod, the most over its run.
        at = [sum(x for (b, e), x in zip(runs, shares, strict=True) if b <= t < e) for t, _ in runs]
        want = [max(a for (t, _), a in zip(runs, at, strict=True) if b <= t < e) for b, e in runs]
        assert hami._peaks(runs, shares).tolist() == pytest.approx(want)


@pytest.mark.parametrize(
    ("text", "want"),
    [
        (f"{UUID},NVIDIA,3000,25:;", [(0, UUID, 3000.0, 25.0)]),
        (
            f"{UUID},NVIDIA,3000,0:;{UUID},NVIDIA,5000,0:;",
            [(0, UUID, 3000.0, 0.0), (1, UUID, 5000.0, 0.0)],
        ),
        (f";{UUID},NVIDIA,100,150:;", [(1, UUID, 100.0, 100.0)]),  # cores above 100 are 100
        (f"{UUID}[1-0],NVIDIA,10240,45:;", []),  # a MIG instance of HAMi's MIG mode
        ("MLU-1,MLU,100,0:;", []),  # another vendor
    ],
)
def test_the_allocated_annotation_is_read_as_hami_writes_it(text: str, want: list[Any]) -> None:
    got = hami.parse_allocated(text)
    assert got is not None and got[0] == want


@pytest.mark.parametrize(
    "text",
    [
        "garbage",
        f"{UUID},NVIDIA,-1,0:;",
        f"{UUID},NVIDIA,1e9,0:;",
        f"{UUID},NVIDIA,3000:;",
        "x" * 70_000,
    ],
)
def test_a_malformed_allocated_annotation_is_refused(text: str) -> None:
    assert hami.parse_allocated(text) is None


def test_a_malformed_annotation_is_a_warning_not_a_share() -> None:
    pod = hami_pod("odd", 25, 20_390)
    pod["metadata"]["annotations"][hami.ALLOCATED] = "\x1b[31mred,NVIDIA,x,y:;"
    node = hami_node()
    node["metadata"]["annotations"][hami.REGISTER] = "[{]"
    inv = build(snapshot([device()], HOURS, pods=[pod], nodes=[node]))
    assert not inv.holdings[C.HELD].any()
    said = [w for w in inv.warnings if "not HAMi's format" in w]
    assert len(said) == 2 and any("ml/odd" in w for w in said)


def test_the_register_annotation_is_read_in_both_formats() -> None:
    for legacy in (False, True):
        text = hami_node(legacy=legacy)["metadata"]["annotations"][hami.REGISTER]
        got = hami.parse_register(text, "node-h")
        assert got == [hami.Device(UUID, "node-h", float(MIB), 100.0, 10)], legacy
    assert (
        hami.parse_register('[{"id": "GPU-1", "devmem": true, "devcore": 1, "count": 1}]', "n")
        is None
    )


def test_a_snapshot_keeps_the_annotations_hami_is_read_from() -> None:
    pods = [hami_pod("quarter", 25, 20_390), hami_pod("half", 50, 40_780)]
    for p in pods:
        p["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] = "{}"
    node = hami_node()
    node["metadata"]["annotations"]["hami.io/node-handshake"] = "Reported now"
    whole = build(snapshot([device()], HOURS, pods=pods, nodes=[node]))
    kept_pods = [keep_object("pods", p) for p in pods]
    assert set(kept_pods[0]["metadata"]["annotations"]) == {hami.ALLOCATED, "hami.io/vgpu-node"}
    kept = build(snapshot([device()], HOURS, pods=kept_pods, nodes=[keep_object("nodes", node)]))
    cols = [C.POD, C.FRACTION, C.GPU_HOURS, C.ACT_MEAN, C.ATTRIBUTION]
    assert kept.holdings[cols].equals(whole.holdings[cols])
    assert kept.hami.tenants is not None and whole.hami.tenants is not None
    assert kept.hami.tenants.equals(whole.hami.tenants)
