"""Changes for sick GPUs in use (GPU070): commands, not patches, naming the node and the GPU.

A node the finding drains (`Finding.drains`, its GPU's action is to contact support or reboot):
cordon it (nothing new lands there) and drain it (its pods are evicted, as PodDisruptionBudgets
allow). One GPU the finding frees for a reset: cordon its node, delete the pods that hold it
(commented out for review: their owners start them elsewhere, a bare pod is gone), reset the GPU
on the node, uncordon it. A finding that drains nothing (reset when idle, restart the
application) gets no change: its recommendation needs no command gpuaudit could write.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from gpuaudit.checks.findings import Finding
from gpuaudit.fix.changes import Change, ChangeKind, FindingFix, Target, key, one_line
from gpuaudit.fix.context import Context

CODES = ("GPU070",)
COMMANDS = "commands.sh"


def changes(
    findings: Sequence[Finding], ctx: Context
) -> tuple[list[Change], dict[str, FindingFix]]:
    """Cordon and drain commands for each GPU070 finding that drains, and what each gets."""
    out: list[Change] = []
    fixes: dict[str, FindingFix] = {}
    for f in findings:
        if not f.drains:
            fixes[key(f)] = FindingFix(
                None, "", None, "no drain is needed: follow the recommendation"
            )
            continue
        lines: list[str] = [f"# {one_line(f.message, 400)}"]
        for d in f.drains:
            cluster, _, node = d.node.rpartition("/")
            if cluster:
                lines.append(f"# Node {node} of cluster {one_line(cluster, 100)}.")
            q = shlex.quote(node)
            lines.append(f"k cordon {q}")
            if not d.gpu:
                lines.append(f"k drain {q} --ignore-daemonsets")
                continue
            index = str(f.evidence.get("gpu_index", "")) or "INDEX"
            for pod in f.pods:
                ns, _, name = pod.rpartition("/")
                lines.append(f"# k delete pod {shlex.quote(name)} -n {shlex.quote(ns)}")
            lines.append(
                f"# On node {one_line(node, 200)}: nvidia-smi -r -i {one_line(index, 20)}  "
                f"(GPU {one_line(d.gpu, 100)}), then:"
            )
            lines.append(f"# k uncordon {q}")
        first = f.drains[0]
        what = f"GPU {first.gpu} on node {first.node}" if first.gpu else f"node {first.node}"
        change = Change(
            kind=ChangeKind.COMMAND,
            file=COMMANDS,
            title=f"Take {what} out of service",
            findings=(f,),
            savings=ctx.per_week((f,)),
            risk=(
                "Cordoning stops new pods landing on the node; draining evicts its pods, which "
                "their owners start elsewhere if there is room (bare pods are not restarted). "
                "The GPUs of the node stay out of service until it is uncordoned."
            ),
            target=Target("v1", "Node", "", first.node.rpartition("/")[2], "nodes"),
            commands=tuple(lines),
        )
        out.append(change)
        fixes[key(f)] = FindingFix(ChangeKind.COMMAND, COMMANDS, change.target, "")
    return out, fixes
