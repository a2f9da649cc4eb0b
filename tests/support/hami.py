"""HAMi objects and series for tests: a node whose GPUs HAMi registered, pods HAMi's scheduler
placed, the GPU's DCGM series without pod labels, and HAMi's vGPU monitor series, each in the
shape HAMi writes it (`docs/domain.md`, HAMi)."""

from __future__ import annotations

import json
from typing import Any

from gpuaudit.inventory import hami
from gpuaudit.snapshot import Snapshot
from tests.support.factories import START, STEP, Series, gpu_labels, iso, make_node, make_pod

UUID = "GPU-4f1a2b3c-0000-1111-2222-333344445555"
HOURS = 8
MIB = 81_560


def hami_node(name: str = "node-h", uuids: tuple[str, ...] = (UUID,), legacy: bool = False) -> Any:
    """A node whose GPUs HAMi's device plugin registered (split count 10)."""
    node = make_node(name, "NVIDIA-H100-80GB-HBM3", len(uuids))
    devs = [
        {
            "id": u,
            "index": i,
            "count": 10,
            "devmem": MIB,
            "devcore": 100,
            "type": "NVIDIA-NVIDIA H100 80GB HBM3",
            "numa": 0,
            "mode": "hami-core",
            "health": True,
        }
        for i, u in enumerate(uuids)
    ]
    text = (
        "".join(f"{u},10,{MIB},100,NVIDIA-NVIDIA H100 80GB HBM3,0,true:" for u in uuids)
        if legacy
        else json.dumps(devs)
    )
    node["metadata"]["annotations"] = {hami.REGISTER: text}
    for key in ("capacity", "allocatable"):
        node["status"][key] = {"nvidia.com/gpu": str(10 * len(uuids))}
    return node


def hami_pod(name: str, cores: int, mem: int, uuid: str = UUID, **kw: Any) -> dict[str, Any]:
    """A pod HAMi's scheduler placed on `uuid` with `cores` per cent and `mem` MiB; Succeeded
    at `finished` (its container's `finishedAt`) when given."""
    finished = kw.pop("finished", None)
    if finished is not None:
        kw["phase"] = "Succeeded"
    pod = make_pod(name, node="node-h", started=kw.pop("started", START - 60), **kw)
    if finished is not None:
        done = {"reason": "Completed", "exitCode": 0, "finishedAt": iso(finished)}
        pod["status"]["containerStatuses"] = [{"name": "c", "state": {"terminated": done}}]
    limits = pod["spec"]["containers"][0]["resources"]["limits"]
    limits.update({"nvidia.com/gpucores": str(cores), "nvidia.com/gpumem": str(mem)})
    pod["metadata"]["annotations"] = {
        hami.ALLOCATED: f"{uuid},NVIDIA,{mem},{cores}:;",
        "hami.io/vgpu-node": "node-h",
    }
    return pod


def with_hami(
    snap: Snapshot,
    util: dict[str, list[float | None]],
    mem_mib: dict[str, float] | None = None,
    legacy: bool = False,
    exported: bool = True,
) -> Snapshot:
    """`snap` with HAMi's vGPU monitor series: each pod's container `c` utilization per hour
    (per cent), and the most memory it used."""

    def labels(pod: str) -> dict[str, str]:
        if legacy:
            return {"podnamespace": "ml", "podname": pod, "ctrname": "c", "deviceuuid": UUID}
        who = {"namespace": "ml", "pod": pod, "container": "c"}
        if exported:
            who = {f"exported_{k}": v for k, v in who.items()}
            who.update(namespace="kube-system", pod="hami-device-plugin-x")
        return {**who, "device_uuid": UUID, "vdevice_index": "0"}

    rows = [
        {
            "metric": labels(pod),
            "values": [
                [START + (i + 1) * STEP, repr(float(v))]
                for i, v in enumerate(vals)
                if v is not None
            ],
        }
        for pod, vals in util.items()
    ]
    mem_rows = [
        {"metric": labels(pod), "value": [START + HOURS * STEP, repr(v * 2**20)]}
        for pod, v in (mem_mib or {}).items()
    ]
    ids = (
        ("hami_util_legacy_hourly", "hami_mem_legacy_max")
        if legacy
        else ("hami_util_hourly", "hami_mem_max")
    )
    for qid, rtype, result in ((ids[0], "matrix", rows), (ids[1], "vector", mem_rows)):
        snap.prometheus[qid] = [
            {
                "query": qid,
                "params": {},
                "body": {"status": "success", "data": {"resultType": rtype, "result": result}},
            }
        ]
    return snap


def device(act: float = 0.3) -> Series:
    """The GPU's DCGM series: no pod labels (dcgm-exporter cannot map HAMi's device IDs)."""
    return Series(
        gpu_labels(UUID, host="node-h"), act=[act] * HOURS, fb_used=30_000, fb_free=51_560
    )
