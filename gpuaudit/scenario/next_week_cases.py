"""The week after a scenario (issue 34): the same cluster one week later, with some of its
planted findings fixed, the rest still open, and one new, for the comparison with last week's
report (`--previous`, `--history`).

`generate_next_week(gpus, days, seed, end)` generates the scenario of `generate(gpus, days,
seed, end + 7 days)`: the same pods, owners, holdings and activity, one week later (the
generator draws nothing from the window's end), then changes what a team would have changed
during the week. No random draw: week one's scenario is unchanged, and so are the cases of
every other module.

- **Fixed, gone**: the bare pod `research/scratch-gpu` (`owner_cases`: idle all window on an
  L40S) was deleted: it is in no API list and its GPU is free all window. Its GPU001 and GPU021
  findings are fixed (`how`: gone).
- **Fixed, scaled down**: Deployment `serving/fixable-llm` (`owner_cases`) was scaled to 0: its
  pod is gone, its GPU free, and the Deployment and its ReplicaSet are listed with
  `replicas: 0`. Its GPU001 finding is fixed (`how`: scaled_down; the finding names the
  Deployment), its GPU021 finding too (`how`: gone; it names only the pod, which is gone).
- **New**: the first busy pod (by namespace and name) that is the one pod of its Deployment,
  holds whole GPUs on a node whose dcgm-exporter labels it, all window, and that no check's
  truth names, went idle: its engine activity and GPU_UTIL read 0 and its power the idle draw
  all week (its framebuffer stays as it was: a model left loaded). GPU001 finds it (new).
- **Still open**: every other finding of week one's report.

The truth is under `next_week`: `fixed` (fingerprint and how), `new` (fingerprints), and the
pods changed. The realized savings are the fixed counted waste findings' impact in week one's
report, per week: GPU001's two pods held one L40S each, idle all window, so 2 x 168 GPU-hours
a week (GPU021's findings on the same pods add nothing: they share GPU001's hours; GPU060's
finding on their node stays open, with two idle pods left on it).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import numpy as np

from gpuaudit.scenario import nodes
from gpuaudit.scenario.cluster import Holding, PodSpec
from gpuaudit.scenario.generator import DEFAULT_END, Scenario, generate
from gpuaudit.scenario.owner_cases import HINTS

WEEK_S = 7 * 86400
GONE_POD = ("research", "scratch-gpu")
SCALED_DEPLOYMENT = ("serving", "fixable-llm")
KEY = "next_week"
"""The truth's key of what changed."""


def generate_next_week(
    gpus: int, days: int, seed: int, end: int = DEFAULT_END, scrape_s: int = 60
) -> Scenario:
    """The scenario one week after `generate(gpus, days, seed, end, scrape_s)` (see the
    module's docstring)."""
    sc = generate(gpus, days, seed, end=end + WEEK_S, scrape_s=scrape_s)
    gone = _pod(sc, lambda p: (p.namespace, p.name) == GONE_POD)
    scaled = _pod(
        sc,
        lambda p: (
            p.namespace == SCALED_DEPLOYMENT[0]
            and p.owner_kind == "ReplicaSet"
            and p.labels.get("app") == SCALED_DEPLOYMENT[1]
        ),
    )
    fresh = _new_idle(sc)
    for p in (gone, scaled):
        p.alive = False
        _free(sc, p)
    sc.objects.setdefault(HINTS, []).append(
        {"hint": "scaled_down", "namespace": scaled.namespace, "name": scaled.owner_name}
    )
    _idle(sc, fresh)
    deploy = f"Deployment/{fresh.labels['app']}"
    ns, name = SCALED_DEPLOYMENT
    sc.truth[KEY] = {
        "previous_end": end,
        "fixed": [
            {"fingerprint": f"GPU001|Pod|{GONE_POD[0]}|{GONE_POD[1]}", "how": "gone"},
            {"fingerprint": f"GPU021|Pod|{GONE_POD[0]}|{GONE_POD[1]}", "how": "gone"},
            {"fingerprint": f"GPU001|Pod|{ns}|Deployment/{name}", "how": "scaled_down"},
            # GPU021 names no owner: its fingerprint is the pod's, and the pod is gone.
            {"fingerprint": f"GPU021|Pod|{ns}|{scaled.name}", "how": "gone"},
        ],
        "new": [f"GPU001|Pod|{fresh.namespace}|{deploy}"],
        "pods": {
            "gone": f"{gone.namespace}/{gone.name}",
            "scaled_down": f"{scaled.namespace}/{scaled.name}",
            "new_idle": f"{fresh.namespace}/{fresh.name}",
        },
    }
    return sc


def _pod(sc: Scenario, match: Any) -> PodSpec:
    found = [p for p in sc.pods if match(p)]
    if len(found) != 1:
        raise ValueError(f"the next week needs owner_cases' pods (found {len(found)})")
    return found[0]


def _free(sc: Scenario, pod: PodSpec) -> None:
    """The pod's holdings become free GPUs (as `Builder.hold_free` holds them)."""
    for i, h in enumerate(sc.holdings):
        if h.pod is pod:
            zeros = np.zeros(h.h1 - h.h0)
            sc.holdings[i] = Holding(
                h.slot, None, h.h0, h.h1, zeros, zeros, zeros, zeros, _idle_power(h), zeros, zeros
            )


def _idle(sc: Scenario, pod: PodSpec) -> None:
    """The pod holds its GPUs idle: no engine activity, no GPU_UTIL, the idle power draw."""
    for i, h in enumerate(sc.holdings):
        if h.pod is pod:
            zeros = np.zeros(h.h1 - h.h0)
            sc.holdings[i] = dataclasses.replace(
                h, act=zeros, act_amp=zeros, util=zeros, util_amp=zeros, power=_idle_power(h)
            )


def _idle_power(h: Holding) -> Any:
    tdp = nodes.TDP[h.slot.node.model]
    return np.round(np.full(h.h1 - h.h0, tdp * 0.09 * h.slot.fraction), 3)


def _named(node: Any) -> Iterator[tuple[str, str]]:
    """Every (namespace, name) the truth names."""
    if isinstance(node, dict):
        if isinstance(node.get("name"), str):
            yield str(node.get("namespace") or ""), node["name"]
        for v in node.values():
            yield from _named(v)
    elif isinstance(node, list):
        for v in node:
            yield from _named(v)


def _new_idle(sc: Scenario) -> PodSpec:
    """The pod that goes idle (see the module's docstring)."""
    named = set(_named(sc.truth))
    per_rs: dict[tuple[str, str], int] = {}
    for p in sc.pods:
        per_rs[(p.namespace, p.labels.get("app", ""))] = (
            per_rs.get((p.namespace, p.labels.get("app", "")), 0) + 1
        )
    held: dict[str, list[Holding]] = {}
    for h in sc.holdings:
        if h.pod is not None:
            held.setdefault(h.pod.uid, []).append(h)
    for p in sorted(sc.pods, key=lambda p: (p.namespace, p.name)):
        mine = held.get(p.uid, [])
        if (
            p.owner_kind == "ReplicaSet"
            and p.alive
            and p.phase == "Running"
            and p.gpus >= 1
            and not (p.mig or p.dra or p.dcgm_hidden or p.hami_use or p.restarts)
            and per_rs[(p.namespace, p.labels.get("app", ""))] == 1
            and (p.namespace, p.name) not in named
            and len(mine) == p.gpus
            and all(h.h0 == 0 and h.h1 == sc.hours and h.slot.fraction == 1 for h in mine)
            and all(h.slot.node.exporter and h.slot.node.pod_labels for h in mine)
            and all(float(np.mean(h.act)) >= 0.3 for h in mine)
        ):
            return p
    raise ValueError("no busy pod of a one-pod Deployment to make idle")
