"""A deterministic, seeded generator of realistic GPU clusters with planted problems.

Node types (`nodes`): 8x H100 80GB HGX, 8x A100 80GB with MIG in the mixed strategy
(`all-balanced`: 3g.40gb + 2g.20gb + 2x 1g.10gb per GPU), and 4x L40S PCIe; plus three 4x GB200
trays in two NVLink domains (`nvidia.com/gpu.clique`) and one more L40S node for the placement
cases. Workloads (`workloads`): gang-scheduled PyTorchJobs, inference Deployments (whole GPUs
and MIG slices), Kubeflow notebooks and nightly batch, Volcano, coscheduling and Kueue gangs, a
JobSet, Kueue and Volcano queues with their quota, and pods pending for GPUs; every workload
pod carries a `team` label by its namespace (`teams`). Every planted
problem, and every near-miss that must stay quiet, is listed in the truth: the base cases in
`cases`, the gangs in `gangs`, the hardware cases in `hardware`, the queue cases in `queues`,
the moves priced against idle capacity in `move_cases`, GPUs shared by HAMi in `hami_cases`,
GPU090's quota advice in `quota_advice_cases`, the Kubernetes-side join over time in
`timejoin_cases`, a HAMi pod whose GPU has no DCGM series in `hami_dark_cases`, CPU-starved GPU
work with cAdvisor's CPU series in `cpu_cases`, and what follows from the end state in `truth`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuaudit.core.gcpause import without_gc
from gpuaudit.scenario import cases, hardware, nodes, teams, truth, workloads
from gpuaudit.scenario import cause_cases as causes
from gpuaudit.scenario import cpu_cases as cpu
from gpuaudit.scenario import gang_cases as gangs
from gpuaudit.scenario import hami_cases as hami
from gpuaudit.scenario import hami_dark_cases as hami_dark
from gpuaudit.scenario import join_cases as attribution
from gpuaudit.scenario import kai_cases as kai
from gpuaudit.scenario import kai_gap_cases as kai_gaps
from gpuaudit.scenario import move_cases as moves
from gpuaudit.scenario import nodepool_cases as nodepools
from gpuaudit.scenario import owner_cases as owners
from gpuaudit.scenario import quota_advice_cases as quota_advice
from gpuaudit.scenario import quota_cases as queues
from gpuaudit.scenario import rootcause_cases as rootcause
from gpuaudit.scenario import serving_cases as serving
from gpuaudit.scenario import timejoin_cases as timejoin
from gpuaudit.scenario.builder import Builder
from gpuaudit.scenario.cluster import Holding, NodeSpec, PodSpec, SlotSpec

DEFAULT_END = 1795392000  # 2026-11-23T00:00:00Z, a Monday: fixed so scenarios are reproducible.


@dataclass
class Scenario:
    seed: int
    days: int
    start: int
    end: int
    scrape_s: int
    nodes: list[NodeSpec]
    slots: list[SlotSpec]
    holdings: list[Holding]
    pods: list[PodSpec]
    objects: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """Extra API objects by resource (pytorchjobs, priorityclasses, ...)."""
    truth: dict[str, Any] = field(default_factory=dict)

    @property
    def hours(self) -> int:
        return self.days * 24


@without_gc
def generate(
    gpus: int, days: int, seed: int, end: int = DEFAULT_END, scrape_s: int = 60
) -> Scenario:
    """Build a scenario. The same arguments always give the same scenario."""
    if gpus < 12:
        raise ValueError("a scenario needs at least 12 GPUs")
    if days < 1:
        raise ValueError("a scenario needs at least 1 day")
    if scrape_s < 1 or 1800 % scrape_s:
        raise ValueError("scrape interval must be a whole number of seconds dividing 30 min")
    b = Builder(seed, gpus, days, end, scrape_s)
    _build(b)
    cases.word_pending(b)  # over every node, the later steps' too
    return _scenario(b)


def _build(b: Builder) -> None:
    """Every step draws from one random stream, so their order is part of the output. The
    cases of GPU010-GPU070 come after the base scenario and its background, in the GPUs those
    left free and on nodes added then, so that the base stays exactly as it was."""
    for kind, i in nodes.base_layout(b.target):
        b.add_node(kind, i)
    cases.plant_base(b)
    workloads.fill(b)
    cases.plant_monitoring_gaps(b)
    gangs.plant_gangs(b)
    hardware.plant_health(b)
    hardware.plant_placement(b)
    queues.plant_queues(b)
    cases.plant_dra(b)
    attribution.plant_attribution(b)
    cases.plant_power(b)
    cases.plant_pending(b)
    hardware.plant_spread(b)
    moves.plant_moves(b)
    hami.plant_hami(b)
    quota_advice.plant_quota_advice(b)
    timejoin.plant_time_join(b)
    b.free_rest()
    teams.label(b)
    truth.from_state(b)
    kai.plant_kai(b)
    owners.plant_owners(b)
    hami.plant_hami_ended(b)
    kai_gaps.plant_kai_gaps(b)
    nodepools.plant_nodepools(b)
    hami_dark.plant_hami_dark(b)
    rootcause.plant_rootcause(b)
    causes.plant_causes(b)
    serving.plant_serving(b)
    cpu.plant_cpu(b)
    queues.settle_burst(b)


def _scenario(b: Builder) -> Scenario:
    slots = [s for n in b.nodes for s in b.slots_by_node[n.name]]
    facts = dict(b.truth)
    facts.update(
        {
            "seed": b.seed,
            "gpus": sum(n.gpu_count for n in b.nodes),
            "days": b.days,
            "start": b.start,
            "end": b.end,
        }
    )
    sc = Scenario(
        seed=b.seed,
        days=b.days,
        start=b.start,
        end=b.end,
        scrape_s=b.scrape_s,
        nodes=b.nodes,
        slots=slots,
        holdings=b.holdings,
        pods=b.pods,
        truth=facts,
    )
    sc.objects["pytorchjobs"] = b.pytorchjobs
    sc.objects.update(b.api)
    return sc
