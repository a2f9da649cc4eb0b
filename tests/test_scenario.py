from __future__ import annotations

import ast
import hashlib
import io
import json
import tempfile
from array import array
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from gpuaudit import snapshot
from gpuaudit.cli import app
from gpuaudit.scenario import cases, generate, to_snapshot, write_openmetrics, write_snapshot
from gpuaudit.scenario import teams as teams_of
from gpuaudit.scenario.cases import Notebook, On, Plant, Waiting, finds, near_miss
from gpuaudit.scenario.workloads import pattern
from tests.support.paths import DEMO, DEMO_TRUTH

runner = CliRunner()


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_same_seed_gives_identical_files(tmp_path: Path) -> None:
    outs = []
    for name in ("a", "b"):
        d = tmp_path / name
        d.mkdir()
        res = runner.invoke(
            app,
            [
                "scenario",
                "--gpus",
                "60",
                "--days",
                "2",
                "--seed",
                "7",
                "-o",
                str(d / "s.json.gz"),
                "--truth",
                str(d / "t.json"),
                "--k8s-dir",
                str(d / "k8s"),
            ],
        )
        assert res.exit_code == 0, res.output
        outs.append(
            [_digest(d / "s.json.gz"), _digest(d / "t.json"), _digest(d / "k8s" / "pods.json")]
        )
    assert outs[0] == outs[1]


def test_different_seeds_differ() -> None:
    a = to_snapshot(generate(60, 1, 1)).to_json()
    b = to_snapshot(generate(60, 1, 2)).to_json()
    assert json.dumps(a, sort_keys=True) != json.dumps(b, sort_keys=True)


def test_scale_and_node_types() -> None:
    sc = generate(400, 7, 1)
    kinds = {n.kind for n in sc.nodes}
    assert kinds == {"h100", "a100-mig", "l40s", "gb200"}
    total = sum(n.gpu_count for n in sc.nodes)
    # The base layout is about the number asked for (400 here); the planted cases add 68: the
    # health case an L40S node (4), the placement cases three GB200 trays (12), two L40S nodes
    # (8) and a tainted H100 node (8), the queue cases three GB200 pool nodes (12: two
    # research, one weekday, the latter only in windows of a week or more), the DRA cases an
    # L40S node (4), the attribution cases two time-sliced L40S nodes (8) and an A100 MIG node
    # without pod labels (8), the power cases an L40S node (4), and the join-over-time cases
    # another A100 MIG node without pod labels (8); then the KAI cases a GB200 node (4), the
    # owner cases an L40S node (4), the HAMi cases two L40S nodes (8), the further KAI cases
    # two L40S nodes (8) and the node pool cases three L40S nodes (12); the HAMi case without
    # an exporter an L40S node (4), the throttling cases two H100 nodes (16), the cause cases
    # an H100 node (8) and the serving cases an L40S node (4).
    assert 380 <= total <= 580
    assert {n.name for n in sc.nodes} >= {
        "l40s-ts-000",
        "l40s-ts-001",
        "a100-nolabel-000",
        "a100-nolabel-001",
    }
    assert 40 <= len(sc.nodes) <= 100
    assert any(s.profile == "1g.10gb" for s in sc.slots)


def test_bundled_demo_matches_the_generator(tmp_path: Path) -> None:
    """The committed demo is exactly what `gpuaudit scenario` makes, byte for byte (rebuild it
    if this fails: `gpuaudit scenario --gpus 400 --days 7 --seed 1 -o
    fixtures/demo.snapshot.json.gz --truth fixtures/demo.truth.json`)."""
    assert DEMO.stat().st_size < 5 * 1024 * 1024
    demo = snapshot.read(DEMO)
    assert demo.manifest["format_version"] == snapshot.FORMAT_VERSION
    fresh = tmp_path / "demo.snapshot.json.gz"
    write_snapshot(generate(400, 7, 1), fresh, "helm", demo.manifest["generated_by"])
    assert fresh.read_bytes() == DEMO.read_bytes()
    truth = json.loads(DEMO_TRUTH.read_text())
    assert truth["planted"]["GPU001"]


def test_openmetrics_is_well_formed(tmp_path: Path) -> None:
    sc = generate(24, 1, 3, scrape_s=600)
    path = tmp_path / "s.om"
    with open(path, "w") as fh:
        n = write_openmetrics(sc, fh)
    text = path.read_text()
    assert text.endswith("# EOF\n") and not text.endswith("\n\n")
    lines = [ln for ln in text.splitlines() if not ln.startswith("#")]
    assert len(lines) == n
    ts = [int(ln.rsplit(" ", 1)[1]) for ln in lines]
    assert all(sc.start < t < sc.end for t in ts)
    assert all(t % 3600 != 0 for t in ts)  # never on a bucket edge


@pytest.mark.slow
def test_an_odd_scrape_interval_samples_on_half_seconds() -> None:
    """At 15 s the samples fall 7.5 s past each mark: the text and the arrays agree, and no
    sample lies on a step's edge."""
    from gpuaudit.scenario.emit import openmetrics_samples

    sc = generate(12, 1, 3, scrape_s=15)
    # Millions of samples: the text goes through a file and the stamps into arrays, not lists.
    with tempfile.TemporaryFile("w+", encoding="utf-8") as fh:
        n = write_openmetrics(sc, fh)
        fh.seek(0)
        stamps = array("q")
        for ln in fh:
            if ln[0] == "#":
                continue
            t = ln.rstrip("\n").rsplit(" ", 1)[1]
            assert t.endswith(".5"), ln
            stamps.append(int(t[:-2]) * 1000 + 500)
    assert len(stamps) == n
    written = np.sort(np.frombuffer(stamps, dtype=np.int64))
    del stamps
    arrays = np.sort(np.concatenate([ts for *_, ts, _ in openmetrics_samples(sc)]).astype(np.int64))
    assert np.array_equal(arrays, written)
    assert set(np.unique(arrays % 15_000).tolist()) == {7_500}


@pytest.mark.parametrize("scrape", [0, 7, 3600])
def test_a_scrape_interval_that_does_not_divide_half_an_hour_is_refused(scrape: int) -> None:
    with pytest.raises(ValueError, match="dividing 30 min"):
        generate(12, 1, 3, scrape_s=scrape)


def test_openmetrics_by_hours_adds_up_to_the_whole() -> None:
    """Backfilling a large scenario a day at a time gives exactly the samples of one file."""
    sc = generate(40, 2, 3, scrape_s=600)
    whole = io.StringIO()
    n = write_openmetrics(sc, whole)
    parts: list[str] = []
    total = 0
    for day in range(2):
        out = io.StringIO()
        total += write_openmetrics(sc, out, hours=(24 * day, 24 * day + 24))
        parts += [x for x in out.getvalue().splitlines() if not x.startswith("#")]
    assert total == n > 0
    samples = [x for x in whole.getvalue().splitlines() if not x.startswith("#")]
    assert sorted(parts) == sorted(samples)


def _truth_names(truth: dict[str, Any], code: str, miss: str) -> list[str]:
    key = "near_misses" if miss else "planted"
    return [e["name"] for e in truth[key].get(code, []) if e.get("why", "") == miss]


def test_every_declared_base_case_is_in_the_truth() -> None:
    """The demo places every declared case, and its truth says what each declaration says."""
    sc = generate(400, 7, 1)
    for group in cases.BASE:
        for case in group:
            name = case.name.format(i=0)
            assert any(p.name.startswith(name) for p in sc.pods), name
            for t in case.truth:
                listed = _truth_names(sc.truth, t.code, t.near_miss)
                assert any(n.startswith(name) for n in listed), (name, t)


def test_a_planted_case_is_one_declaration(monkeypatch: pytest.MonkeyPatch) -> None:
    """Appending a `Plant` (and a `Waiting`) is all it takes to plant a case and its truth."""
    extra = Plant(
        name="nb-extra-{i}",
        on=On("l40s"),
        workload=Notebook(),
        activity=pattern("idle"),
        truth=(finds("GPU001"), near_miss("GPU021", "declared in a test")),
    )
    waiting = Waiting(job="extra-wait", namespace="research", gpus=2, waited_h=4)
    monkeypatch.setattr(cases, "BASE", (*cases.BASE, (extra,)))
    monkeypatch.setattr(cases, "PENDING", (*cases.PENDING, waiting))
    sc = generate(60, 2, 7)
    pods = {p.name: p for p in sc.pods}
    assert pods["nb-extra-0-0"].node.startswith("l40s-node-")
    assert pods["extra-wait-0"].phase == "Pending"
    assert "nb-extra-0-0" in _truth_names(sc.truth, "GPU001", "")
    assert "nb-extra-0-0" in _truth_names(sc.truth, "GPU021", "declared in a test")


def test_scenario_modules_import_without_a_circle() -> None:
    """The scenario's modules import each other in one direction (the package's `__init__`
    aside), counting imports anywhere in a module, not only at its top."""
    pkg = Path(cases.__file__).parent
    mods = {f.stem for f in pkg.glob("*.py")} - {"__init__"}
    deps: dict[str, set[str]] = {}
    for mod in mods:
        deps[mod] = set()
        for node in ast.walk(ast.parse((pkg / f"{mod}.py").read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "gpuaudit.scenario":
                deps[mod] |= {a.name for a in node.names} & mods
            elif isinstance(node, ast.ImportFrom) and node.module:
                deps[mod] |= {node.module.removeprefix("gpuaudit.scenario.")} & mods
            elif isinstance(node, ast.Import):
                deps[mod] |= {a.name.removeprefix("gpuaudit.scenario.") for a in node.names} & mods
    done: set[str] = set()

    def visit(mod: str, path: tuple[str, ...]) -> None:
        assert mod not in path, " -> ".join((*path, mod))
        if mod not in done:
            for dep in sorted(deps[mod]):
                visit(dep, (*path, mod))
            done.add(mod)

    for mod in sorted(mods):
        visit(mod, ())


def test_every_workload_pod_carries_a_team_label() -> None:
    """`--group-by-label team` (the docs' and the CronJob's label) has a team for every pod a
    scenario runs; only dcgm-exporter's own pods have none."""
    sc = generate(60, 2, 5)
    assert sc.pods
    teams = {p.labels.get(teams_of.LABEL) for p in sc.pods}
    assert None not in teams
    assert teams <= {*teams_of.TEAMS.values(), teams_of.DEFAULT}
    assert {p.labels[teams_of.LABEL] for p in sc.pods if p.namespace == "serving"} == {"inference"}
    pods = to_snapshot(sc).kubernetes["pods"]
    unlabelled = {
        p["metadata"]["namespace"]
        for page in pods
        for p in page["items"]
        if "team" not in p["metadata"].get("labels", {})
    }
    assert unlabelled == {"gpu-operator"}
