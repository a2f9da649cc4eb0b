"""GPU090 and the queue inventory with many Kueue ClusterQueues, measured in one process.

    python benchmarks/queues.py [--queues 16000] [--cohort-size 100] [--repeat 3]

Builds a small cluster (two nodes, a few GPUs) with `--queues` ClusterQueues in cohorts of
`--cohort-size` (0: one cohort holds them all), each with a LocalQueue in its own namespace, an
admitted Workload and a waiting one, then times, `--repeat` times each: the inventory build
(which reads the queue objects), the queue usage GPU090 reads, and GPU090 itself. It prints
the median, the fastest and the slowest of each, the peak RSS of the process and the load
average. It prints figures; it asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gpuaudit.checks import gpu090_idle_queue_quota as gpu090  # noqa: E402
from gpuaudit.domain.pricing import DEFAULT_PRICES  # noqa: E402
from gpuaudit.inventory import Views, build  # noqa: E402
from tests.support.factories import (  # noqa: E402
    START,
    STEP,
    Series,
    gpu_labels,
    make_node,
    make_pod,
    snapshot,
)
from tests.support.queue_objects import (  # noqa: E402
    cluster_queue,
    flavor,
    local_queue,
    workload,
)

HOURS = 48
GPU = "nvidia.com/gpu"


def objects(n: int, cohort_size: int) -> dict[str, list[dict[str, Any]]]:
    """`n` ClusterQueues of flavor `fx` in cohorts of `cohort_size`, each with a LocalQueue, an
    admitted Workload and one waiting since the window's start."""
    cqs, lqs, wls = [], [], []
    limits = {("fx", GPU): {"lendingLimit": "1"}}
    for i in range(n):
        name, ns = f"cq-{i:06d}", f"team-{i:06d}"
        cohort = f"cohort-{i // cohort_size:05d}" if cohort_size else "all"
        cqs.append(cluster_queue(name, [("fx", GPU, "4")], cohort, limits))
        lqs.append(local_queue(ns, "main", name))
        wls.append(workload(ns, f"run-{i}", name, "fx", 1, START - STEP, owner=("Job", f"j{i}")))
        wls.append(
            workload(ns, f"wait-{i}", name, "fx", 8, pending_since=START, local_queue="main")
        )
    return {
        "kueue_resourceflavors": [flavor("fx", {"pool": "x"})],
        "kueue_clusterqueues": cqs,
        "kueue_localqueues": lqs,
        "kueue_workloads": wls,
    }


def cluster() -> tuple[list[Series], list[dict[str, Any]], list[dict[str, Any]]]:
    nodes = [make_node(n, gpus=8) for n in ("a", "b")]
    for node in nodes:
        node["metadata"]["labels"]["pool"] = "x"
    series = [
        Series(
            gpu_labels(f"GPU-{i}", str(i), "a", pod="job-x", namespace="team-000000"),
            act=[0.5] * HOURS,
        )
        for i in range(2)
    ]
    pods = [make_pod("job-x", namespace="team-000000", node="a", gpus=2, owner=("Job", "j0"))]
    return series, pods, nodes


def timed(what: str, runs: list[float]) -> str:
    return (
        f"{what} {statistics.median(runs):.2f} s ({min(runs):.2f}-{max(runs):.2f})"
        if runs
        else f"{what} -"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queues", type=int, default=16_000)
    ap.add_argument("--cohort-size", type=int, default=100, help="0: one cohort for all")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    series, pods, nodes = cluster()
    lists = objects(args.queues, args.cohort_size)
    builds, usages, checks = [], [], []
    found = 0
    for _ in range(args.repeat):
        snap = snapshot(series, HOURS, pods=pods, nodes=nodes, lists=lists)
        t0 = time.perf_counter()
        inv = build(snap)
        t1 = time.perf_counter()
        views = Views(inv, DEFAULT_PRICES)
        cfg = gpu090.Thresholds()
        views.queue_usage(cfg.idle_activity)
        t2 = time.perf_counter()
        found = len(gpu090.run(views, cfg))
        t3 = time.perf_counter()
        builds.append(t1 - t0)
        usages.append(t2 - t1)
        checks.append(t3 - t2)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"{args.queues:,} ClusterQueues, cohorts of {args.cohort_size or args.queues:,}, "
        f"{args.repeat} runs: {timed('build', builds)}, {timed('queue usage', usages)}, "
        f"{timed('GPU090', checks)}; {found:,} findings; peak RSS {rss:,.0f} MB; "
        f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )


if __name__ == "__main__":
    main()
