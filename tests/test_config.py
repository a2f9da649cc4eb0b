"""One configuration for a run: flag > environment > gpuaudit.toml > default for every option,
checked before any data is read."""

from __future__ import annotations

import json
import os
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from gpuaudit import report
from gpuaudit.app import config, pipeline
from gpuaudit.app.config import Config
from gpuaudit.app.options import BY_FLAG, OPTIONS, Kind
from gpuaudit.checks.findings import Severity
from gpuaudit.cli import app
from gpuaudit.cli.scan import Format
from tests.support.paths import ROOT

runner = CliRunner()


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No GPUAUDIT_ variable from the calling shell, no gpuaudit.toml but the test's."""
    for name in [n for n in os.environ if n.startswith("GPUAUDIT_")]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


def _resolved(
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
    env: dict[str, str] | None = None,
    toml: str = "",
) -> Config:
    """The configuration `scan ARGS` resolves, with the pipeline replaced by a stub."""
    seen: list[Config] = []

    def run(cfg: Config, **_: Any) -> pipeline.Outcome:
        seen.append(cfg)
        raise typer.Exit(0)

    monkeypatch.setattr(pipeline, "run", run)
    if toml:
        Path("gpuaudit.toml").write_text(toml)
    res = runner.invoke(app, ["scan", *args], env=env)
    assert res.exit_code == 0, res.output
    return seen[0]


LAYERS = ["default", "toml", "env", "flag"]


def _layered(layer: str, toml: str, env: dict[str, str], flag: list[str]) -> dict[str, Any]:
    """Everything up to `layer`: each higher layer is set on top of the lower ones."""
    upto = LAYERS.index(layer)
    return {
        "toml": toml if upto >= 1 else "",
        "env": env if upto >= 2 else {},
        "args": flag if upto >= 3 else [],
    }


@pytest.mark.parametrize(
    ("layer", "expected"),
    [("default", None), ("toml", Severity.HIGH), ("env", Severity.MEDIUM), ("flag", Severity.LOW)],
)
def test_a_string_option_follows_the_precedence(
    monkeypatch: pytest.MonkeyPatch, layer: str, expected: Severity | None
) -> None:
    kw = _layered(
        layer, '[scan]\nfail_on = "high"\n', {"GPUAUDIT_FAIL_ON": "medium"}, ["--fail-on", "low"]
    )
    cfg = _resolved(monkeypatch, ["--demo", *kw["args"]], kw["env"], kw["toml"])
    assert cfg.fail_on is expected


@pytest.mark.parametrize(
    ("layer", "expected"), [("default", False), ("toml", True), ("env", False), ("flag", True)]
)
def test_a_bool_option_follows_the_precedence(
    monkeypatch: pytest.MonkeyPatch, layer: str, expected: bool
) -> None:
    # The environment turns off what the file turned on; the flag turns it on again.
    kw = _layered(layer, "[scan]\nstrict = true\n", {"GPUAUDIT_STRICT": "0"}, ["--strict"])
    cfg = _resolved(monkeypatch, ["--demo", *kw["args"]], kw["env"], kw["toml"])
    assert cfg.strict is expected


@pytest.mark.parametrize(
    ("layer", "expected"),
    [
        ("default", {}),
        ("toml", {"A": "1", "B": "2"}),
        ("env", {"C": "3", "D": "4"}),
        ("flag", {"E": "5"}),
    ],
)
def test_a_repeatable_option_follows_the_precedence(
    monkeypatch: pytest.MonkeyPatch, layer: str, expected: dict[str, str]
) -> None:
    kw = _layered(
        layer,
        '[scan]\nheader = ["A: 1", "B: 2"]\nnamespace = ["ml"]\n',
        {"GPUAUDIT_HEADER": "C:3\nD:4"},
        ["-H", "E: 5"],
    )
    args = ["--prometheus-url", "http://prometheus.invalid:9090", *kw["args"]]
    cfg = _resolved(monkeypatch, args, kw["env"], kw["toml"])
    assert cfg.live is not None
    assert cfg.live.headers == expected
    assert cfg.live.namespaces == (("ml",) if kw["toml"] else ())


@pytest.mark.parametrize(
    ("layer", "expected"),
    [("default", None), ("toml", "r.json"), ("env", "e.json"), ("flag", "f.json")],
)
def test_a_path_option_follows_the_precedence(
    monkeypatch: pytest.MonkeyPatch, layer: str, expected: str | None
) -> None:
    kw = _layered(
        layer, '[scan]\noutput = "r.json"\n', {"GPUAUDIT_OUTPUT": "e.json"}, ["-o", "f.json"]
    )
    cfg = _resolved(monkeypatch, ["--demo", *kw["args"]], kw["env"], kw["toml"])
    assert cfg.output == (Path(expected) if expected else None)


@pytest.mark.parametrize(
    ("layer", "expected"), [("default", 120.0), ("toml", 5.0), ("env", 7.0), ("flag", 9.0)]
)
def test_a_number_option_follows_the_precedence(
    monkeypatch: pytest.MonkeyPatch, layer: str, expected: float
) -> None:
    kw = _layered(layer, "[scan]\ntimeout = 5\n", {"GPUAUDIT_TIMEOUT": "7"}, ["--timeout", "9"])
    args = ["--prometheus-url", "http://prometheus.invalid:9090", *kw["args"]]
    cfg = _resolved(monkeypatch, args, kw["env"], kw["toml"])
    assert cfg.live is not None and cfg.live.limits.timeout_s == expected


def test_relative_paths_in_the_file_are_relative_to_its_folder(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "g.toml").write_text('[scan]\noutput = "r.json"\nbaseline = "/abs/b.json"\n')
    cfg = _resolved(monkeypatch, ["--demo", "--config", "conf/g.toml"])
    assert cfg.output == Path("conf/r.json")
    assert cfg.baseline == Path("/abs/b.json")


def test_the_file_can_name_the_source_and_a_flag_replaces_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    toml = '[scan]\nprometheus_url = "http://prometheus.invalid"\nbaseline = "b.json"\n'
    cfg = _resolved(monkeypatch, [], toml=toml)
    assert cfg.live is not None and cfg.live.prometheus_url == "http://prometheus.invalid"
    assert cfg.baseline == Path("b.json")
    # A source or a comparison given by flag replaces the file's instead of clashing with it.
    cfg = _resolved(monkeypatch, ["--demo", "--previous", "p.json"], toml=toml)
    assert cfg.live is None and cfg.snapshot == config.demo_path()
    assert (cfg.baseline, cfg.previous) == (None, Path("p.json"))


def test_window_and_checks_from_the_file_and_the_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    toml = (
        '[scan]\nwindow = "2d"\nstep = 1800\nend = 2026-11-23T00:00:00Z\n'
        "[checks]\nidle_activity = 0.1\n"
    )
    end = datetime(2026, 11, 23, tzinfo=timezone.utc).timestamp()
    live = ["--prometheus-url", "http://prometheus.invalid"]  # --step shapes a live collection
    cfg = _resolved(monkeypatch, [*live, "--set", "idle_tail_hours=12"], toml=toml)
    s = cfg.settings
    assert (s.window_s, s.step_s, s.end) == (172800, 1800, end)
    assert (s.checks["idle_activity"], s.checks["idle_tail_hours"]) == (0.1, 12.0)
    cfg = _resolved(monkeypatch, [*live, "--window", "1d"], {"GPUAUDIT_STEP": "1h"}, toml)
    assert (cfg.settings.window_s, cfg.settings.step_s) == (86400, 3600)


def test_snapshot_save_reads_the_file_too(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Config] = []

    def save(cfg: Config, file: Path, **_: Any) -> int:
        seen.append(cfg)
        return 0

    monkeypatch.setattr(pipeline, "save_snapshot", save)
    Path("gpuaudit.toml").write_text(
        '[scan]\nprometheus_url = "http://prometheus.invalid"\nwindow = "2d"\nquiet = true\n'
    )
    res = runner.invoke(app, ["snapshot", "save", "out.json", "--no-kubernetes"])
    assert res.exit_code == 0, res.output
    assert res.output == ""
    cfg = seen[0]
    assert cfg.live is not None and cfg.live.prometheus_url == "http://prometheus.invalid"
    assert cfg.live.no_kubernetes and cfg.quiet and cfg.settings.window_s == 172800


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ('prometheus_token = "s3cret"', "prometheus_token is not read from gpuaudit.toml"),
        ('webhook = "https://hooks.example"', "use --webhook or GPUAUDIT_WEBHOOK"),
        ('set = ["idle_activity=1"]', "[checks]"),
        ("colour = true", "unknown setting scan.colour"),
        ('namespace = "ml"', "[scan] namespace must be a list of strings"),
        ('strict = "yes"', "[scan] strict must be true or false"),
        ('format = "xml"', "[scan] format must be one of table, json"),
        ('fail_on = "urgent"', "--fail-on: unknown severity 'urgent'"),
    ],
)
def test_bad_file_values_are_one_clear_error(toml: str, message: str) -> None:
    Path("gpuaudit.toml").write_text(f"[scan]\n{toml}\n")
    res = runner.invoke(app, ["scan", "--demo"])
    assert res.exit_code == 2, res.output
    assert message in res.output and "Traceback" not in res.output


@pytest.mark.parametrize(
    ("args", "env"),
    [
        (["--baseline", "a.json", "--previous", "b.json"], {}),
        ([], {"GPUAUDIT_BASELINE": "a.json", "GPUAUDIT_PREVIOUS": "b.json"}),
    ],
)
def test_baseline_and_previous_clash_before_any_collection(
    monkeypatch: pytest.MonkeyPatch, args: list[str], env: dict[str, str]
) -> None:
    def collect(*_: object, **__: object) -> None:
        raise AssertionError("a live collection was attempted")

    monkeypatch.setattr(pipeline.snapshot, "collect_live", collect)
    url = ["--prometheus-url", "http://127.0.0.1:9", "--no-kubernetes"]
    res = runner.invoke(app, ["scan", *url, *args], env=env)
    assert res.exit_code == 2, res.output
    assert "use --baseline (CI) or --previous (trend), not both" in res.output


def test_a_flag_replaces_the_environments_choice_as_it_replaces_the_files(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A deployment sets its source and connection in the environment (a CronJob, CI
    variables); a command that audits a snapshot chooses it by flag: no clash, and the
    environment's connection settings go with the URL the flag replaced."""
    env = {
        "GPUAUDIT_PROMETHEUS_URL": "http://prometheus.invalid",
        "GPUAUDIT_PROMETHEUS_TOKEN": "t0ken",
        "GPUAUDIT_TIMEOUT": "30",
        "GPUAUDIT_BASELINE": "a.json",
    }
    cfg = _resolved(monkeypatch, ["--demo", "--previous", "b.json"], env)
    assert cfg.live is None and cfg.snapshot == config.demo_path()
    assert (cfg.baseline, cfg.previous) == (None, Path("b.json"))
    cfg = _resolved(monkeypatch, [], env)
    assert cfg.live is not None and cfg.live.token == "t0ken"
    assert cfg.live.limits.timeout_s == 30.0


def test_unknown_option_names_are_a_bug_not_a_user_error() -> None:
    with pytest.raises(TypeError, match="not options of gpuaudit: colour"):
        config.for_scan({"demo": True, "colour": True})


def test_the_option_table_the_command_line_and_the_docs_agree() -> None:
    root = typer.main.get_command(app)
    scan = root.commands["scan"]  # type: ignore[attr-defined]
    save = root.commands["snapshot"].commands["save"]  # type: ignore[attr-defined]
    for command, declared in ((scan, OPTIONS), (save, [o for o in OPTIONS if not o.scan_only])):
        flags = {p.opts[0]: p for p in command.params if p.param_type_name == "option"}
        assert [f for f in flags if f in BY_FLAG] == [o.flag for o in declared]
        for o in declared:
            param = flags[o.flag]
            assert param.envvar == o.envvar and param.help == o.help, o.flag
            assert param.default == (False if o.kind is Kind.FLAG else o.default), o.flag
    assert tuple(f.value for f in Format) == tuple(report.FORMATS)
    doc = (ROOT / "docs" / "config.md").read_text()
    keys = set(re.findall(r"^\| `(\w+)` \|", doc, re.M))
    assert keys == set(config.SCAN_KEYS)
    for o in OPTIONS:
        if o.in_file != "scan":
            assert f"`{o.flag}`" in doc, o.flag


def test_pipeline_run_returns_the_outcome_and_prints_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r.json"
    cfg = config.for_scan({"demo": True, "format": "json", "output": out, "fail_on": "high"})
    outcome = pipeline.run(cfg)
    assert capsys.readouterr() == ("", "")
    assert outcome.exit_code == 1
    assert set(outcome.timings) == {"load", "inventory", "checks", "render"}
    assert json.loads(out.read_text())["findings"]
    assert outcome.summary_line().startswith(f"gpuaudit: {len(outcome.result.findings)} findings")


def test_stage_timings_for_the_benchmarks() -> None:
    res = runner.invoke(app, ["scan", "--demo", "-q", "-f", "json"], env={"GPUAUDIT_TIMINGS": "1"})
    assert res.exit_code == 0
    line = next(ln for ln in res.output.splitlines() if ln.startswith("gpuaudit-timings: "))
    assert set(json.loads(line.removeprefix("gpuaudit-timings: "))) == {
        "load",
        "inventory",
        "checks",
        "render",
    }
