"""GPUs held through DRA ResourceClaims: joined to their pods through the claim's allocation and
the node's ResourceSlices, and audited like any other holding."""

from __future__ import annotations

from typing import Any

import pytest

from gpuaudit.checks import gpu001_idle_reservation as gpu001
from gpuaudit.checks import gpu080_unmonitored_gpus as gpu080
from gpuaudit.inventory import columns as C
from gpuaudit.inventory import dra
from gpuaudit.inventory.kube import MAX_ITEMS
from tests.support.factories import (
    START,
    Series,
    gpu_labels,
    inventory,
    make_node,
    make_pod,
    run_check,
)

H = 24
UUID = "GPU-aaaa"


def dra_pod(
    name: str = "trainer-0",
    template: bool = True,
    started: float = START - 600,
    ns: str = "ml",
) -> dict[str, Any]:
    """A pod holding its GPU through a claim: generated from a template (named in its status)
    or named in its spec; no `nvidia.com/gpu` request."""
    pod = make_pod(name, namespace=ns, gpus=0, started=started, created=started - 5)
    pod["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpu"}]}
    if template:
        pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
        pod["status"]["resourceClaimStatuses"] = [
            {"name": "gpu", "resourceClaimName": f"{name}-gpu-x7k2p"}
        ]
    else:
        pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": f"{name}-gpu-x7k2p"}]
    return pod


def claim(
    pods: list[str],
    devices: list[str],
    name: str = "trainer-0-gpu-x7k2p",
    ns: str = "ml",
    pool: str = "node-a",
    uids: list[str] | None = None,
) -> dict[str, Any]:
    """A ResourceClaim (v1 shape) allocated `devices` of NVIDIA's driver, reserved for `pods`."""
    return {
        "metadata": {"name": name, "namespace": ns, "uid": f"claim-{name}"},
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {"request": "gpu", "driver": "gpu.nvidia.com", "pool": pool, "device": d}
                        for d in devices
                    ]
                }
            },
            "reservedFor": [
                {"resource": "pods", "name": p, "uid": (uids or [f"uid-{q}" for q in pods])[i]}
                for i, p in enumerate(pods)
            ],
        },
    }


def gpu_device(name: str, uuid: str, beta1: bool = False) -> dict[str, Any]:
    attrs = {
        "type": {"string": "gpu"},
        "uuid": {"string": uuid},
        "productName": {"string": "NVIDIA H100 80GB HBM3"},
        "cudaComputeCapability": {"version": "9.0.0"},
    }
    return (
        {"name": name, "basic": {"attributes": attrs}}
        if beta1
        else {"name": name, "attributes": attrs}
    )


def mig_device(name: str, uuid: str, parent: str, profile: str) -> dict[str, Any]:
    return {
        "name": name,
        "attributes": {
            "type": {"string": "mig"},
            "uuid": {"string": uuid},
            "gpu.nvidia.com/parentUUID": {"string": parent},
            "profile": {"string": profile},
        },
    }


def resource_slice(devices: list[dict[str, Any]], node: str = "node-a") -> dict[str, Any]:
    return {
        "metadata": {"name": f"{node}-gpu.nvidia.com-abcde"},
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def idle(uuid: str = UUID, gpu: str = "0", **kw: Any) -> Series:
    return Series(gpu_labels(uuid=uuid, gpu=gpu, **kw), act=[0.01] * H, fb_used=500, fb_free=80000)


def dra_inventory(
    series: list[Series],
    pods: list[dict[str, Any]],
    claims: list[dict[str, Any]],
    slices: list[dict[str, Any]] | None,
) -> Any:
    lists: dict[str, list[dict[str, Any]]] = {"resourceclaims": claims}
    if slices is not None:
        lists["resourceslices"] = slices
    return inventory(series, H, pods=pods, nodes=[make_node("node-a")], lists=lists)


def holding(inv: Any, pod: str) -> Any:
    h = inv.holdings
    rows = h[h[C.POD] == pod]
    assert len(rows) == 1, rows
    return rows.iloc[0]


@pytest.mark.parametrize("template", [True, False])
@pytest.mark.parametrize("beta1", [False, True])
def test_a_claimed_gpu_is_its_pods_holding(template: bool, beta1: bool) -> None:
    inv = dra_inventory(
        [idle(), idle("GPU-bbbb", "1")],
        [dra_pod(template=template)],
        [claim(["trainer-0"], ["gpu-0"])],
        [
            resource_slice(
                [gpu_device("gpu-0", UUID, beta1), gpu_device("gpu-1", "GPU-bbbb", beta1)]
            )
        ],
    )
    row = holding(inv, "trainer-0")
    assert (row[C.UUID], row[C.NAMESPACE], row[C.NODE]) == (UUID, "ml", "node-a")
    assert row[C.HELD] and row[C.ATTRIBUTION] == "dra_claim"
    assert row[C.HOURS] == pytest.approx(H)
    assert row[C.ACT_MEAN] == pytest.approx(0.01)
    other = inv.holdings[inv.holdings[C.UUID] == "GPU-bbbb"].iloc[0]
    assert not other[C.HELD] and other[C.ATTRIBUTION] == ""
    # The Kubernetes side counts the claimed GPU among the pod's GPUs.
    pods = inv.pods.set_index(C.POD)
    assert pods.loc["trainer-0", C.GPU_REQUEST] == 1.0
    # Audited like any holder: idle, and not unmonitored.
    found = run_check(gpu001, inv)
    assert [f.resource.name for f in found] == ["trainer-0"]
    assert "held 1 GPU" in found[0].message
    assert run_check(gpu080, inv) == []


def test_pod_label_holdings_say_so() -> None:
    inv = inventory(
        [idle(pod="p", namespace="ml")], H, pods=[make_pod("p")], nodes=[make_node("node-a")]
    )
    assert holding(inv, "p")[C.ATTRIBUTION] == "dcgm_pod_label"


def test_a_pod_that_started_mid_window_holds_only_its_part() -> None:
    started = START + 10 * 3600 + 600  # 10 min into the 11th hour
    busy = Series(gpu_labels(uuid=UUID), act=[0.01] * 10 + [0.7] * (H - 10))
    inv = dra_inventory(
        [busy],
        [dra_pod(started=started)],
        [claim(["trainer-0"], ["gpu-0"])],
        [resource_slice([gpu_device("gpu-0", UUID)])],
    )
    h = inv.holdings.sort_values(C.FIRST_TS)
    assert h[C.POD].tolist() == ["", "trainer-0"]
    before, mine = h.iloc[0], h.iloc[1]
    # The hour it started in (held for 50 of its 60 minutes) is the pod's.
    assert before[C.HOURS] == pytest.approx(10)
    assert mine[C.HOURS] == pytest.approx(H - 10)
    assert mine[C.ACT_MEAN] == pytest.approx(0.7)
    assert before[C.ACT_MEAN] == pytest.approx(0.01)
    assert mine[C.ATTRIBUTION] == "dra_claim" and before[C.ATTRIBUTION] == ""
    # Whole-window figures cannot be divided in time: missing, not guessed.
    assert mine[C.ACT_P95] != mine[C.ACT_P95]
    hourly = inv.hourly
    assert len(hourly[hourly[C.HOLDING] == mine[C.HOLDING]]) == H - 10
    assert run_check(gpu001, inv) == []


def test_a_mig_device_is_found_by_its_parent_and_profile() -> None:
    mig = Series(gpu_labels(uuid=UUID, mig=("1g.10gb", "9")), act=[0.01] * H)
    other = Series(gpu_labels(uuid=UUID, mig=("3g.40gb", "2")), act=[0.01] * H)
    inv = dra_inventory(
        [mig, other],
        [dra_pod()],
        [claim(["trainer-0"], ["gpu-0-mig-19-0-1"])],
        [resource_slice([mig_device("gpu-0-mig-19-0-1", "MIG-1111", UUID, "1g.10gb")])],
    )
    row = holding(inv, "trainer-0")
    assert (row[C.MIG_ID], row[C.MIG_PROFILE], row[C.ATTRIBUTION]) == ("9", "1g.10gb", "dra_claim")
    assert inv.pods.set_index(C.POD).loc["trainer-0", C.MIG_REQUEST] == "1g.10gb=1"
    assert run_check(gpu080, inv) == []


def test_mig_instances_that_cannot_be_told_apart_are_not_joined() -> None:
    a = Series(gpu_labels(uuid=UUID, mig=("1g.10gb", "9")), act=[0.01] * H)
    b = Series(gpu_labels(uuid=UUID, mig=("1g.10gb", "10")), act=[0.01] * H)
    inv = dra_inventory(
        [a, b],
        [dra_pod("p1"), dra_pod("p2")],
        [
            claim(["p1"], ["gpu-0-mig-19-0-1"], name="p1-gpu-x7k2p"),
            claim(["p2"], ["gpu-0-mig-19-1-1"], name="p2-gpu-x7k2p"),
        ],
        [
            resource_slice(
                [
                    mig_device("gpu-0-mig-19-0-1", "MIG-1", UUID, "1g.10gb"),
                    mig_device("gpu-0-mig-19-1-1", "MIG-2", UUID, "1g.10gb"),
                ]
            )
        ],
    )
    assert not inv.holdings[C.HELD].any()
    assert any("which pod holds which cannot be told" in w for w in inv.warnings)


def test_dcgm_exporter_claim_labels() -> None:
    """With the exporter's DRA mapping on, a series names its claim: with a pod label it is
    attributed to the claim; without one the claim names the pod."""
    labelled = idle(pod="trainer-0", namespace="ml")
    labelled.labels.update(dra_claim_name="trainer-0-gpu-x7k2p", dra_claim_namespace="ml")
    inv = dra_inventory([labelled], [dra_pod()], [], None)
    assert holding(inv, "trainer-0")[C.ATTRIBUTION] == "dra_claim"
    bare = idle()
    bare.labels.update(dra_claim_name="trainer-0-gpu-x7k2p", dra_claim_namespace="ml")
    inv = dra_inventory([bare], [dra_pod()], [claim(["trainer-0"], ["gpu-0"])], None)
    assert holding(inv, "trainer-0")[C.ATTRIBUTION] == "dra_claim"


def test_shared_claims_and_missing_slices_are_not_joined_and_say_why() -> None:
    shared = dra_inventory(
        [idle()],
        [dra_pod("p1"), dra_pod("p2")],
        [claim(["p1", "p2"], ["gpu-0"], name="shared")],
        [resource_slice([gpu_device("gpu-0", UUID)])],
    )
    assert not shared.holdings[C.HELD].any()
    assert any("reserved for several pods" in w and "ml/shared" in w for w in shared.warnings)
    # Each pod counts its share of the device.
    assert shared.pods.set_index(C.POD).loc["p1", C.GPU_REQUEST] == 0.5
    no_slices = dra_inventory([idle()], [dra_pod()], [claim(["trainer-0"], ["gpu-0"])], None)
    # Not through the claim; the Kubernetes-side join may still find the node's only holder.
    assert (no_slices.holdings[C.ATTRIBUTION] != "dra_claim").all()
    assert set(no_slices.holdings.loc[no_slices.holdings[C.HELD], C.ATTRIBUTION]) <= {
        "kubernetes_join"
    }
    assert any("no ResourceSlice describes" in w for w in no_slices.warnings)


def test_a_reservation_for_another_pod_of_that_name_is_not_this_pods() -> None:
    inv = dra_inventory(
        [idle()],
        [dra_pod()],
        [claim(["trainer-0"], ["gpu-0"], uids=["uid-of-an-earlier-trainer-0"])],
        [resource_slice([gpu_device("gpu-0", UUID)])],
    )
    assert not inv.holdings[C.HELD].any()
    assert inv.pods.set_index(C.POD).loc["trainer-0", C.GPU_REQUEST] == 0.0


def test_other_drivers_are_not_gpus() -> None:
    c = claim(["trainer-0"], ["gpu-0"])
    c["status"]["allocation"]["devices"]["results"][0]["driver"] = "compute-domain.nvidia.com"
    objects = {"pods": [dra_pod()], "resourceclaims": [c], "resourceslices": []}
    assert dra.read(objects).claims == ()


def test_sizes_from_outside_are_bounded() -> None:
    names = [f"gpu-{i}" for i in range(50_000)]
    many = claim(["trainer-0"], names)
    slices = [resource_slice([gpu_device(n, f"GPU-{n}") for n in names[:MAX_ITEMS]])]
    objects = {"pods": [dra_pod()], "resourceclaims": [many], "resourceslices": slices}
    got = dra.read(objects)
    assert len(got.claims[0].devices) == MAX_ITEMS
    held = dra.per_pod(got, 64)
    assert held[("ml", "trainer-0")].gpus == 64
    long_name = claim(["trainer-0"], ["x" * 100_000])
    (one,) = dra.read({"pods": [dra_pod()], "resourceclaims": [long_name]}).claims
    assert len(one.devices[0][1]) <= 512


def _shared_claims(n: int, pods: int, devices: int) -> tuple[list[Any], list[Any]]:
    """`n` claims, each reserved for `pods` pods of its own and allocated `devices` devices of
    its own."""
    all_pods, claims = [], []
    for c in range(n):
        names = [f"c{c}-p{i}" for i in range(pods)]
        all_pods += [dra_pod(p, template=False) for p in names]
        devs = [f"gpu-{c}-{d}" for d in range(devices)]
        claims.append(claim(names, devs, name=f"shared-{c}"))
    return all_pods, claims


def test_devices_no_resource_slice_describes_are_not_gpus_held() -> None:
    """Shared claims of devices that no slice describes once counted as whole GPUs (an
    allocation rate past 500 %, the audit complete): now they count for nothing, a warning
    names the claims and the audit is incomplete."""
    pods, claims = _shared_claims(3, 2, 4)
    inv = dra_inventory([idle()], pods, claims, [resource_slice([gpu_device("gpu-x", UUID)])])
    assert inv.pods[C.GPU_REQUEST].sum() == 0.0
    (said,) = [w for w in inv.warnings if "no ResourceSlice describes" in w]
    assert said.startswith(
        "3 DRA ResourceClaims hold gpu.nvidia.com devices that no ResourceSlice describes "
        "(ml/shared-0, ml/shared-1, ml/shared-2): those devices are not counted as GPUs held"
    )
    assert not inv.complete and inv.incomplete_reasons
    # Described, the same devices count: each pod holds its share of its claim's devices.
    described = [
        resource_slice(
            [gpu_device(f"gpu-{c}-{d}", f"GPU-{c}{d}") for c in range(3) for d in range(4)]
        )
    ]
    inv = dra_inventory([idle()], pods, claims, described)
    assert inv.pods.set_index(C.POD).loc["c0-p0", C.GPU_REQUEST] == 2.0
    assert inv.pods[C.GPU_REQUEST].sum() == 12.0
    assert inv.complete


def test_claims_are_held_once_not_every_pod_with_every_device() -> None:
    """A claim reserved for its pods and allocated its devices is one record: 100 claims of
    256 pods and 256 devices each hold 100 records, not 6.5 million (1 GB)."""
    pods, claims = _shared_claims(100, MAX_ITEMS, MAX_ITEMS)
    got = dra.read({"pods": pods, "resourceclaims": claims})
    assert len(got.claims) == 100
    assert {(len(c.pods), len(c.devices)) for c in got.claims} == {(MAX_ITEMS, MAX_ITEMS)}
    assert got.joinable() == []  # shared: none is joined to one pod
    assert dra.per_pod(got, 64) == {}  # and none is described
    described = dra.read(
        {
            "pods": pods[:MAX_ITEMS],
            "resourceclaims": claims[:1],
            "resourceslices": [
                resource_slice([gpu_device(f"gpu-0-{d}", f"GPU-{d}") for d in range(MAX_ITEMS)])
            ],
        }
    )
    held = dra.per_pod(described, 1024)
    assert len(held) == MAX_ITEMS
    assert {round(h.gpus, 9) for h in held.values()} == {1.0}


def test_one_device_in_two_claims_is_said_counted_once_and_joined_to_neither() -> None:
    inv = dra_inventory(
        [idle()],
        [dra_pod("p1"), dra_pod("p2")],
        [
            claim(["p1"], ["gpu-0"], name="p1-gpu-x7k2p"),
            claim(["p2"], ["gpu-0"], name="p2-gpu-x7k2p"),
        ],
        [resource_slice([gpu_device("gpu-0", UUID)])],
    )
    assert (inv.holdings[C.ATTRIBUTION] != "dra_claim").all()
    pods = inv.pods.set_index(C.POD)
    assert pods.loc["p1", C.GPU_REQUEST] == 0.5 and pods.loc["p2", C.GPU_REQUEST] == 0.5
    assert (
        "DRA device gpu-0 of pool node-a is allocated to 2 ResourceClaims at once "
        "(ml/p1-gpu-x7k2p, ml/p2-gpu-x7k2p): it is counted once, shared by their pods, and "
        "joined to none of them"
    ) in inv.warnings
    assert not inv.complete
