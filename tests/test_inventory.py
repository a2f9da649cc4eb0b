from __future__ import annotations

import pytest

from gpuaudit.audit.summary import summarise
from gpuaudit.domain.pricing import DEFAULT_PRICES
from gpuaudit.inventory import Views
from gpuaudit.inventory import columns as C
from tests.support.factories import Series, gpu_labels, inventory, make_pod


def _holding(inv, pod):  # type: ignore[no-untyped-def]
    h = inv.holdings
    rows = h[h[C.POD] == pod]
    assert len(rows) == 1, rows
    return rows.iloc[0]


@pytest.mark.parametrize("spelling", ["exported", "pod"])
def test_both_pod_label_spellings_name_the_workload(spelling: str) -> None:
    s = Series(gpu_labels(pod="trainer-0", namespace="ml", spelling=spelling), act=[0.5] * 6)
    free = Series(gpu_labels(uuid="GPU-1", gpu="1", spelling=spelling), act=[0.0] * 6)
    inv = inventory([s, free], hours=6)
    row = _holding(inv, "trainer-0")
    assert row[C.NAMESPACE] == "ml"
    assert row[C.HELD]
    assert row[C.HOURS] == 6
    assert row[C.ACT_MEAN] == pytest.approx(0.5)
    # The exporter pod (`pod` under the Helm default) is never read as a holder.
    held = inv.holdings[inv.holdings[C.HELD]]
    assert list(held[C.POD]) == ["trainer-0"]
    assert "nvidia-dcgm-exporter-abcde" not in set(inv.holdings[C.POD])


def test_exporter_pod_label_on_unallocated_gpu_is_not_a_holder() -> None:
    # honorLabels: true, unallocated GPU: `pod` names the exporter itself.
    lab = gpu_labels(spelling="pod")
    lab.update(
        pod="nvidia-dcgm-exporter-x1", namespace="gpu-operator", container="nvidia-dcgm-exporter"
    )
    inv = inventory([Series(lab, act=[0.0] * 5)], hours=5)
    assert not inv.holdings[C.HELD].any()


def test_old_namespace_and_lowercase_uuid_and_hostname() -> None:
    lab = {
        "gpu": "0",
        "uuid": "GPU-9",
        "modelName": "NVIDIA L40S",
        "hostname": "n1",
        "pod_name": "srv",
        "pod_namespace": "web",
        "container_name": "c",
    }
    inv = inventory([Series(lab, act=[0.2] * 4)], hours=4)
    row = _holding(inv, "srv")
    assert row[C.UUID] == "GPU-9"
    assert row[C.NODE] == "n1"
    assert row[C.NAMESPACE] == "web"


def test_empty_pod_label_means_not_held() -> None:
    lab = gpu_labels(spelling="pod")
    lab.update(pod="", namespace="")
    inv = inventory([Series(lab, act=[0.3] * 3)], hours=3)
    assert not inv.holdings[C.HELD].any()


def test_mig_instances_are_separate_slots_with_slice_fractions() -> None:
    a100 = "NVIDIA A100-SXM4-80GB"
    big = Series(
        gpu_labels(model=a100, pod="ft", namespace="ml", mig=("3g.40gb", "2")), act=[0.6] * 8
    )
    small = Series(
        gpu_labels(model=a100, pod="srv", namespace="web", mig=("1g.10gb", "9")), act=[0.01] * 8
    )
    inv = inventory([big, small], hours=8)
    assert len(inv.gpus) == 2
    ft, srv = _holding(inv, "ft"), _holding(inv, "srv")
    assert ft[C.MIG_PROFILE] == "3g.40gb"
    assert ft[C.FRACTION] == pytest.approx(3 / 7)
    assert srv[C.FRACTION] == pytest.approx(1 / 7)
    assert srv[C.GPU_HOURS] == pytest.approx(8 / 7)
    assert ft[C.SLOT] != srv[C.SLOT]
    assert ft[C.UUID] == srv[C.UUID]


def test_gpu_that_changed_holders_inside_the_window() -> None:
    first = Series(gpu_labels(pod="a", namespace="ml"), act=[0.8] * 4 + [None] * 6)
    gap = Series(gpu_labels(), act=[None] * 4 + [0.0] * 2 + [None] * 4)
    second = Series(gpu_labels(pod="b", namespace="ml"), act=[None] * 6 + [0.1] * 4)
    inv = inventory([first, gap, second], hours=10)
    a, b = _holding(inv, "a"), _holding(inv, "b")
    assert a[C.SLOT] == b[C.SLOT]
    assert a[C.HOURS] == 4 and b[C.HOURS] == 4
    assert a[C.LAST_TS] <= b[C.FIRST_TS]
    assert a[C.ACT_MEAN] == pytest.approx(0.8)
    assert b[C.ACT_MEAN] == pytest.approx(0.1)
    assert len(inv.gpus) == 1


def test_gpu_util_fallback_when_profiling_is_absent() -> None:
    s = Series(gpu_labels(pod="p", namespace="ml"), act=[], util=[40.0] * 5)
    inv = inventory([s], hours=5)
    row = _holding(inv, "p")
    assert row[C.ACT_SOURCE] == "DCGM_FI_DEV_GPU_UTIL"
    assert row[C.ACT_MEAN] == pytest.approx(0.40)
    assert "profiling" not in inv.capabilities
    assert "activity" in inv.capabilities


def test_pods_join_owner_and_node_from_the_api() -> None:
    s = Series(
        gpu_labels(pod="web-7d9f-abcde", namespace="web", host="exporter-pod-name"), act=[0.1] * 3
    )
    pod = make_pod(
        "web-7d9f-abcde",
        "web",
        node="node-real",
        owner=("ReplicaSet", "web-7d9f"),
        labels={"pod-template-hash": "7d9f"},
    )
    inv = inventory([s], hours=3, pods=[pod], nodes=[])
    row = _holding(inv, "web-7d9f-abcde")
    assert row[C.NODE] == "node-real"
    pods = inv.pods.set_index(C.POD)
    assert pods.loc["web-7d9f-abcde", C.OWNER_KIND] == "Deployment"
    assert pods.loc["web-7d9f-abcde", C.OWNER_NAME] == "web"
    assert "kubernetes.pods" in inv.capabilities


def test_node_found_through_the_exporter_when_hostname_names_the_exporter_pod() -> None:
    # Without NODE_NAME, dcgm-exporter's Hostname is its own pod name: the scrape address
    # (instance) leads to the exporter pod, and its nodeName is the GPU's node.
    lab = gpu_labels(host="nvidia-dcgm-exporter-x7k2p", pod="train-0", namespace="ml")
    lab["instance"] = "10.1.2.3:9400"
    free = gpu_labels(uuid="GPU-1", gpu="1", host="nvidia-dcgm-exporter-x7k2p")
    free["instance"] = "10.1.2.3:9400"
    exporter = {
        "metadata": {"name": "nvidia-dcgm-exporter-x7k2p", "namespace": "gpu-operator"},
        "spec": {"nodeName": "gpu-node-a", "containers": [{"name": "exporter"}]},
        "status": {"phase": "Running", "podIP": "10.1.2.3"},
    }
    node = {
        "metadata": {"name": "gpu-node-a", "labels": {"nvidia.com/gpu.count": "2"}},
        "status": {"capacity": {"nvidia.com/gpu": "2"}},
    }
    inv = inventory(
        [Series(lab, act=[0.5] * 3), Series(free, act=[0.0] * 3)],
        hours=3,
        pods=[exporter],
        nodes=[node],
    )
    assert set(inv.holdings[C.NODE]) == {"gpu-node-a"}
    assert summarise(Views(inv, DEFAULT_PRICES), 0.05, "USD").gpus_total == 2
