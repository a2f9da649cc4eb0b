"""Every setting is checked in one place (`gpuaudit.app.config`) before any data is read: one error
line and exit code 2, never an internal error; options that cannot apply to the chosen source
are refused, naming the option."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuaudit import checks
from gpuaudit.app import config, pipeline
from gpuaudit.app.options import BY_NAME, OPTIONS, Option
from gpuaudit.checks import contract
from gpuaudit.cli import app
from gpuaudit.core.errors import ConfigError
from gpuaudit.sources.interface import check_step
from tests.support.paths import DEMO

runner = CliRunner()
LIVE = ["--prometheus-url", "http://127.0.0.1:9", "--no-kubernetes"]


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No GPUAUDIT_ variable from the calling shell, no gpuaudit.toml but the test's, and no
    live collection: every error here must come before one."""
    for name in [n for n in os.environ if n.startswith("GPUAUDIT_")]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)

    def collect(*_: object, **__: object) -> None:
        raise AssertionError("a live collection was attempted")

    monkeypatch.setattr(pipeline.snapshot, "collect_live", collect)


def _refused(args: list[str], toml: str = "", env: dict[str, str] | None = None) -> str:
    """The one error line of `scan ARGS`, after checking it is one line and exit code 2."""
    if toml:
        Path("gpuaudit.toml").write_text(toml)
    res = runner.invoke(app, ["scan", "-q", *args], env=env)
    assert res.exit_code == 2, res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1, res.output
    assert lines[0].startswith("gpuaudit: error: ")
    assert "internal error" not in res.output and "Traceback" not in res.output
    return lines[0]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["--set", "idle_activity=5"],
            "idle_activity is a fraction between 0 and 1, got 5 (did you mean 0.05?)",
        ),
        (["--set", "idle_activity=1.5"], "(did you mean 0.015?)"),
        (["--set", "idle_activity=-0.1"], "idle_activity is a fraction between 0 and 1"),
        (["--set", "idle_activity=nan"], "got nan"),
        (["--set", "placement_slowdown=inf"], "got inf"),
        (["--set", "idle_min_hours=-5"], "idle_min_hours is a positive number of hours"),
        (["--set", "idle_min_hours=0"], "idle_min_hours is a positive number of hours"),
        (["--set", "pending_min_minutes=0"], "a positive number of minutes"),
        (["--set", "part_time_min_days=-1"], "a positive number of days"),
        (["--set", "crashloop_restarts=2.5"], "a whole number of at least 1"),
        (["--set", "idle_activity=abc"], "'abc' is not a number"),
        (["--window", "1000000000d"], "--window 1000000000d is longer than --max-window 366d"),
        (["--window", "400d", "--max-window", "1y"], "--max-window: invalid duration '1y'"),
        (["--window", "9" * 40 + "d"], "--window: invalid duration"),
        (["--window", "0"], "--window: duration '0' must be at least 1 second"),
        (["--window", "0.5s"], "must be at least 1 second"),
        (["--end", "nan"], "--end 'nan' is not a time between 1970 and 9999"),
        (["--end", "inf"], "--end 'inf' is not a time between 1970 and 9999"),
        (["--end", "-1e12"], "--end '-1e12' is not a time between 1970 and 9999"),
        (["--end", "1e300"], "is not a time between 1970 and 9999"),
        (["--end", "2026-13-01"], "invalid --end '2026-13-01'"),
        (["--end", "0"], "--window 7d before --end 0 starts before 1970"),
        (["--namespace", "Bad_NS"], "--namespace 'Bad_NS' is not a valid Kubernetes namespace"),
        (["--report", "xml=a.xml"], "--report 'xml=a.xml': use FORMAT=FILE"),
        (["--report", "json"], "use FORMAT=FILE with FORMAT one of table, json"),
        (["--report", "json=a", "--report", "junit=./a"], "a is already written by"),
        (["-f", "json", "-o", "r.json", "--report", "json=r.json"], "already written by --output"),
    ],
)
def test_a_bad_value_is_one_clear_line(args: list[str], expected: str) -> None:
    assert expected in _refused(["--demo", *args])


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["--timeout", "-1"],
            "--timeout -1: the timeout is seconds to wait for one answer, "
            "more than 0 and at most 3600",
        ),
        (["--timeout", "0"], "--timeout 0: the timeout"),
        (["--timeout", "nan"], "--timeout nan: the timeout"),
        (["--timeout", "inf"], "--timeout inf: the timeout"),
        (["--timeout", "1e9"], "--timeout 1e+09: the timeout"),
        (["--step", "0"], "--step: duration '0' must be at least 1 second"),
        (["--window", "3h", "--step", "2h"], "--window 3h must be a whole number of --step 2h"),
        (["--window", "1h", "--step", "2h"], "--window 1h must be a whole number of --step 2h"),
        (["--window", "30d", "--step", "1m"], "makes 43,200 buckets; at most 20,000"),
        (["--window", "9999d", "--max-window", "99999d"], "makes 239,976 buckets"),
        (["--namespace", "ml", "-n", "Bad_NS"], "--namespace 'Bad_NS' is not a valid"),
        (["--max-objects", "1.5"], "--max-objects must be a whole number at least 1"),
        (["--parallel-queries", "17"], "--parallel-queries must be a whole number at least 1 "),
        (["--max-answer-mib", "0"], "and at most 65536, got 0.0"),
        (["--max-queries", "nan"], "--max-queries must be a whole number"),
        (["--cluster-label", "1c"], "--cluster-label '1c' does not start with a label name"),
        (["--header", "X-Token sekrit"], "--header number 1 has no ':' between name and value"),
    ],
)
def test_a_bad_live_value_is_one_clear_line_before_any_query(
    args: list[str], expected: str
) -> None:
    assert expected in _refused([*LIVE, *args])


@pytest.mark.parametrize(
    ("toml", "expected"),
    [
        ("[checks]\nidle_activity = 5\n", "[checks] idle_activity: idle_activity is a fraction"),
        (
            "[checks]\nidle_activity = nan\n",
            "[checks] idle_activity: idle_activity is a fraction between 0 and 1, got nan",
        ),
        ("[checks]\nwarm_idle_hours = -inf\n", "warm_idle_hours is a positive number of hours"),
        ("[prices]\nH100 = nan\n", "[prices] H100: a price per GPU-hour is a number from 0"),
        ("[prices]\ndefault = -2\n", "[prices] default: a price per GPU-hour"),
        (
            '[scan]\nwindow = "1000000000d"\n',
            "[scan] window in gpuaudit.toml 1000000000d is longer than --max-window",
        ),
        ('[scan]\nend = "nan"\n', "--end 'nan' is not a time"),
    ],
)
def test_a_bad_file_value_is_one_clear_line(toml: str, expected: str) -> None:
    assert expected in _refused(["--demo"], toml)


def test_a_bad_file_timeout_names_the_key() -> None:
    line = _refused(LIVE, "[scan]\ntimeout = nan\n")
    assert "[scan] timeout in gpuaudit.toml nan: the timeout" in line


def test_every_declared_setting_is_checked_by_its_kind() -> None:
    """Generic: each setting of each check refuses a value its kind does not take and accepts
    its default, whatever the check."""
    bad = {
        "fraction": ["1.5", "-0.01"],
        "hours": ["0", "-1"],
        "minutes": ["0"],
        "days": ["0"],
        "count": ["0", "1.5"],
        "rate": ["-1", "inf"],
        "gpus": ["-1", "nan"],
        "switch": ["2", "0.5"],
    }
    for name, setting in checks.settings().items():
        assert setting.kind in contract.KINDS
        for value in bad[setting.kind.name]:
            with pytest.raises(ConfigError, match=f"{name} is {setting.kind.what}"):
                config.for_scan({"demo": True, "set": [f"{name}={value}"]})
        ok = config.for_scan({"demo": True, "set": [f"{name}={setting.default!r}"]})
        assert ok.settings.checks[name] == setting.default


def test_good_values_pass() -> None:
    cfg = config.for_scan(
        {
            "demo": True,
            "set": ["idle_activity=0", "placement_slowdown=1", "crashloop_restarts=1"],
            "window": "366d",
            "end": "2026-11-23T00:00:00Z",
            "report": ["json=r.json", "junit=g.xml"],
            "namespace": ["ml-train", "ml-train", "batch"],
        }
    )
    assert cfg.settings.window_s == 366 * 86400
    assert [(t.format, t.path) for t in cfg.reports] == [
        ("json", Path("r.json")),
        ("junit", Path("g.xml")),
    ]
    assert cfg.namespaces == ("ml-train", "batch")
    live = config.for_scan({"prometheus_url": "http://p", "timeout": 3600.0, "step": "1m"})
    assert live.live is not None and live.live.limits.timeout_s == 3600.0


@pytest.mark.parametrize(
    ("step_s", "interval", "refused"),
    [
        (60, 60.0, False),
        (60, 60.4, False),  # scrape timestamps jitter: within 1 %
        (3600, 15.0, False),
        (30, 60.0, True),
        (59, 61.0, True),
        (60, None, False),  # not detected: nothing to check
        (1, float("nan"), False),
        (1, 0.0, False),
    ],
)
def test_check_step_against_the_scrape_interval(
    step_s: int, interval: float | None, refused: bool
) -> None:
    if not refused:
        check_step(step_s, interval)
        return
    with pytest.raises(ConfigError, match="is shorter than the scrape interval") as exc:
        check_step(step_s, interval)
    assert "use --step 1m or longer" in str(exc.value) or "use --step 61s" in str(exc.value)


LIVE_ONLY = [o for o in OPTIONS if o.live_only]
VALUES = {"FLAG": [], "LIST": ["x: y"], "NUMBER": ["30"], "SPAN": ["5m"]}


def _value(option: Option) -> list[str]:
    if option is BY_NAME["cluster_label"]:
        return ["cluster=a"]
    return VALUES.get(option.kind.name, ["x"])


def test_the_live_only_options_are_the_connection_and_step() -> None:
    names = {o.name for o in LIVE_ONLY}
    assert names >= {"kubeconfig", "context", "no_kubernetes", "cluster_label", "timeout", "step"}
    assert {o.name for o in OPTIONS if o.panel == "Prometheus connection"} <= names
    assert "namespace" not in names and "window" not in names and "end" not in names


@pytest.mark.parametrize("option", LIVE_ONLY, ids=lambda o: o.flag)
@pytest.mark.parametrize("source", [["--demo"], ["--snapshot", str(DEMO)]], ids=["demo", "snap"])
def test_an_option_that_cannot_apply_to_a_file_is_refused_by_name(
    option: Option, source: list[str]
) -> None:
    line = _refused([*source, option.flag, *_value(option)])
    assert line.startswith(f"gpuaudit: error: {option.flag} applies only to a live scan")
    assert source[0] in line


def test_the_refusal_names_the_variable_that_set_it() -> None:
    """A variable is set for the run, and refused; a config file is written for many runs,
    and its live-only keys are a note (`tests/test_config_input.py`)."""
    line = _refused(["--demo"], env={"GPUAUDIT_TIMEOUT": "30"})
    assert "GPUAUDIT_TIMEOUT (--timeout) applies only to a live scan" in line


def test_a_layer_with_its_own_prometheus_url_keeps_its_connection_settings() -> None:
    Path("gpuaudit.toml").write_text(
        '[scan]\nprometheus_url = "http://p"\ntimeout = 30\ncluster_label = "c=a"\n'
    )
    res = runner.invoke(app, ["scan", "--demo", "-q", "-f", "json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["cluster"] == "scenario-1"
