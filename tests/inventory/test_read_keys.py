"""Every pod and node annotation the inventory reads is one a snapshot keeps
(`gpuaudit.snapshot.fields`): the keys are taken from the readers themselves, by running them
over objects whose annotations record each key looked up, so a reader that starts reading a new
annotation fails here until the allowlist keeps it (a snapshot would drop it, and a replay would
audit otherwise than the live scan)."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator
from typing import Any

import gpuaudit.inventory
from gpuaudit.inventory import hami, kube
from gpuaudit.inventory.queues import VOLCANO_QUEUE_ANNOTATION
from gpuaudit.snapshot.fields import keep_object
from tests.support.factories import START, make_node, make_pod, snapshot
from tests.support.hami import hami_node, hami_pod
from tests.support.queue_objects import podgroup, volcano_queue

# The module, not the function `gpuaudit.inventory.build` the package exports.
inventory_build = importlib.import_module("gpuaudit.inventory.build")


class Recorder(dict[str, Any]):
    """Annotations that note every key a reader looks up, and whether one read them whole."""

    def __init__(self, data: dict[str, Any], seen: set[str], whole: set[str]) -> None:
        super().__init__(data)
        self.seen, self.whole = seen, whole

    def get(self, key: Any, default: Any = None) -> Any:
        self.seen.add(str(key))
        return super().get(key, default)

    def __getitem__(self, key: Any) -> Any:
        self.seen.add(str(key))
        return super().__getitem__(key)

    def __contains__(self, key: Any) -> bool:
        self.seen.add(str(key))
        return super().__contains__(key)

    def items(self) -> Any:
        self.whole.add("items")
        return super().items()

    def __iter__(self) -> Iterator[str]:
        self.whole.add("iter")
        return super().__iter__()


def _pods() -> list[dict[str, Any]]:
    """Pods that lead each reader down its annotation paths: a Volcano pod placed by its queue
    annotation only, one of a Volcano PodGroup, KAI fraction pods (running and waiting), a KAI
    PodGroup member, a HAMi pod, a Kueue pod group and a LeaderWorkerSet pod."""
    kai_labels = {"runai-gpu-group": "g1", "kai.scheduler/queue": "team-a"}
    return [
        make_pod("vq-only", namespace="rl", annotations={VOLCANO_QUEUE_ANNOTATION: "v"}),
        make_pod("vol", namespace="rl", annotations={"scheduling.k8s.io/group-name": "pg"}),
        make_pod(
            "frac", gpus=0, labels=kai_labels, annotations={"gpu-fraction": "0.5"}, started=START
        ),
        make_pod(
            "frac-wait",
            gpus=0,
            node="",
            phase="Pending",
            labels=kai_labels,
            annotations={"gpu-memory": "8000", "gpu-fraction-num-devices": "2"},
            unschedulable="0/1 nodes are available",
        ),
        make_pod("kai-gang", annotations={"pod-group-name": "pg-train"}),
        hami_pod("quarter", 25, 20_390),
        make_pod(
            "kq",
            labels={"kueue.x-k8s.io/pod-group-name": "grp"},
            annotations={"kueue.x-k8s.io/pod-group-total-count": "2"},
        ),
        make_pod(
            "lws-0",
            labels={"leaderworkerset.sigs.k8s.io/name": "lws"},
            annotations={"leaderworkerset.sigs.k8s.io/size": "2"},
        ),
    ]


def _read(kind: str) -> tuple[set[str], set[str]]:
    """The annotation keys the inventory's readers looked up on objects of `kind` (pods,
    nodes), and how they read some whole (empty: never)."""
    seen: set[str] = set()
    whole: set[str] = set()
    lists: dict[str, list[dict[str, Any]]] = {
        "volcano_queues": [volcano_queue("v", 8)],
        "volcano_podgroups": [podgroup("rl", "pg", "v")],
    }
    snap = snapshot([], 2, pods=_pods(), nodes=[make_node("node-a"), hami_node()], lists=lists)
    objects = kube.index(snap.kubernetes)
    for obj in objects[kind]:
        meta = obj["metadata"]
        meta["annotations"] = Recorder(meta.get("annotations") or {}, seen, whole)
    inventory_build._kubernetes(snap, objects)
    hami.read(objects)
    return seen, whole


def _kept(kind: str, key: str) -> bool:
    obj = {"metadata": {"name": "x", "annotations": {key: "1"}}}
    return key in keep_object(kind, obj)["metadata"].get("annotations", {})


def _named_annotation_constants() -> set[str]:
    """The annotation keys the inventory's modules name in constants (`..._ANNOTATION` or
    `..._ANNOTATIONS`): what a reader that copies the annotations whole looks up."""
    out: set[str] = set()
    for mod in pkgutil.iter_modules(gpuaudit.inventory.__path__):
        module = importlib.import_module(f"gpuaudit.inventory.{mod.name}")
        for name, value in vars(module).items():
            if not (name.isupper() and name.rstrip("S").endswith("ANNOTATION")):
                continue
            if isinstance(value, str):
                out.add(value)
            elif isinstance(value, tuple):
                out |= {v for v in value if isinstance(v, str)}
    return out


def test_every_pod_annotation_the_inventory_reads_is_kept_in_snapshots() -> None:
    seen, whole = _read("pods")
    assert VOLCANO_QUEUE_ANNOTATION in seen and "gpu-fraction" in seen
    # The gang reader copies a pod's annotations whole: what it names in constants counts.
    if whole:
        seen |= _named_annotation_constants()
    assert {"pod-group-name", "scheduling.volcano.sh/group-name"} <= seen
    assert not {k for k in seen if not _kept("pods", k)}


def test_every_node_annotation_the_inventory_reads_is_kept_in_snapshots() -> None:
    seen, _ = _read("nodes")
    assert hami.REGISTER in seen
    assert not {k for k in seen if not _kept("nodes", k)}
