"""The coherence pass: findings that agree with each other (`gpuaudit.audit.coherence`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuaudit.audit.assemble import run_checks
from gpuaudit.audit.coherence import make_coherent
from gpuaudit.audit.settings import Settings
from gpuaudit.checks import by_code
from gpuaudit.checks.findings import Alternative, Drain, Finding, Impact, Resource, Severity
from gpuaudit.cli import app
from gpuaudit.report import json_report
from tests.support.factories import Series, gpu_labels, inventory, make_node, make_pod

runner = CliRunner()


def _f(
    code: str,
    name: str,
    hours: float,
    severity: Severity = Severity.MEDIUM,
    kind: str = "Pod",
    ns: str = "ml",
    **kw: object,
) -> Finding:
    return Finding(
        code=code,
        severity=severity,
        resource=Resource(kind, ns, name, "", 1.0),
        message=f"{code} about {name}.",
        impact=Impact(hours, hours * 2.0),
        recommendation=f"Fix {name}.",
        **kw,  # type: ignore[arg-type]
    )


def _by(findings: tuple[Finding, ...], code: str, name: str = "") -> Finding:
    return next(f for f in findings if f.code == code and (not name or f.resource.name == name))


# ---- rule 1: no recommendation places work where another finding drains -------------------


def test_a_target_another_finding_drains_moves_to_the_first_clear_alternative() -> None:
    sick = _f("GPU070", "GPU-1", 10, Severity.CRITICAL, "GPU", "", drains=(Drain("n2"),))
    busy = _f("GPU070", "GPU-2", 10, Severity.HIGH, "GPU", "", drains=(Drain("n3", "GPU-2"),))
    alts = (
        Alternative(("n3",), "Make room on n3."),
        Alternative(("n4",), "Make room on n4.", "Room on n4 would fit it."),
    )
    move = _f("GPU051", "wait-0", 5, targets=("n2",), alternatives=alts)
    out, _ = make_coherent([sick, busy, move])
    got = _by(out, "GPU051")
    assert got.targets == ("n4",)
    assert got.recommendation == "Make room on n4. (Not n2: GPU070 says to drain node n2.)"
    assert got.message == "Room on n4 would fit it."
    assert got.evidence["coherence"]["moved_from"] == ["n2"]
    assert got.evidence["coherence"]["because"] == [{"code": "GPU070", "node": "n2", "gpu": ""}]


def test_without_a_clear_alternative_the_target_stays_and_it_says_why() -> None:
    sick = _f("GPU070", "GPU-1", 10, Severity.CRITICAL, "GPU", "", drains=(Drain("n2"),))
    move = _f("GPU050", "wait-0", 5, targets=("n2",))
    out, _ = make_coherent([sick, move])
    got = _by(out, "GPU050")
    assert got.targets == ("n2",)
    assert got.recommendation == (
        "Fix wait-0. Note: GPU070 says to drain node n2, and GPU050 found no other node for "
        "this work: wait until n2 is back in service before doing this."
    )
    assert got.evidence["coherence"]["kept_target"] == ["n2"]


def test_a_gpu_awaiting_a_reset_is_named_and_its_node_is_avoided() -> None:
    reset = _f("GPU070", "GPU-9", 10, Severity.HIGH, "GPU", "", drains=(Drain("n2", "GPU-9"),))
    stay = _f("GPU051", "a-0", 5, targets=("n2",))
    moved = _f("GPU051", "b-0", 5, targets=("n2",), alternatives=(Alternative(("n5",), "Use n5."),))
    out, _ = make_coherent([reset, stay, moved])
    assert (
        "GPU070 says to free GPU-9 on node n2 for a reset"
        in _by(out, "GPU051", "a-0").recommendation
    )
    assert (
        "let the reset happen before new work lands on n2"
        in _by(out, "GPU051", "a-0").recommendation
    )
    assert _by(out, "GPU051", "b-0").targets == ("n5",)


def test_targets_elsewhere_and_a_findings_own_drain_are_left_alone() -> None:
    sick = _f("GPU070", "GPU-1", 10, Severity.CRITICAL, "GPU", "", drains=(Drain("n2"),))
    move = _f("GPU051", "wait-0", 5, targets=("n3",))
    own = _f("GPU099", "x", 1, drains=(Drain("n4"),), targets=("n4",))
    out, _ = make_coherent([sick, move, own])
    assert _by(out, "GPU051") == move
    assert _by(out, "GPU099") == own


# ---- rule 4: work placed where another finding releases -------------------------------------


def test_a_move_onto_a_node_another_finding_releases_and_that_finding_both_say_so() -> None:
    idle = _f("GPU060", "t0", 672, kind="Node", ns="", releases=("t0",))
    move = _f("GPU031", "moe", 118, kind="PyTorchJob", targets=("t0", "t1"))
    elsewhere = _f("GPU031", "other", 5, kind="PyTorchJob", targets=("t9",))
    out, totals = make_coherent([idle, move, elsewhere])
    said = {
        ("GPU031", "moe"): (
            "Fix moe. Note: GPU060 advises releasing node t0, where this places work, on "
            "capacity counted idle there: keep the GPUs it needs on t0 and release what the "
            "work leaves instead (released first, t0 is no longer there to use).",
            {"uses_released": [{"code": "GPU060", "node": "t0", "resource": "t0"}]},
        ),
        ("GPU060", "t0"): (
            "Fix t0. Note: GPU031 places PyTorchJob ml/moe on t0, using GPUs this finding "
            "counts idle: keep the GPUs that work needs and release what it leaves instead, "
            "and the rest of the node once nothing runs there.",
            {
                "released_in_use": [
                    {"code": "GPU031", "node": "t0", "resource": "PyTorchJob ml/moe"}
                ]
            },
        ),
    }
    for (code, name), (recommendation, coherence) in said.items():
        got = _by(out, code, name)
        assert got.recommendation == recommendation
        assert got.evidence["coherence"] == coherence
    assert _by(out, "GPU031", "other") == elsewhere
    # Their GPU-hours differ (the node's idle hours, the job's slower hours): both count.
    assert totals.gpu_hours == pytest.approx(672 + 118 + 5)


def test_a_drained_target_and_a_released_one_keep_both_notes() -> None:
    sick = _f("GPU070", "GPU-1", 10, Severity.CRITICAL, "GPU", "", drains=(Drain("n2"),))
    idle = _f("GPU060", "n3", 100, kind="Node", ns="", releases=("n3",))
    move = _f("GPU051", "wait-0", 5, targets=("n2", "n3"))
    out, _ = make_coherent([sick, idle, move])
    got = _by(out, "GPU051")
    assert set(got.evidence["coherence"]) == {"kept_target", "because", "uses_released"}
    assert "GPU070 says to drain node n2" in got.recommendation
    assert "GPU060 advises releasing node n3" in got.recommendation


def test_an_audit_that_moves_a_job_onto_an_idle_tray_does_not_also_release_it() -> None:
    """GPU031 packs a MoE job into the NVLink domain of tray t0, which no pod held all window;
    GPU060 finds t0 idle. Both findings name the other and give one plan."""
    trays = [("t0", "c.1", ""), ("t1", "c.1", "moe-master-0"), ("t2", "c.2", "moe-worker-0")]
    series = [
        Series(
            gpu_labels(
                uuid=f"{t}-{i}",
                gpu=str(i),
                host=t,
                model="NVIDIA GB200",
                pod=pod,
                namespace="ml" if pod else "",
            ),
            act=[0.6 if pod else 0.0] * 30,
        )
        for t, _, pod in trays
        for i in range(4)
    ]
    nodes = [make_node(t, "NVIDIA-GB200", 4, clique=c) for t, c, _ in trays]
    pods = [make_pod(p, node=t, gpus=4, owner=("PyTorchJob", "moe")) for t, _, p in trays if p]
    job = {"metadata": {"name": "moe", "namespace": "ml"}, "spec": {"pytorchReplicaSpecs": {}}}
    inv = inventory(series, 30, pods=pods, nodes=nodes, lists={"pytorchjobs": [job]})
    checks = tuple(c for c in (by_code("GPU031"), by_code("GPU060")) if c is not None)
    result = run_checks(inv, Settings(), checks)
    move, idle = _by(result.findings, "GPU031"), _by(result.findings, "GPU060")
    assert "sat unheld for 100 % of the job's hours, so the move costs nothing extra" in (
        move.message
    )
    assert "GPU060 advises releasing node t0" in move.recommendation
    assert "GPU031 places PyTorchJob ml/moe on t0" in idle.recommendation
    assert idle.releases == ("t0",) and "t0" in move.targets


# ---- rule 2: one primary finding per resource -----------------------------------------------


def test_a_pod_with_several_findings_has_one_primary_and_related_codes() -> None:
    idle = _f("GPU001", "nb-0", 135, Severity.HIGH)
    big = _f("GPU021", "nb-0", 77, Severity.MEDIUM)
    other = _f("GPU021", "nb-1", 50, Severity.MEDIUM)
    out, _ = make_coherent([big, other, idle])
    first, second = _by(out, "GPU001"), _by(out, "GPU021", "nb-0")
    assert first.primary and first.related == ("GPU021",)
    assert not second.primary and second.related == ("GPU001",)
    lone = _by(out, "GPU021", "nb-1")
    assert lone.primary and lone.related == ()
    assert [f.code for f in out] == ["GPU001", "GPU021", "GPU021"]  # rank order kept


def test_same_name_in_another_namespace_or_kind_is_another_resource() -> None:
    out, _ = make_coherent([_f("GPU001", "x", 5), _f("GPU001", "x", 5, ns="web")])
    assert all(f.primary and not f.related for f in out)


# ---- rule 3: no GPU-hour counted twice ------------------------------------------------------


def test_overlapping_findings_count_their_largest_impact_once() -> None:
    idle = _f("GPU001", "nb-0", 135, Severity.HIGH)
    big = _f("GPU021", "nb-0", 77)
    waiting_a = _f("GPU050", "eval-0", 12)
    waiting_b = _f("GPU051", "eval-0", 12)
    out, totals = make_coherent([idle, big, waiting_a, waiting_b])
    assert totals.gpu_hours == pytest.approx(135 + 12)
    assert totals.cost == pytest.approx(2 * (135 + 12))
    assert totals.groups == 2
    assert _by(out, "GPU001").counted and not _by(out, "GPU021").counted
    # On a tie, the first in rank order counts.
    assert _by(out, "GPU050").counted and not _by(out, "GPU051").counted


def test_a_gpu_finding_and_its_holders_findings_share_gpu_hours() -> None:
    sick = _f("GPU070", "GPU-1", 168, Severity.HIGH, "GPU", "", pods=("ml/a-0",))
    also = _f("GPU070", "GPU-2", 168, Severity.MEDIUM, "GPU", "", pods=("ml/a-0",))
    idle = _f("GPU001", "a-0", 200)
    apart = _f("GPU001", "b-0", 10)
    out, totals = make_coherent([sick, also, idle, apart])
    assert totals.gpu_hours == pytest.approx(200 + 10)
    assert [f.code for f in out if f.counted] == ["GPU001", "GPU001"]


def test_the_total_is_derivable_from_the_json_report() -> None:
    """The schema's rule: the sum of `impact.gpu_hours` over findings with
    `counted_in_total` is `summary.findings_gpu_hours`."""
    lab = gpu_labels(uuid="G0", pod="nb-0", namespace="ml")
    s = Series(lab, act=[0.01] * 40, fb_used=20000.0, fb_free=61559.0, xids=[119])
    result = run_checks(inventory([s], 40), Settings())
    doc = json.loads(json_report.render(result))
    codes = sorted(f["code"] for f in doc["findings"])
    assert "GPU001" in codes and "GPU070" in codes
    counted = [f for f in doc["findings"] if f["counted_in_total"]]
    total = sum(f["impact"]["gpu_hours"] for f in counted)
    assert doc["summary"]["findings_gpu_hours"] == pytest.approx(total, abs=0.01)
    assert len(counted) == 1  # the sick GPU's holder is the idle pod: the same GPU-hours
    assert sum(f["impact"]["gpu_hours"] for f in doc["findings"]) > total


def test_a_gpu070_drain_reaches_the_audit_result() -> None:
    check = by_code("GPU070")
    assert check is not None
    lab = gpu_labels(uuid="G0", pod="a-0", namespace="ml")
    inv = inventory([Series(lab, act=[0.5] * 10, xids=[79])], 10)
    result = run_checks(inv, Settings(), (check,))
    (f,) = result.findings
    assert f.drains == (Drain("node-a"),) and f.primary and f.counted


def test_the_demo_shows_each_resource_once_with_its_related_codes(tmp_path: Path) -> None:
    out = tmp_path / "r.txt"
    args = ["scan", "--demo", "--all", "-f", "table", "-o", str(out), "-q"]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    details = out.read_text().split("\n\n#")
    for pod, code in (
        ("notebooks/nb-idle-0-0", "GPU021"),
        ("search/embed-stale-0", "GPU021"),
        ("research/dra-idle-0", "GPU021"),
        ("research/scratch-gpu", "GPU021"),
        ("batch/nightly-embed-", "GPU021"),
        ("serving/fixable-llm-", "GPU021"),
        ("serving/ghost-llm-", "GPU021"),
        ("research/eval-llm-0", "GPU051"),
    ):
        (detail,) = [d for d in details if f"Pod {pod}" in d.split("\n")[1]]
        assert f"Also on this resource: {code} (its message is in the JSON" in detail, detail
    doc = json.loads(runner.invoke(app, ["scan", "--demo", "-f", "json", "-q"]).stdout)
    # Each finding that is not its resource's primary is named under the primary, once.
    under = [f for f in doc["findings"] if not f["primary"]]
    assert out.read_text().count("Also on this resource:") == len(under) == 8
    rows = [f for f in doc["findings"] if f["primary"]]
    assert len(
        {(f["resource"]["kind"], f["resource"]["namespace"], f["resource"]["name"]) for f in rows}
    ) == len(rows)


def test_the_demo_places_no_work_where_a_finding_drains(tmp_path: Path) -> None:
    doc = json.loads(runner.invoke(app, ["scan", "--demo", "-f", "json", "-q"]).stdout)
    drained = {(d["node"], d["gpu"]) for f in doc["findings"] for d in f["drains"]}
    assert ("gb200-node-002", "") in drained  # the failed row remap: RMA
    nodes = {n for n, _ in drained}
    for f in doc["findings"]:
        hit = set(f["targets"]) & nodes
        if hit:
            assert "coherence" in f["evidence"], f["code"]
            assert "Note: GPU070 says" in f["recommendation"] or "(Not " in f["recommendation"]
    # The lone XID 63 and the pending remap on h100-node-002 drain nothing.
    gpu070 = [f for f in doc["findings"] if f["code"] == "GPU070"]
    pending = [f for f in gpu070 if f["evidence"]["action"] == "reset the GPU when its work ends"]
    assert len(pending) == 2 and all(f["drains"] == [] for f in pending)


def test_explain_documents_how_reports_combine_findings() -> None:
    res = runner.invoke(app, ["explain", "GPU051"])
    assert res.exit_code == 0
    assert "How it decides" in res.stdout and "In reports" in res.stdout
    assert "no recommendation places work on a node" in res.stdout
    assert "counts no GPU-hour twice" in res.stdout
    assert "places work on a node another finding says to release" in res.stdout
