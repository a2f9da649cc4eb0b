"""The command line has no surprises: usage errors are gpuaudit's own one-line errors with exit
code 2, help shows no type placeholders, `--debug`, `--quiet` and `--config` work where users
type them, every environment variable belongs to one option, `snapshot show` exists, and
`explain` never sends users to a Python module."""

from __future__ import annotations

import gzip
import json
import re
import sys
import typing
from pathlib import Path

import pytest
import typer
from typer.models import OptionInfo
from typer.testing import CliRunner

from gpuaudit import checks
from gpuaudit.app.options import OPTIONS
from gpuaudit.cli import app, main
from gpuaudit.console.params import environment, environment_table
from gpuaudit.core import debuglog
from tests.support.paths import DEMO, ROOT

runner = CliRunner()

COMMANDS = [
    [],
    ["scan"],
    ["snapshot"],
    ["snapshot", "save"],
    ["snapshot", "show"],
    ["snapshot", "index"],
    ["rules"],
    ["checks"],
    ["explain"],
    ["scenario"],
]


@pytest.fixture(autouse=True)
def _no_debug_left() -> object:
    yield
    debuglog.configure(False)


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["scan", "--bogus"], "no such option: --bogus (see 'gpuaudit scan --help')"),
        (["snapshot", "save"], "missing argument 'FILE' (see 'gpuaudit snapshot save --help')"),
        (["explain"], "missing argument 'CODE' (see 'gpuaudit explain --help')"),
        (["bogus"], "no such command 'bogus' (see 'gpuaudit --help')"),
        (["scan", "--fail-on"], "option '--fail-on' requires an argument"),
        (
            ["snapshot", "show", "a", "b"],
            "got unexpected extra argument(s) (b) (see 'gpuaudit snapshot show --help')",
        ),
    ],
)
def test_usage_errors_are_one_line_with_exit_code_2(args: list[str], line: str) -> None:
    res = runner.invoke(app, args)
    assert res.exit_code == 2
    assert res.stderr == f"gpuaudit: error: {line}\n"
    assert "╭" not in res.output and "Usage:" not in res.output


def test_a_bad_value_is_one_line_naming_the_option() -> None:
    res = runner.invoke(app, ["scan", "--demo", "--timeout", "soon"])
    assert res.exit_code == 2 and len(res.stderr.splitlines()) == 1
    assert res.stderr == (
        "gpuaudit: error: --timeout must be a number, got 'soon' (see 'gpuaudit scan --help')\n"
    )


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(a) or "gpuaudit")
def test_help_shows_no_type_placeholders(args: list[str]) -> None:
    res = runner.invoke(app, [*args, "--help"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    for stray in ("<bool>", "<str>", "<path>", "<int>", "<float>", "{", "list[", "BOOLEAN"):
        assert stray not in res.output, (stray, res.output)


def test_help_names_what_each_value_is() -> None:
    out = runner.invoke(app, ["scan", "--help"], env={"COLUMNS": "200"}).output
    for shown in ("--prometheus-url        URL", "--kubeconfig ", "FILE", "DURATION", "SECONDS"):
        assert shown in out, shown
    assert "table|json|markdown|html|junit" in out
    assert (
        "Usage: gpuaudit snapshot save [OPTIONS] FILE"
        in runner.invoke(app, ["snapshot", "save", "--help"], env={"COLUMNS": "200"}).output
    )


def test_debug_quiet_and_config_work_on_the_subcommands(tmp_path: Path) -> None:
    cfg = tmp_path / "g.toml"
    cfg.write_text('[scan]\nformat = "json"\n')
    res = runner.invoke(app, ["scan", "--demo", "--debug", "--quiet", "--config", str(cfg)])
    assert res.exit_code == 0, res.output
    assert res.stderr == "" and json.loads(res.stdout)["findings"]
    assert debuglog.enabled()
    debuglog.configure(False)
    url = ["--prometheus-url", "http://127.0.0.1:9", "--no-kubernetes", "--timeout", "2"]
    for args in (["scan", *url, "--debug"], ["snapshot", "save", str(tmp_path / "s"), *url, "-q"]):
        res = runner.invoke(app, [*args, "--debug"] if "--debug" not in args else args)
        assert res.exit_code == 2
        assert "gpuaudit: debug: " in res.stderr, res.stderr
        debuglog.configure(False)
    # Still on the root, and from the one variable.
    res = runner.invoke(app, ["--debug", "scan", *url])
    assert "gpuaudit: debug: " in res.stderr
    debuglog.configure(False)
    res = runner.invoke(app, ["scan", *url], env={"GPUAUDIT_DEBUG": "1"})
    assert "gpuaudit: debug: " in res.stderr


def test_debug_is_not_a_setting_of_the_file(tmp_path: Path) -> None:
    cfg = tmp_path / "g.toml"
    cfg.write_text("[scan]\ndebug = true\n")
    res = runner.invoke(app, ["scan", "--demo", "--config", str(cfg)])
    assert res.exit_code == 2
    assert "use --debug or GPUAUDIT_DEBUG" in res.stderr


def test_every_environment_variable_belongs_to_one_option() -> None:
    shared = {o.envvar for o in OPTIONS if not o.scan_only} | {debuglog.ENVVAR}
    for var, uses in environment(app).items():
        assert len({flag for _, flag in uses}) == 1, (var, uses)
        commands = {c for c, _ in uses}
        if len(commands) > 1:
            # Only `scan`, `snapshot save` and `fix` (which takes scan's sources and settings)
            # share names, for the options they share.
            assert var in shared or commands <= {"gpuaudit scan", "gpuaudit fix"}, (var, uses)
            assert commands <= {
                "gpuaudit",
                "gpuaudit scan",
                "gpuaudit snapshot save",
                "gpuaudit fix",
            }
    env = environment(app)
    assert {c for c, _ in env["GPUAUDIT_OUTPUT"]} == {"gpuaudit scan"}
    assert {c for c, _ in env["GPUAUDIT_END"]} == {
        "gpuaudit scan",
        "gpuaudit snapshot save",
        "gpuaudit fix",
    }
    assert env["GPUAUDIT_FIX_OUTPUT"] == [("gpuaudit fix", "--output")]
    assert env["GPUAUDIT_SCENARIO_OUTPUT"] == [("gpuaudit scenario", "--output")]
    assert env["GPUAUDIT_SCENARIO_END"] == [("gpuaudit scenario", "--end")]
    assert env["GPUAUDIT_RULES_OUTPUT"] == [("gpuaudit rules", "--output")]
    assert "GPUAUDIT_DEBUG_LOG" not in env


def test_a_variable_for_scan_leaves_the_other_commands_alone(tmp_path: Path) -> None:
    out = tmp_path / "rules.yaml"
    env = {"GPUAUDIT_OUTPUT": str(tmp_path / "scan-report.json"), "GPUAUDIT_FORMAT": "json"}
    res = runner.invoke(app, ["rules", "-o", str(out)], env=env)
    assert res.exit_code == 0 and out.exists()
    res = runner.invoke(app, ["rules"], env={"GPUAUDIT_RULES_FORMAT": "rules", **env})
    assert res.exit_code == 0 and "\ngroups:\n" in res.stdout
    assert "kind: PrometheusRule" not in res.stdout
    assert not (tmp_path / "scan-report.json").exists()


def test_the_readme_lists_the_environment_variables() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert environment_table(app) in readme


def test_an_internal_error_names_the_real_debug_switch(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from gpuaudit.app import pipeline

    def broken(*_: object, **__: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(pipeline, "run", broken)
    monkeypatch.setattr(sys, "argv", ["gpuaudit", "scan", "--demo"])
    monkeypatch.delenv("GPUAUDIT_DEBUG", raising=False)
    with pytest.raises(SystemExit) as ended:
        main()
    assert ended.value.code == 2
    err = capsys.readouterr().err
    assert err == (
        "gpuaudit: internal error: RuntimeError: boom. This is a bug; rerun with --debug (or "
        "GPUAUDIT_DEBUG=1) for the traceback, and report it.\n"
    )
    monkeypatch.setenv("GPUAUDIT_DEBUG", "1")
    with pytest.raises(RuntimeError, match="boom"):
        main()
    monkeypatch.delenv("GPUAUDIT_DEBUG")
    monkeypatch.setattr(sys, "argv", ["gpuaudit", "scan", "--demo", "--debug"])
    with pytest.raises(RuntimeError, match="boom"):
        main()


def test_explain_never_points_at_a_python_module() -> None:
    for check in checks.discover():
        text = runner.invoke(app, ["explain", check.code]).stdout
        assert not re.search(r"\bgpuaudit\.[a-z_]+\.", text), check.code
        assert ".py" not in text, check.code


def test_snapshot_show_says_what_a_snapshot_holds() -> None:
    res = runner.invoke(app, ["snapshot", "show", str(DEMO)])
    assert res.exit_code == 0, res.output
    out = res.stdout
    assert out.startswith(f"snapshot {DEMO} (format 2, written by gpuaudit ")
    for line in (
        "cluster     scenario-1",
        "source      scenario: gpuaudit scenario --gpus 400 --days 7 --seed 1",
        "window      168 h, 2026-11-16 00:00 to 2026-11-23 00:00 UTC, step 1 h",
        "backend     scenario, pod label spelling helm, 18 DCGM metrics (+8 other metrics), MIG "
        "yes,",
        "queries     50 queries answered, 50 answers in all",
        "complete    yes: every source answered in full",
        "warnings    none",
    ):
        assert line in out, line
    assert re.search(
        r"^  act_count +window +1 answer +1,038 series  DCGM_FI_PROF_GR_ENGINE_ACTIVE$", out, re.M
    )
    # A query id longer than its column still stands apart from its kind.
    # (The window form in a demo written before the hourly one, issue 37.)
    long_id = r"^  thermal_violation_increase(_hourly)? +(window|hourly) +1 answer +16 series  "
    assert re.search(long_id, out, re.M)
    assert re.search(r"^  pods +573  ok$", out, re.M)
    help_text = runner.invoke(app, ["snapshot", "--help"], env={"COLUMNS": "200"}).output
    assert "save" in help_text and "show" in help_text


def test_snapshot_show_of_an_incomplete_hostile_snapshot(tmp_path: Path) -> None:
    lines = gzip.decompress(DEMO.read_bytes()).decode().splitlines()
    head = json.loads(lines[0])
    head["manifest"].update(
        complete=False,
        incomplete_reasons=["Kubernetes pods: forbidden \x1b[31mred\x1b[0m"],
        cluster="evil\x1b]0;title\x07",
        warnings=["partial answer from store-2"],
    )
    path = tmp_path / "s.json"
    path.write_text("\n".join([json.dumps(head), *lines[1:]]) + "\n")
    out = runner.invoke(app, ["snapshot", "show", str(path)]).stdout
    assert "complete    NO: Kubernetes pods: forbidden \\x1b[31mred\\x1b[0m" in out
    assert "cluster     evil\\x1b]0;title\\x07" in out
    assert "warnings    1\n  partial answer from store-2" in out
    assert "\x1b" not in out


def test_snapshot_show_of_a_file_that_is_not_a_snapshot(tmp_path: Path) -> None:
    bad = tmp_path / "x.json"
    bad.write_text("{}")
    res = runner.invoke(app, ["snapshot", "show", str(bad)])
    assert res.exit_code == 2
    assert (
        res.stderr
        == f'gpuaudit: error: {bad} is not a gpuaudit snapshot (no "format": "gpuaudit-snapshot")\n'
    )


def test_the_commands_declare_their_options_as_typer_documents() -> None:
    """Each option an `Annotated` parameter with its `typer.Option`, read by Typer from the
    function as written: no signature rewritten."""
    from gpuaudit.cli import scan, snapshot

    shared = {o.name for o in OPTIONS if not o.scan_only}
    for command, names in (
        (scan.scan, {o.name for o in OPTIONS}),
        (snapshot.save, shared | {"no_side_file"}),
    ):
        assert "__signature__" not in vars(command)
        hints = typing.get_type_hints(command, include_extras=True)
        declared = {
            name
            for name, hint in hints.items()
            if any(isinstance(m, OptionInfo) for m in getattr(hint, "__metadata__", ()))
        }
        assert declared == names, command


def test_root_app_uses_the_style_classes() -> None:
    root = typer.main.get_command(app)
    assert type(root).__name__ == "Group"
    assert all(type(c).__name__ in ("Command", "Group") for c in root.commands.values())  # type: ignore[attr-defined]
