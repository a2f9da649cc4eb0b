"""Serving metric cases (issue 33): part-time Deployments whose fix is a KEDA ScaledObject
(`gpuaudit.fix.parttime`), one of which exports a serving engine's queue, planted last so that
every case before stays as it was. Both run on an L40S node of their own, busy 13:00-16:00 UTC
every day (GPU003 finds each once the window holds `DAILY_H` hours).

- `llm-queue-{i}` (namespace `batch`): its pod exports vLLM's `vllm:num_requests_waiting`
  (`PodSpec.serving`, scraped from the pod itself: `namespace`/`pod` name it), a whole number
  each busy hour (from its activity) and 0 the rest of the day: the fix is a ScaledObject with
  a `prometheus` trigger on that queue beside its cron window, `threshold` the busy level (the
  mean of the busy hours' levels, what the `serving_busy` query answers).
- near-miss, `llm-plain-{i}`: the same schedule without a serving metric: cron alone.

The truth is under `serving_fixes` (the pod, its owner, the metric or none, and the busy level),
besides GPU003's.
"""

from __future__ import annotations

import numpy as np

from gpuaudit.scenario import teams, workloads
from gpuaudit.scenario.builder import Builder
from gpuaudit.scenario.workloads import DAILY_H, pattern
from gpuaudit.sources.prometheus.catalogue import SERVING_QUEUE_METRICS

TAINT = {"key": "gpu-serving-cases", "value": "reserved", "effect": "NoSchedule"}
"""On the cases' node: no pending pod of the cases before tolerates it, so that its free GPUs
change no other case."""
BUSY = (13, 16)
"""The busy hours of day (UTC), [start, end)."""


def plant_serving(b: Builder) -> None:
    """Place the serving metric cases (see the module's docstring) and record their truth."""
    if b.H < 24:
        return
    node = b.add_node("l40s", len(b.of_kind("l40s")))
    node.taints = [dict(TAINT)]
    busy = pattern("window", start_h=BUSY[0], end_h=BUSY[1])
    fixes = b.truth.setdefault("serving_fixes", [])
    for name, metric in (("llm-queue-0", SERVING_QUEUE_METRICS[0]), ("llm-plain-0", "")):
        p = workloads.nightly(b, node, name, busy)
        if p is None:  # pragma: no cover - the node is new: its GPUs are free
            continue
        if b.H >= DAILY_H:
            b.plant("GPU003", p)
        fact: dict[str, object] = {"pod": p.name, "namespace": p.namespace, "owner": name}
        if metric:
            act = b.holdings[-1].act
            hod = (np.arange(p.created_h, b.H) + b.start // 3600) % 24
            up = (hod >= BUSY[0]) & (hod < BUSY[1])
            levels = np.where(up, np.rint(act * 6.0), 0.0)
            p.serving = (metric, tuple(float(x) for x in levels.tolist()))
            fact.update(metric=metric, busy_level=float(levels[levels > 0].mean()))
        else:
            fact.update(metric=None, why="exports no serving metric: cron alone")
        fixes.append(fact)
    teams.label(b)
    b.free_rest()
