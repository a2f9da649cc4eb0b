"""Adding a check is adding one module: no list, settings class, README or test to edit.

A module written into a folder on `gpuaudit.checks.__path__` is listed by `gpuaudit checks`,
documented by `gpuaudit explain`, configured by `--set`, and run by `gpuaudit scan`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from typer.testing import CliRunner

from gpuaudit.cli import app

runner = CliRunner()

EXAMPLE = '''"""GPU999 example: a fleet with held GPUs (a check written for a test).

What it finds
    The fleet, when pods held at least `checks.example_min_holdings` GPUs or MIG slices.

Why it matters
    It shows that a check is one module.

How it decides
    Counts the held holdings of the shared views against `checks.example_min_holdings`
    (default 1).

What to do
    Nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuaudit.checks.contract import count
from gpuaudit.checks.findings import Finding, Impact, Resource, Severity
from gpuaudit.inventory import Capability, Views

CODE = "GPU999"
TITLE = "Example"
REQUIRES = (Capability.ACTIVITY,)


@dataclass(frozen=True)
class Thresholds:
    example_min_holdings: float = count(1.0)
    """Held GPUs or MIG slices from which the example reports the fleet."""


def run(views: Views, cfg: Thresholds) -> list[Finding]:
    held = len(views.held)
    if held < cfg.example_min_holdings:
        return []
    return [
        Finding(
            code=CODE,
            severity=Severity.INFO,
            resource=Resource("Cluster", "", views.inv.cluster),
            message=f"Cluster {views.inv.cluster} had {held} held GPUs or slices.",
            impact=Impact(gpu_hours=0.0, cost=0.0),
            recommendation="Nothing to do.",
            evidence={"held": held, "threshold": cfg.example_min_holdings},
        )
    ]
'''


def _scan(*args: str) -> dict:  # type: ignore[type-arg]
    res = runner.invoke(app, ["scan", "--demo", "-f", "json", "-q", *args])
    assert res.exit_code == 0, res.output
    return dict(json.loads(res.stdout))


def test_a_new_check_module_is_listed_documented_configured_and_run(
    add_check: Callable[[str, str], Path],
) -> None:
    add_check("gpu999_example", EXAMPLE)

    listed = runner.invoke(app, ["checks"], env={"COLUMNS": "200"})
    assert listed.exit_code == 0 and "GPU999" in listed.stdout and "Example" in listed.stdout

    doc = runner.invoke(app, ["explain", "GPU999"])
    assert doc.exit_code == 0
    assert doc.stdout.startswith("GPU999 example: a fleet with held GPUs")
    assert "example_min_holdings = 1.0" in doc.stdout
    assert "Held GPUs or MIG slices from which the example reports the fleet." in doc.stdout

    report = _scan()
    assert "GPU999" in report["checks_run"]
    (found,) = [f for f in report["findings"] if f["code"] == "GPU999"]
    assert found["evidence"]["threshold"] == 1.0 and found["evidence"]["held"] > 1

    raised = _scan("--set", "example_min_holdings=5")
    (found,) = [f for f in raised["findings"] if f["code"] == "GPU999"]
    assert found["evidence"]["threshold"] == 5.0
    silenced = _scan("--set", "example_min_holdings=1e9")
    assert "GPU999" in silenced["checks_run"]
    assert not [f for f in silenced["findings"] if f["code"] == "GPU999"]
    # Every other check's findings are untouched by the new one.
    others = [f for f in report["findings"] if f["code"] != "GPU999"]
    assert others == silenced["findings"]


def test_set_refuses_an_unknown_name_naming_the_new_setting(
    add_check: Callable[[str, str], Path],
) -> None:
    """A near miss gets "did you mean" with the new check's setting; a name like none of them
    gets the list of every known setting, the new one among them."""
    add_check("gpu999_example", EXAMPLE)
    res = runner.invoke(app, ["scan", "--demo", "-q", "--set", "example_min_holding=5"])
    assert res.exit_code == 2
    assert "did you mean example_min_holdings?" in res.output
    res = runner.invoke(app, ["scan", "--demo", "-q", "--set", "zzz=5"])
    assert res.exit_code == 2
    assert "example_min_holdings" in res.output and "idle_activity" in res.output


def test_set_validates_a_new_setting_by_the_kind_it_declares(
    add_check: Callable[[str, str], Path],
) -> None:
    """The module declares `count(1.0)`; nothing else says what the setting takes."""
    add_check("gpu999_example", EXAMPLE)
    for bad in ("0", "2.5", "nan", "-1"):
        res = runner.invoke(app, ["scan", "--demo", "-q", "--set", f"example_min_holdings={bad}"])
        assert res.exit_code == 2, res.output
        assert "example_min_holdings is a whole number of at least 1" in res.output
        assert len(res.output.strip().splitlines()) == 1


def test_without_the_module_nothing_knows_it() -> None:
    assert runner.invoke(app, ["explain", "GPU999"]).exit_code == 2
    res = runner.invoke(app, ["scan", "--demo", "-q", "--set", "example_min_holdings=5"])
    assert res.exit_code == 2
