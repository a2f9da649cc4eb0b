"""The capacity plan's packing of the peak hour recomputed from a snapshot's raw JSON: each
node's room and how it offers its GPUs, where each unit may go (taints and tolerations, node
selector, required node affinity, allocatable of every `nvidia.com/*` resource a pod asks
for, the way its node offered GPUs), packed first fit decreasing by the rule read literally
(`pack_literally`), with its repair of what that leaves unplaced. Pod-group gangs are not
modelled: a report whose peak has whole-node gang members is not recomputed here."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from gpuaudit.audit.capacity import Item, Packing
from tests.support.raw_attribution import joined_mig_by_pod, kai_fraction_runs, kai_part, ran_of

HAMI = ("nvidia.com/gpucores", "nvidia.com/gpumem", "nvidia.com/gpumem-percentage")
"""HAMi's MiB and per cent: no resources a node allocates."""


def _quantity(raw: Any) -> float:
    return float(str(raw))


def node_facts(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Node -> labels, taints, cordoned, allocatable (`nvidia.com/*`), replicas (the label
    `nvidia.com/gpu.replicas`, or HAMi's split count: allocatable over the GPUs registered),
    kind (`mig`, `shared/R`, `whole`) and room in GPUs."""
    series = doc["prometheus"]["act_hourly"][0]["body"]["data"]["result"]
    mig_seen = {i["metric"]["Hostname"] for i in series if "GPU_I_PROFILE" in i["metric"]}
    seen: dict[str, set[str]] = defaultdict(set)
    for q in ("act_count", "util_count"):
        for item in doc["prometheus"][q][0]["body"]["data"]["result"]:
            seen[item["metric"]["Hostname"]].add(item["metric"]["UUID"])
    out = {}
    for n in (n for page in doc["kubernetes"]["nodes"] for n in page["items"]):
        meta, spec = n["metadata"], n.get("spec", {})
        alloc = {
            k: _quantity(v)
            for k, v in n["status"].get("allocatable", {}).items()
            if k.startswith("nvidia.com/")
        }
        labels = meta.get("labels", {})
        replicas = int(labels.get("nvidia.com/gpu.replicas", "1") or 1)
        register = meta.get("annotations", {}).get("hami.io/node-nvidia-register")
        if register:
            replicas = int(alloc.get("nvidia.com/gpu", 0) // max(len(json.loads(register)), 1))
        name = meta["name"]
        if (
            name in mig_seen
            or any(k.startswith("nvidia.com/mig-") for k in alloc)
            or labels.get("nvidia.com/mig.strategy") == "single"
        ):
            kind = "mig"
        else:
            kind = f"shared/{replicas}" if replicas > 1 else "whole"
        if kind == "mig" or not {"nvidia.com/gpu", "nvidia.com/gpu.shared"} & set(alloc):
            count = labels.get("nvidia.com/gpu.count", "")
            room = float(count) if count.isdigit() else float(len(seen.get(name, ())))
        else:
            whole = alloc.get("nvidia.com/gpu", 0.0) or alloc.get("nvidia.com/gpu.shared", 0.0)
            room = whole / max(1, replicas)
        out[name] = {
            "labels": labels,
            "taints": spec.get("taints", []),
            "cordoned": bool(spec.get("unschedulable")),
            "alloc": alloc,
            "kind": kind,
            "room": room,
            "product": labels.get("nvidia.com/gpu.product", ""),
        }
    return out


def _tolerates(tol: dict[str, Any], taint: dict[str, Any]) -> bool:
    if tol.get("effect") and tol["effect"] != taint.get("effect"):
        return False
    if tol.get("key") and tol["key"] != taint.get("key"):
        return False
    if tol.get("operator", "Equal") in ("", "Equal"):
        return bool(tol.get("value", "") == taint.get("value", ""))
    return bool(tol.get("operator") == "Exists")


def _matches(req: dict[str, Any], labels: dict[str, str]) -> bool:
    op, key, values = req["operator"], req["key"], req.get("values", [])
    if op == "In":
        return key in labels and labels[key] in values
    if op == "NotIn":
        return key not in labels or labels[key] not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    raise AssertionError(f"operator {op} is not modelled here")


def admits(pod: dict[str, Any], node: dict[str, Any]) -> bool:
    """Whether the scheduler's filters admit `pod` on `node` (`node_facts`), whatever other
    pods use there."""
    spec = pod["spec"]
    for taint in node["taints"]:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not any(
            _tolerates(t, taint) for t in spec.get("tolerations", [])
        ):
            return False
    if any(node["labels"].get(k) != v for k, v in spec.get("nodeSelector", {}).items()):
        return False
    required = (
        spec.get("affinity", {})
        .get("nodeAffinity", {})
        .get("requiredDuringSchedulingIgnoredDuringExecution")
    )
    if required is not None and not any(
        term.get("matchExpressions")
        and all(_matches(r, node["labels"]) for r in term["matchExpressions"])
        for term in required.get("nodeSelectorTerms", [])
    ):
        return False
    wants: dict[str, float] = defaultdict(float)
    for c in spec.get("containers", []):
        res = c.get("resources", {})
        for k, v in {**res.get("requests", {}), **res.get("limits", {})}.items():
            if k.startswith("nvidia.com/") and k not in HAMI:
                wants[k] += _quantity(v)
    return all(node["alloc"].get(k, 0.0) >= v for k, v in wants.items() if v > 0)


def peak_items(
    doc: dict[str, Any],
    nodes: dict[str, dict[str, Any]],
    product: str,
    units: dict[tuple[str, ...], tuple[float, str, set[tuple[str, str]]]],
) -> tuple[list[Item], dict[str, float]]:
    """The packer's items for `units` (key -> size, the node it ran on, its pods) of one
    product's peak hour, and the rooms of the product's schedulable nodes."""
    pods = {
        (p["metadata"]["namespace"], p["metadata"]["name"]): p
        for page in doc["kubernetes"]["pods"]
        for p in page["items"]
    }
    room = {n: f["room"] for n, f in nodes.items() if f["product"] == product and not f["cordoned"]}
    items = []
    for key, (size, ran_on, who) in units.items():
        kind = "mig" if key[0] in ("mig", "apimig") else nodes[ran_on]["kind"]
        ok = {n for n in room if nodes[n]["kind"] == kind}
        for p in (pods[w] for w in who if w in pods):
            ok = {n for n in ok if admits(p, nodes[n])}
        items.append(Item("\0".join(key), size, frozenset(ok)))
    return items, room


def peak_packing(
    doc: dict[str, Any], units: dict[tuple[str, ...], list[float]], product: str, t: float
) -> Packing:
    """The packing of `units` (`tests.test_capacity._raw_units`' of `product` in the hour
    ending at `t`): each unit's pods are a pod unit's pod (a KAI reservation pod's with the
    fraction pods of its group that ran in the hour), a MIG GPU's pods that series name or the
    Kubernetes-side join gives its instances to in the hour, and for the MIG GPUs only the API
    shows on a node, every pod on the node no series names that asks for MIG slices and ran in
    the hour."""
    series = doc["prometheus"]["act_hourly"][0]["body"]["data"]["result"]
    step = float(doc["manifest"]["window"]["step"])
    labelled = {
        (m.get("exported_namespace", ""), m["exported_pod"])
        for m in (i["metric"] for i in series)
        if m.get("exported_pod")
    }
    named = {pod for _, pod in labelled}
    joined = joined_mig_by_pod(doc, series, named)
    kai = kai_fraction_runs(doc)
    pods = {
        (p["metadata"]["namespace"], p["metadata"]["name"]): p
        for page in doc["kubernetes"]["pods"]
        for p in page["items"]
    }
    running = ran_at(doc, t)

    def asks_mig(pod: dict[str, Any]) -> bool:
        limits = (c.get("resources", {}).get("limits", {}) for c in pod["spec"]["containers"])
        return any(r.startswith("nvidia.com/mig-") for lim in limits for r in lim)

    mine: dict[tuple[str, ...], tuple[float, str, set[tuple[str, str]]]] = {}
    for key, (_, _, size) in units.items():
        if key[0] == "pod":
            fractions = kai.get((key[1], key[2]), [])
            who = {w for w, ran in fractions if kai_part(ran, t, step) > 0}
            mine[key] = (size, key[3], who | {(key[1], key[2])})
        elif key[0] == "api":
            mine[key] = (size, key[3], {(key[1], key[2])})
        elif key[0] == "mig":
            who = {
                (i["metric"].get("exported_namespace", ""), i["metric"]["exported_pod"])
                for i in series
                if i["metric"]["UUID"] == key[2]
                and i["metric"].get("exported_pod")
                and any(float(ts) == t for ts, _ in i["values"])
            }
            who |= {
                w
                for w, held in joined.items()
                for k, b in held.items()
                if k[1] == key[2] and t in b
            }
            mine[key] = (size, key[1], who)
        else:
            node = key[1]
            who = {
                k
                for k in running - labelled
                if pods[k]["spec"].get("nodeName") == node and asks_mig(pods[k])
            }
            mine[key] = (size, node, who)
    items, room = peak_items(doc, node_facts(doc), product, mine)
    return pack_literally(items, room)


def ran_at(doc: dict[str, Any], t: float) -> set[tuple[str, str]]:
    """(namespace, pod) of the pods that ran in the bucket ending at `t`."""
    window = doc["manifest"]["window"]
    step, end = float(window["step"]), float(window["end"])
    out = set()
    for p in (p for page in doc["kubernetes"]["pods"] for p in page["items"]):
        ran = ran_of(p, end)
        if ran is not None and min(ran[1], t) - max(ran[0] or -1e18, t - step) > 0:
            out.add((p["metadata"]["namespace"], p["metadata"]["name"]))
    return out


def pack_literally(items: list[Item], room: dict[str, float]) -> Packing:
    """The packer's rule read literally: every node looked at for every item."""
    eps = 1e-9
    usable = {n: sum(1 for i in items if i.nodes is None or n in i.nodes) for n in room}
    left = dict(room)
    opened: list[str] = []
    closed: set[str] = set()
    placed: dict[str, str] = {}
    unplaced: list[Item] = []
    for item in sorted(items, key=lambda i: (-i.size, i.key)):

        def may(node: str, it: Item = item) -> bool:
            return it.nodes is None or node in it.nodes

        node = None
        if not item.whole_node:
            fits = [n for n in opened if n not in closed and may(n) and left[n] >= item.size - eps]
            node = fits[0] if fits else None
        if node is None:
            spare = [n for n in left if n not in opened and may(n) and left[n] >= item.size - eps]
            if not spare:
                unplaced.append(item)
                continue
            sign = -1 if item.whole_node else 1
            node = max(spare, key=lambda n: (left[n], sign * usable[n], n))
            opened.append(node)
            if item.whole_node:
                closed.add(node)
        left[node] -= item.size
        placed[item.key] = node
    # The repair, literally: every unplaced item, every node, every item on it, every target.
    history = [i for i in sorted(items, key=lambda i: (-i.size, i.key)) if i.key in placed]
    still = [
        i
        for i in unplaced
        if i.whole_node or not _repaired(i, history, placed, opened, closed, left, usable)
    ]
    return Packing(tuple(opened), placed, tuple(still))


def _repaired(
    item: Item,
    history: list[Item],
    placed: dict[str, str],
    opened: list[str],
    closed: set[str],
    left: dict[str, float],
    usable: dict[str, int],
) -> bool:
    """Whether `item` was placed by the repair (`placed`, `opened`, `left` updated):
    `history` lists the placed items in the order they went to their node (a moved item goes
    to the end)."""
    eps = 1e-9

    def may(it: Item, node: str) -> bool:
        return it.nodes is None or node in it.nodes

    def fits(it: Item, node: str) -> bool:
        return node not in closed and may(it, node) and left[node] >= it.size - eps

    def go(it: Item, node: str) -> None:
        if node not in opened:
            opened.append(node)
        left[node] -= it.size
        placed[it.key] = node
        history.append(it)

    now = [n for n in opened if fits(item, n)]
    if now:
        go(item, now[0])
        return True
    for to_unused in (False, True):
        for node in [n for n in opened if n not in closed and may(item, n)]:
            for m in [i for i in history if placed[i.key] == node]:
                if not left[node] + m.size >= item.size - eps:
                    continue
                if to_unused:
                    free = [n for n in left if n not in opened and fits(m, n)]
                    free = [max(free, key=lambda n: (left[n], usable[n], n))] if free else []
                else:
                    free = [n for n in opened if n != node and fits(m, n)]
                if not free:
                    continue
                history.remove(m)
                left[node] += m.size
                go(m, free[0])
                go(item, node)
                return True
    return False
