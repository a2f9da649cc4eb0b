from __future__ import annotations

import hashlib
import json
from pathlib import Path

from typer.testing import CliRunner

from gpuaudit import snapshot
from gpuaudit.cli import app
from gpuaudit.scenario import generate, to_snapshot, write_snapshot
from tests.conftest import DEMO, DEMO_TRUTH

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
    assert 380 <= total <= 420
    assert 40 <= len(sc.nodes) <= 70
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
    from gpuaudit.scenario import write_openmetrics

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


def test_openmetrics_by_hours_adds_up_to_the_whole() -> None:
    """Backfilling a large scenario a day at a time gives exactly the samples of one file."""
    import io

    from gpuaudit.scenario import write_openmetrics

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
