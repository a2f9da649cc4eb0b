"""The placement cases of issue 15 as the bundled demo plants them: the findings agree with the
scheduler's own message, never count room a node does not have, and advise no move without
evidence that the work exchanges data between its GPUs."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from typer.testing import CliRunner

from gpuaudit.cli import app
from tests.support.paths import DEMO
from tests.support.raw_snapshot import raw_snapshot

runner = CliRunner()


@pytest.fixture(scope="module")
def findings() -> list[dict[str, Any]]:
    res = runner.invoke(app, ["scan", "--demo", "--format", "json", "--quiet"])
    assert res.exit_code == 0, res.output
    found: list[dict[str, Any]] = json.loads(res.stdout)["findings"]
    return found


def _of(findings: list[dict[str, Any]], code: str) -> dict[str, dict[str, Any]]:
    return {f["resource"]["name"]: f for f in findings if f["code"] == code}


def _pending_message(namespace: str, name: str) -> str:
    """The message of the pod's PodScheduled condition, as the snapshot holds it."""
    (pod,) = [
        p
        for page in raw_snapshot(DEMO)["kubernetes"]["pods"]
        for p in page["items"]
        if (p["metadata"]["namespace"], p["metadata"]["name"]) == (namespace, name)
    ]
    (message,) = [c["message"] for c in pod["status"]["conditions"] if c["type"] == "PodScheduled"]
    return str(message)


def test_the_pod_kept_off_a_tainted_node_is_fragmentation_as_its_message_says(
    findings: list[dict[str, Any]],
) -> None:
    f = _of(findings, "GPU051")["eval-4gpu-0"]
    ev = f["evidence"]
    ((node, refused),) = ev["refused_with_room"].items()
    assert refused == {"free": 4.0, "why": "untolerated taint {dedicated: inference}"}
    assert (
        f"{node} has 4 free but is refused (untolerated taint {{dedicated: inference}})"
        in (f["message"])
    )
    # Node by node, the model refuses what the scheduler refused, for the same reasons: the
    # pod's whole message (the evidence keeps its first 300 characters), over every node.
    message = _pending_message("research", "eval-4gpu-0")
    assert ev["scheduler_message"] == message[:300]
    nodes = sum(len(page["items"]) for page in raw_snapshot(DEMO)["kubernetes"]["nodes"])
    assert message.startswith(f"0/{nodes} nodes are available: ")
    listed = message.split(": ", 1)[1].rstrip(".").split(", ")
    counts = {why: int(n) for n, why in (item.split(" ", 1) for item in listed)}
    assert counts["node(s) had untolerated taint {dedicated: inference}"] >= 1
    assert (
        sum(n for why, n in counts.items() if "untolerated taint" in why)
        == (ev["refused_nodes"]["untolerated taint"]["nodes"])
    )
    assert (
        counts["node(s) didn't match Pod's node affinity/selector"]
        == (ev["refused_nodes"]["node selector or affinity"]["nodes"])
    )
    could_run = re.search(r"the (\d+) nodes that could run it", f["message"])
    assert could_run is not None
    assert counts["Insufficient nvidia.com/gpu"] == int(could_run.group(1))
    # The pod that tolerates the taint fits there: no wait for GPUs.
    assert "eval-tolerant-0" not in _of(findings, "GPU051")
    assert "eval-tolerant-0" not in _of(findings, "GPU050")


def test_room_never_exceeds_a_nodes_allocatable(findings: list[dict[str, Any]]) -> None:
    doc = raw_snapshot(DEMO)
    allocatable = {
        n["metadata"]["name"]: int(n["status"]["allocatable"].get("nvidia.com/gpu", 0))
        for page in doc["kubernetes"]["nodes"]
        for n in page["items"]
    }
    gpu031 = _of(findings, "GPU031")
    assert gpu031, "the demo has GPU031 findings"
    for f in gpu031.values():
        for node, room in f["evidence"]["room_at_start"].items():
            assert room <= allocatable[node], (f["resource"]["name"], node, room)
    # A 2 x 8-GPU job on two 8-GPU nodes is as tight as it can be.
    assert "llm-pretrain-000" not in gpu031


def test_no_move_without_communication_or_at_a_loss(findings: list[dict[str, Any]]) -> None:
    gpu031 = _of(findings, "GPU031")
    for quiet in ("render-0", "embed-batch-0", "distill-busy", "distill-quiet"):
        assert quiet not in gpu031
    # GB200 lists at more than the slower links lose, but tray 0 sat unheld all window.
    move = gpu031["sdxl-finetune-0"]["evidence"]["move_cost"]
    assert move["unheld_share"] == 1.0 and move["extra_cost"] == 0
    assert "render-0" not in _of(findings, "GPU030")
    for code in ("GPU030", "GPU031"):
        for f in _of(findings, code).values():
            ev = f["evidence"]
            assert ev["communication_basis"] in ("measured", "owner")
            assert ev["placement_slowdown"] == 0.10
            assert "not a measurement" in ev["impact_basis"]
