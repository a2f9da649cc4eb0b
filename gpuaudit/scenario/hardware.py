"""Cases about the hardware: placement on the interconnect (GPU030, GPU031), nodes left idle
(GPU060) and sick GPUs (GPU070), on three GB200 trays in two NVLink domains, two more L40S
nodes, a tainted H100 node, and the room the base scenario left.

They are placed after the base scenario and its background, in GPUs those left free and on
nodes added here, so that the base scenario (and every case of the checks before them) stays
exactly as it was.
"""

from __future__ import annotations

from gpuaudit.scenario.builder import Builder
from gpuaudit.scenario.cluster import NodeSpec
from gpuaudit.scenario.workloads import place
from gpuaudit.sources.prometheus import catalogue as queries


def plant_health(b: Builder) -> None:
    """GPU070 (the failed row remap is on the GB200 MoE job, see `plant_placement`):

    - job ft-ecc-0 on the roomiest H100 node: one GPU records a row remap (XID 63, one row
      remapped, the pending flag up: reset when idle, no drain), the other reports a GSP
      timeout (XID 119, NVIDIA's bucket: reset the GPU) late in the window;
    - an XID 79 on a GPU nobody holds (near miss);
    - one more L40S node, every GPU held all window by a busy single-GPU job, so no case sees
      room there: a lone XID 63 (no remap counter moved), application XIDs 13 then 31, a gauge
      that showed XID 79 from before the window with no event in it (near miss), and rows
      remapped long ago with the pending flag down (near miss).
    """
    H = b.H
    h100 = b.of_kind("h100")
    roomy = sorted(
        (n for n in h100 if n.exporter and 2 <= len(b.free_slots(n)) <= 6),
        key=lambda n: (-len(b.free_slots(n)), n.name),
    )
    if roomy:
        node = roomy[0]
        p = b.pod(
            "ml-train",
            "ft-ecc-0",
            node,
            "main",
            ("Job", "ft-ecc"),
            0,
            gpus=2,
            labels={"batch.kubernetes.io/job-name": "ft-ecc"},
        )
        slots = b.free_slots(node)[:2]
        place(b, p, slots, 0, b.pattern("busy", H, 0), 0.6)
        when = H - min(40, H // 2)
        slots[0].health[queries.XID] = [(when, 63)]
        slots[0].health[queries.REMAP_UNCORR] = [(when, 1)]
        slots[0].health[queries.REMAP_PENDING] = [(when, 1)]
        b.plant_name("GPU070", "GPU", "", slots[0].uuid)
        slots[1].health[queries.XID] = [(H - min(12, H // 4), 119)]
        b.plant_name("GPU070", "GPU", "", slots[1].uuid)
    spare = next(
        (s for n in h100 if n.exporter for s in b.free_slots(n)),
        None,
    )
    if spare is not None:
        spare.health[queries.XID] = [(H - min(10, H // 3), 79)]
        b.plant_name("GPU070", "GPU", "", spare.uuid, "XID 79 on a GPU no pod held")
    _xid_node(b)


def _xid_node(b: Builder) -> None:
    """The L40S node of `plant_health`, one busy single-GPU job per GPU."""
    H = b.H
    node = b.add_node("l40s", len(b.of_kind("l40s")))
    slots = b.free_slots(node)
    jobs = ("xid63-solo", "xid-app", "xid-stale", "remap-done")
    for job, slot in zip(jobs, slots, strict=False):
        p = b.pod(
            "ml-train",
            f"{job}-0",
            node,
            "main",
            ("Job", job),
            0,
            gpus=1,
            labels={"batch.kubernetes.io/job-name": job},
            priority_class="training",
            priority=1000,
        )
        place(b, p, [slot], 0, b.pattern("busy", H, 0), 0.5)
        if job == "xid63-solo":
            slot.health[queries.XID] = [(H - min(30, H // 2), 63)]
            b.plant_name("GPU070", "GPU", "", slot.uuid)
        elif job == "xid-app":
            slot.health[queries.XID] = [(H // 3, 13), (H - min(20, H // 3), 31)]
            b.plant_name("GPU070", "GPU", "", slot.uuid)
        elif job == "xid-stale":
            slot.health[queries.XID] = [(0, 79)]
            b.plant_name(
                "GPU070", "GPU", "", slot.uuid, "XID gauge still showing 79 from before the window"
            )
        else:
            slot.health[queries.REMAP_UNCORR] = [(0, 2)]
            b.plant_name("GPU070", "GPU", "", slot.uuid, "rows remapped long ago, none pending")


TP_PCIE = 2.0e9
"""Bytes per second each way per GPU over PCIe of a tensor-parallel pair on a PCIe board."""
DDP_PCIE = 3.0e9
"""... of a data-parallel fine-tune on a PCIe board."""
MOE_NVLINK = 40.0e9
"""... over NVLink of a mixture-of-experts job on GB200."""


def plant_placement(b: Builder) -> None:
    """GPU030, GPU031, GPU060 and GPU070 on three GB200 trays in two NVLink domains, two
    more L40S nodes and an L40S node with room, and a tainted H100 node (GPU051)."""
    l40s = b.of_kind("l40s")
    _gb200_trays(b)
    _pcie_pairs(b, b.add_node("l40s", len(l40s)))
    _pcie_job(b, l40s)
    _no_exchange(b, b.add_node("l40s", len(l40s) + 1))
    _reserved_node(b)


def _gb200_trays(b: Builder) -> None:
    """Three trays, two in one NVLink domain: tray 0 stays empty (GPU060) while a MoE job
    spans trays 1 and 2, across both domains (GPU031); one of its GPUs fails a row remap
    (GPU070)."""
    H = b.H
    cluster = b.ids.uuid()
    trays = [b.add_node("gb200", i) for i in range(3)]
    for tray, clique in zip(trays, (1, 1, 2), strict=True):
        tray.clique = f"{cluster}.{clique}"
        tray.labels["nvidia.com/gpu.clique"] = tray.clique
    # GPU060: tray 0 stays empty; trays 1 and 2 wait a while for the MoE job.
    b.plant_name("GPU060", "Node", "", trays[0].name)
    h0 = min(20, H // 2)
    job, ns = "moe-train", "ml-train"
    uid = b.ids.uuid()
    b.pytorchjobs.append({"namespace": ns, "name": job, "uid": uid, "workers": 1})
    for j, tray in enumerate(trays[1:]):
        role = "master" if j == 0 else "worker"
        p = b.pod(
            ns,
            f"{job}-{role}-0",
            tray,
            "pytorch",
            ("PyTorchJob", job),
            h0,
            gpus=4,
            labels={
                "training.kubeflow.org/job-name": job,
                "training.kubeflow.org/replica-type": role,
                "training.kubeflow.org/replica-index": "0",
            },
            priority_class="training",
            priority=1000,
            owner_uid=uid,
            link_bps={"nvlink": MOE_NVLINK, "pcie": 0.2e9},
        )
        place(b, p, b.free_slots(tray), h0, b.pattern("busy", H - h0, h0), 0.8)
    # GPU031: the job spans both NVLink domains while domain 1 (trays 0 and 1) had room.
    b.plant_name("GPU031", "PyTorchJob", ns, job)
    b.plant_name("GPU010", "PyTorchJob", ns, job, "complete, members started together")
    if h0 < 24:
        b.plant_name("GPU060", "Node", "", trays[1].name, f"idle for {h0} h only")
    # GPU070: a failed row remap on one of the worker's GPUs.
    sick = b.slots_by_node[trays[2].name][2]
    when = H - min(48, (H - h0) // 2)
    sick.health[queries.REMAP_UNCORR] = [(when, 8)]
    sick.health[queries.REMAP_FAILURE] = [(when, 1)]
    b.plant_name("GPU070", "GPU", "", sick.uuid)


def _pcie_pairs(b: Builder, extra: NodeSpec) -> None:
    """GPU030 on a PCIe-only L40S board whose pairs (0, 1) and (2, 3) share a switch: a
    tensor-parallel pair split across switches, and a later one that had no better choice."""
    H = b.H
    slots = b.slots_by_node[extra.name]
    pinned = {"nvidia.com/gpu.product": extra.product}
    tp2 = b.deployment_pod(
        "serving",
        "vllm-tp2",
        extra,
        0,
        gpus=2,
        priority_class="serving",
        priority=10000,
        node_selector=pinned,
        link_bps={"pcie": TP_PCIE},
    )
    place(b, tp2, [slots[0], slots[2]], 0, b.pattern("diurnal", H, 0, base=0.3), 0.5)
    b.plant("GPU030", tp2)
    late_h = min(6, H // 4)
    late = b.deployment_pod(
        "serving",
        "vllm-tp2-late",
        extra,
        late_h,
        gpus=2,
        priority_class="serving",
        priority=10000,
        node_selector=pinned,
        link_bps={"pcie": TP_PCIE},
    )
    act = b.pattern("diurnal", H - late_h, late_h, base=0.3)
    place(b, late, [slots[1], slots[3]], late_h, act, 0.5)
    b.plant("GPU030", late, "no better-connected pair was free when it started")
    b.plant("GPU031", late, "pinned to L40S by its nodeSelector")


def _pcie_job(b: Builder, l40s: list[NodeSpec]) -> None:
    """GPU031: a 2-GPU fine-tune on PCIe-only L40S GPUs whose GPUs exchange data (measured
    PCIe traffic) while NVLink nodes had room, on the base L40S node with the most room. An
    H100 or GB200 GPU-hour lists at more than the slower links lose, but two GPUs of the
    research pool's first GB200 node (`quota_cases`) sat unheld all window, and no move
    advised before it takes them (the MoE job's takes tray 0's from its start; the moves of
    `move_cases` may run on their own nodes only; `ddp-wide` needs more GPUs than a GB200 node
    has), so the move costs nothing extra and is advised (issue 32)."""
    roomy = sorted(l40s, key=lambda n: (-len(b.free_slots(n)), n.name))
    if not roomy or len(b.free_slots(roomy[0])) < 2:
        return
    node = roomy[0]
    free = {s.index: s for s in b.free_slots(node)}
    pair = next(
        ([free[a], free[a + 1]] for a in (0, 2) if a in free and a + 1 in free),
        list(free.values())[:2],
    )
    p = b.pod(
        "ml-train",
        "sdxl-finetune-0",
        node,
        "main",
        ("Job", "sdxl-finetune"),
        0,
        gpus=2,
        labels={"batch.kubernetes.io/job-name": "sdxl-finetune"},
        link_bps={"pcie": DDP_PCIE},
    )
    place(b, p, pair, 0, b.pattern("busy", b.H, 0, lo=0.5, hi=0.8), 0.7)
    b.plant("GPU031", p)


def _no_exchange(b: Builder, node: NodeSpec) -> None:
    """Near-misses of GPU030 and GPU031 on one more L40S node: a 2-GPU render StatefulSet on
    GPUs split across NUMA nodes while a switch pair was free, and an embedding batch on the
    other two; their GPUs exchange little (measured PCIe traffic well below 1 GB/s), so
    neither their pairs nor a move to NVLink H100s matter."""
    H = b.H
    slots = b.slots_by_node[node.name]
    render = b.pod(
        "media",
        "render-0",
        node,
        "render",
        ("StatefulSet", "render"),
        0,
        gpus=2,
        labels={"app": "render", "statefulset.kubernetes.io/pod-name": "render-0"},
        link_bps={"pcie": 0.15e9},
    )
    place(b, render, [slots[0], slots[2]], 0, b.pattern("busy", H, 0, lo=0.5, hi=0.8), 0.6)
    why = "its GPUs exchange little data (measured PCIe traffic below 1 GB/s)"
    b.plant("GPU030", render, why)
    b.plant("GPU031", render, why)
    h0 = min(6, H // 4)
    embed = b.pod(
        "search",
        "embed-batch-0",
        node,
        "main",
        ("Job", "embed-batch"),
        h0,
        gpus=2,
        labels={"batch.kubernetes.io/job-name": "embed-batch"},
        link_bps={"pcie": 0.05e9},
    )
    place(b, embed, [slots[1], slots[3]], h0, b.pattern("busy", H - h0, h0, lo=0.5, hi=0.8), 0.6)
    b.plant("GPU031", embed, why)


RESERVED_TAINT = {"key": "dedicated", "value": "inference", "effect": "NoSchedule"}
"""The taint of the H100 node kept for inference."""


def _reserved_node(b: Builder) -> None:
    """One more H100 node kept for inference by a `NoSchedule` taint: two servers that
    tolerate it hold 4 of its GPUs, 4 stay free. A 4-GPU pod that does not tolerate it waits
    (GPU051: its scheduler message names the taint, and so does the finding)."""
    node = b.add_node("h100", len(b.of_kind("h100")))
    node.taints.append(dict(RESERVED_TAINT))
    tolerate = [{"key": "dedicated", "operator": "Equal", "value": "inference"}]
    for i in range(2):
        p = b.deployment_pod(
            "serving",
            f"reserved-chat-{i}",
            node,
            0,
            gpus=2,
            priority_class="serving",
            priority=10000,
            tolerations=[dict(t, effect="NoSchedule") for t in tolerate],
        )
        act = b.pattern("diurnal", b.H, 0, base=0.3, peak=0.7)
        place(b, p, b.free_slots(node)[:2], 0, act, 0.5)


def plant_spread(b: Builder) -> None:
    """GPU031's rule on nodes, on the H100 nodes (with a dcgm-exporter, untainted) with the
    most free GPUs left: a PyTorchJob of two 1-GPU pods on two nodes while the first had a
    free GPU for the other all window; and the rule's near-miss, `ddp-wide`, on the two L40S
    nodes with the most free GPUs, taking them all, more than one node has (whether GPU031's
    PCIe rule moves it to NVLink GPUs, `move_cases` works out and records). Both run for a
    while and finish
    (Succeeded) well before the window's end, so that the window's end, which the pending
    cases read, is as it was."""
    H = b.H
    h100 = [n for n in b.of_kind("h100") if n.exporter and not n.taints]
    roomy = sorted(
        (n for n in h100 if b.free_slots(n)), key=lambda n: (-len(b.free_slots(n)), n.name)
    )
    span = max(2, H // 8)
    if len(roomy) < 2 or len(b.free_slots(roomy[0])) < 2:
        return
    pods = [(roomy[0], 1), (roomy[1], 1)]
    _short_pytorchjob(b, "ddp-spread", pods, H // 4, span)
    b.plant_name("GPU031", "PyTorchJob", "ml-train", "ddp-spread")
    # The near-miss on the two L40S nodes with the most free GPUs, when its pods, taking
    # them all, need more GPUs than one node has.
    l40s = sorted(
        (n for n in b.of_kind("l40s") if n.exporter and not n.taints and b.free_slots(n)),
        key=lambda n: (-len(b.free_slots(n)), n.name),
    )[:2]
    sizes = [len(b.free_slots(n)) for n in l40s]
    if len(l40s) < 2 or min(sizes) < 2 or sum(sizes) <= max(n.gpu_count for n in l40s):
        return
    pods = list(zip(l40s, sizes, strict=True))
    _short_pytorchjob(b, "ddp-wide", pods, H // 2, span, {"pcie": DDP_PCIE})
    # Its GPU031 truth is recorded by `move_cases`, which prices its move to NVLink GPUs.


def _short_pytorchjob(
    b: Builder,
    job: str,
    pods: list[tuple[NodeSpec, int]],
    h0: int,
    span: int,
    link_bps: dict[str, float] | None = None,
) -> None:
    """A PyTorchJob whose master and workers hold `gpus` free GPUs each of their node from
    hour `h0` until it succeeds `span` hours later."""
    h1 = h0 + span
    ns, uid = "ml-train", b.ids.uuid()
    b.pytorchjobs.append({"namespace": ns, "name": job, "uid": uid, "workers": len(pods) - 1})
    act = b.pattern("busy", h1 - h0, h0)
    for i, (node, gpus) in enumerate(pods):
        role, idx = ("master", 0) if i == 0 else ("worker", i - 1)
        p = b.pod(
            ns,
            f"{job}-{role}-{idx}",
            node,
            "pytorch",
            ("PyTorchJob", job),
            h0,
            gpus=gpus,
            labels={
                "training.kubeflow.org/job-name": job,
                "training.kubeflow.org/replica-type": role,
                "training.kubeflow.org/replica-index": str(idx),
            },
            priority_class="training",
            priority=1000,
            owner_uid=uid,
            link_bps=dict(link_bps or {}),
            phase="Succeeded",
            finished_h=h1,
        )
        for slot in b.free_slots(node)[:gpus]:
            b.hold(slot, p, h0, h1, act + 0, 0.7)
