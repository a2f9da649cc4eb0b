"""A team's own view (`--namespace`): the audit of a small cluster narrowed to one namespace,
against figures computed by hand."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gpuaudit import report
from gpuaudit.audit.assemble import AuditResult, run_checks
from gpuaudit.audit.settings import settings_from
from gpuaudit.core.errors import ConfigError
from gpuaudit.inventory import build, scope
from gpuaudit.inventory import columns as C
from tests.support.factories import START, Series, gpu_labels, make_node, make_pod, snapshot

HOURS = 4


def _cluster() -> list[Any]:
    """node-a: GPU-0 held by ml/train-0 (busy), GPU-1 by ml/idle-0 (idle), GPU-2 by
    other/serve-0 (half busy), all with DCGM series. node-b and node-c export no DCGM series:
    ml/dark-0 holds 2 GPUs on node-b, other/dark-1 3 on node-c."""
    series = [
        Series(gpu_labels("GPU-0", "0", "node-a", pod="train-0", namespace="ml"), [0.9] * HOURS),
        Series(gpu_labels("GPU-1", "1", "node-a", pod="idle-0", namespace="ml"), [0.0] * HOURS),
        Series(gpu_labels("GPU-2", "2", "node-a", pod="serve-0", namespace="other"), [0.5] * 4),
    ]
    before = START - 3600
    pods = [
        make_pod("train-0", "ml", "node-a", 1, started=before),
        make_pod("idle-0", "ml", "node-a", 1, started=before),
        make_pod("serve-0", "other", "node-a", 1, started=before),
        make_pod("dark-0", "ml", "node-b", 2, started=before),
        make_pod("dark-1", "other", "node-c", 3, started=before),
    ]
    nodes = [make_node("node-a", gpus=8), make_node("node-b", gpus=8), make_node("node-c")]
    return [series, pods, nodes]


def _audit(namespaces: tuple[str, ...] = ()) -> AuditResult:
    series, pods, nodes = _cluster()
    inv = build(snapshot(series, HOURS, pods=pods, nodes=nodes))
    return run_checks(inv, settings_from({}), namespaces=namespaces)


def test_the_inventory_keeps_the_namespaces_pods_their_gpus_and_nodes() -> None:
    series, pods, nodes = _cluster()
    whole = build(snapshot(series, HOURS, pods=pods, nodes=nodes))
    inv = scope.narrow(whole, ["ml"])
    assert inv.namespaces == ("ml",)
    assert sorted(inv.holdings[C.POD]) == ["idle-0", "train-0"]
    assert sorted(inv.gpus[C.UUID]) == ["GPU-0", "GPU-1"]
    assert set(inv.hourly[C.HOLDING]) == set(inv.holdings[C.HOLDING])
    assert len(inv.hourly) == 2 * HOURS
    assert sorted(inv.pods[C.POD]) == ["dark-0", "idle-0", "train-0"]
    assert sorted(inv.nodes[C.NODE]) == ["node-a", "node-b"]  # node-c: only other's pod
    assert scope.narrow(whole, []) is whole


def test_summary_ledger_and_findings_are_the_namespaces_own() -> None:
    whole, mine = _audit(), _audit(("ml",))
    # By hand: ml holds GPU-0 and GPU-1 for 4 h each (8 measured GPU-hours, 4 of them idle)
    # and dark-0's 2 GPUs for 4 h without a series (8 unattributed GPU-hours): 16 allocated.
    s = mine.summary
    assert s.allocated_gpu_hours == pytest.approx(16.0)
    assert s.idle_gpu_hours == pytest.approx(4.0)
    assert s.gpus_total == 16  # the GPUs of node-a and node-b, where ml's pods ran
    ledger = mine.attribution
    assert ledger is not None
    assert ledger.attributed["dcgm_pod_label"] == pytest.approx(8.0)
    assert ledger.unattributed["no_exporter"] == pytest.approx(8.0)
    assert ledger.unattributed_pods["no_exporter"] == 1
    assert ledger.allocated_gpu_hours == pytest.approx(s.allocated_gpu_hours)
    # The whole cluster's: other's serve-0 (4) and dark-1 (3 x 4 = 12) too, serve-0's series
    # attributed to its pod, as in the narrowed view it is simply left out.
    assert whole.summary.allocated_gpu_hours == pytest.approx(16.0 + 4.0 + 12.0)
    assert whole.attribution is not None
    assert whole.attribution.attributed["dcgm_pod_label"] == pytest.approx(12.0)
    assert whole.attribution.unattributed["no_exporter"] == pytest.approx(20.0)
    # A node finding stays only where it names a pod of ml: node-b (dark-0), not node-c.
    nodes = {f.resource.name for f in whole.findings if f.resource.kind == "Node"}
    assert {"node-b", "node-c"} <= nodes
    mine_nodes = {f.resource.name for f in mine.findings if f.resource.kind == "Node"}
    assert "node-b" in mine_nodes and "node-c" not in mine_nodes
    assert all(
        f.resource.namespace == "ml" or any(p.startswith("ml/") for p in f.pods)
        for f in mine.findings
    )
    assert mine.namespaces == ("ml",) and whole.namespaces == ()


def test_every_format_says_it_is_narrowed() -> None:
    mine = _audit(("ml",))
    for fmt in ("table", "markdown", "html"):
        assert "narrowed to namespace ml" in report.render(mine, fmt), fmt
    assert '"namespaces": [\n    "ml"\n  ]' in report.render(mine, "json")
    assert '"namespaces"' not in report.render(_audit(), "json")


def test_in_scope() -> None:
    assert scope.in_scope((), "x", ())
    assert scope.in_scope(("ml",), "ml", ())
    assert not scope.in_scope(("ml",), "other", ("ml/a",))
    assert scope.in_scope(("ml",), "", ("other/b", "ml/a"))
    assert scope.in_scope(("ml",), "", ("east/ml/a",))  # a scan of every cluster
    assert not scope.in_scope(("ml",), "", ())


def test_an_earlier_report_of_another_scope_is_refused() -> None:
    scope.same_scope({"namespaces": ["ml"]}, "--previous", ["ml"])
    scope.same_scope({}, "--previous", [])
    with pytest.raises(ConfigError) as err:
        scope.same_scope({}, "--previous", ["ml", "batch"])
    assert str(err.value) == (
        "--previous: the earlier report covers the whole cluster, this audit namespaces batch, "
        "ml; compare reports of one scope (--namespace)"
    )
    with pytest.raises(ConfigError, match=r"covers namespace '\\x1b\[31m', this audit the whole"):
        scope.same_scope({"namespaces": ["\x1b[31m"]}, "--history", [])
    # Through the audit: a whole-cluster report is no earlier report of ml's view.
    whole = report.render(_audit(), "json")
    series, pods, nodes = _cluster()
    inv = build(snapshot(series, HOURS, pods=pods, nodes=nodes))
    with pytest.raises(ConfigError, match="--previous: the earlier report covers the whole"):
        run_checks(
            inv,
            settings_from({}),
            previous=("last.json", json.loads(whole)),
            follow_up="--previous",
            namespaces=("ml",),
        )


def test_an_unattributed_reason_is_judged_over_every_nodes_series() -> None:
    """ml/quiet-0 holds a GPU of node-a, whose exporter serves other/serve-0 but names no
    series for it: its 4 GPU-hours are not for lack of an exporter, in ml's view too."""
    series = [
        Series(gpu_labels("GPU-2", "2", "node-a", pod="serve-0", namespace="other"), [0.5] * 4)
    ]
    before = START - 3600
    pods = [
        make_pod("serve-0", "other", "node-a", 1, started=before),
        make_pod("quiet-0", "ml", "node-a", 1, started=before),
    ]
    inv = build(snapshot(series, HOURS, pods=pods, nodes=[make_node("node-a")]))
    whole = run_checks(inv, settings_from({})).attribution
    mine = run_checks(inv, settings_from({}), namespaces=("ml",)).attribution
    assert whole is not None and mine is not None
    reasons = {k: v for k, v in whole.unattributed.items() if v}
    assert list(reasons.values()) == [pytest.approx(4.0)] and "no_exporter" not in reasons
    assert {k: v for k, v in mine.unattributed.items() if v} == reasons
    assert mine.allocated_gpu_hours == pytest.approx(4.0)
