"""The CI and cron recipes of `docs/ci.md` and `docs/cron.md`, run as written.

The shell of each recipe is taken from the docs at test time and run with `bash -e` (GitHub's
`run:` shell, and GitLab's script, which stops at the first failing line), against a real
Prometheus and the test Kubernetes API server. Only what the CI service provides is stood in
for: its secrets and variables (the test servers' URL and kubeconfig), `$RUNNER_TEMP`,
`$GITHUB_STEP_SUMMARY`, the cache and artifact actions (folders), and the `pip install` from
gpuaudit's repository (gpuaudit is already installed: a `pip` on `PATH` that installs nothing).
The test Prometheus holds a past scenario, so the runs audit the window that ends where its
data ends (`GPUAUDIT_WINDOW`, `GPUAUDIT_END` in the environment), where a real run audits the
week that ends now.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuaudit.app import history
from tests.support.paths import ROOT
from tests.support.promserver import Backfilled

BIN = Path(sys.executable).parent


def _blocks(doc: str, lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", doc, re.M | re.S)


def _doc(name: str) -> str:
    return (ROOT / "docs" / name).read_text(encoding="utf-8")


@pytest.fixture
def tools(tmp_path: Path) -> Path:
    """A folder for `PATH` with the `pip` a CI image would have, installing nothing."""
    folder = tmp_path / "ci-bin"
    folder.mkdir()
    pip = folder / "pip"
    # The docs install gpuaudit from its repository: it has no release on PyPI yet.
    pip.write_text(
        '#!/bin/sh\n[ "$1" = install ] || exit 9\n'
        'case "$2" in "gpuaudit @ git+https://"*) ;; *) exit 9 ;; esac\n'
    )
    pip.chmod(0o755)
    return folder


def _base_env(tools: Path, b: Backfilled, home: Path) -> dict[str, str]:
    return {
        "PATH": f"{tools}:{BIN}:/usr/bin:/bin",
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "MPLCONFIGDIR": str(home / "mpl"),
        "GPUAUDIT_WINDOW": f"{b.days}d",
        "GPUAUDIT_END": str(b.end),
    }


def _bash(script: str, cwd: Path, env: dict[str, str], *opts: str) -> subprocess.Popen[str]:
    path = cwd.parent / f"{cwd.name}-step.sh"
    path.write_text(script)
    return subprocess.Popen(
        ["bash", "-e", *opts, str(path)],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _run(script: str, cwd: Path, env: dict[str, str], *opts: str) -> tuple[int, str]:
    proc = _bash(script, cwd, env, *opts)
    out, _ = proc.communicate(timeout=600)
    return proc.returncode, out


@dataclass
class GitHubJob:
    """The workflow's one job, run step by step the way the runner does: `run:` steps with
    `bash -e`, a step without `if:` only while every earlier step passed, `if: always()` steps
    always; the cache actions copy a folder to and from `cache`, upload-artifact checks that its
    files exist."""

    job: dict[str, Any]
    env: dict[str, str]
    secrets: dict[str, str]
    cache: Path
    run_id: int = 0
    log: list[str] = field(default_factory=list)

    def expr(self, text: str) -> str:
        def value(m: re.Match[str]) -> str:
            name = m.group(1).strip()
            if name.startswith("secrets."):
                return self.secrets[name.removeprefix("secrets.")]
            if name == "github.run_id":
                return str(self.run_id)
            raise AssertionError(f"the test runner does not know ${{{{ {name} }}}}")

        return re.sub(r"\$\{\{(.*?)\}\}", value, text)

    def run(self, work: Path, run_id: int) -> int:
        self.run_id, failed, self.log = run_id, False, []
        temp = work.parent / f"{work.name}-temp"
        temp.mkdir()
        summary = work.parent / f"{work.name}-summary.md"
        for step in self.job["steps"]:
            cond = step.get("if", "success()")
            assert cond in ("success()", "always()"), cond
            name = step.get("name") or step.get("uses") or step["run"].splitlines()[0]
            if failed and cond != "always()":
                self.log.append(f"skipped: {name}")
                continue
            ok = self.step(step, work, temp, summary)
            self.log.append(f"{'ok' if ok else 'failed'}: {name}")
            failed = failed or not ok
        return 1 if failed else 0

    def step(self, step: dict[str, Any], work: Path, temp: Path, summary: Path) -> bool:
        if "run" in step:
            env = dict(self.env, RUNNER_TEMP=str(temp), GITHUB_STEP_SUMMARY=str(summary))
            env.update({k: self.expr(str(v)) for k, v in step.get("env", {}).items()})
            code, out = _run(step["run"], work, env)
            self.log.append(out)
            return code == 0
        uses, with_ = step["uses"].split("@")[0], step.get("with", {})
        if uses == "actions/cache/restore":
            prefix = self.expr(with_["restore-keys"])
            keys = sorted(
                (p for p in self.cache.iterdir() if p.name.startswith(prefix)),
                key=lambda p: int(p.name.removeprefix(prefix)),
            )
            if keys:
                shutil.copytree(keys[-1], work / with_["path"])
        elif uses == "actions/cache/save":
            key = self.expr(with_["key"])
            shutil.copytree(work / with_["path"], self.cache / key)
        elif uses == "actions/upload-artifact":
            missing = [p for p in with_["path"].split() if not (work / p).is_file()]
            assert not missing, f"the artifact lacks {missing}"
        else:
            assert uses in ("actions/checkout", "actions/setup-python"), uses
        return True


@pytest.fixture
def github(
    tools: Path,
    tmp_path: Path,
    prom_url: str,
    kubeconfig: Path,
    scenario_tsdb: Backfilled,
) -> GitHubJob:
    (workflow,) = [yaml.safe_load(b) for b in _blocks(_doc("ci.md"), "yaml") if "jobs:" in b]
    (job,) = workflow["jobs"].values()
    cache = tmp_path / "actions-cache"
    cache.mkdir()
    secrets = {
        "PROMETHEUS_URL": prom_url,
        "PROMETHEUS_TOKEN": "unused-token",
        "KUBECONFIG": kubeconfig.read_text(),
    }
    env = _base_env(tools, scenario_tsdb, tmp_path)
    return GitHubJob(job, env, secrets, cache)


def _statuses(report: Path) -> set[str]:
    return {f.get("status", "") for f in json.loads(report.read_text())["findings"]}


def _workdir(tmp_path: Path, name: str) -> Path:
    work = tmp_path / name
    work.mkdir()
    return work


def test_github_actions_records_a_baseline_gates_on_new_findings_and_keeps_reports(
    github: GitHubJob, tmp_path: Path
) -> None:
    # First run: no baseline yet; it records one and gates nothing.
    first = _workdir(tmp_path, "run1")
    assert github.run(first, 1) == 0, "\n".join(github.log)
    assert "ok: Save the baseline" in github.log
    saved = github.cache / "gpuaudit-baseline-1" / "report.json"
    assert json.loads(saved.read_text())["complete"] is True
    assert "# GPU audit" in (tmp_path / "run1-summary.md").read_text()

    # Second run: the same cluster against that baseline passes, every finding unchanged.
    second = _workdir(tmp_path, "run2")
    assert github.run(second, 2) == 0, "\n".join(github.log)
    assert _statuses(second / "report.json") == {"unchanged"}

    # Third run: a high finding the baseline lacks (as if it appeared since) fails the gate;
    # every report is still written and kept, and the baseline stays where it was.
    base = github.cache / "gpuaudit-baseline-2" / "report.json"
    doc = json.loads(base.read_text())
    new = next(f for f in doc["findings"] if f["severity"] in ("high", "critical"))
    doc["findings"].remove(new)
    base.write_text(json.dumps(doc))
    third = _workdir(tmp_path, "run3")
    assert github.run(third, 3) == 1
    assert "failed: Audit" in github.log and "skipped: Save the baseline" in github.log
    assert "ok: Keep the reports" in github.log
    assert "new" in _statuses(third / "report.json")
    suite = ET.parse(third / "gpuaudit.xml").getroot().find("testsuite")
    assert suite is not None and int(suite.get("failures", "")) > 0
    assert "[new]" in (third / "gpuaudit.xml").read_text()
    assert (third / "gpuaudit.html").is_file()
    assert "# GPU audit" in (tmp_path / "run3-summary.md").read_text()
    assert sorted(p.name for p in github.cache.iterdir()) == [
        "gpuaudit-baseline-1",
        "gpuaudit-baseline-2",
    ]


def test_github_actions_never_passes_an_audit_of_nothing(
    github: GitHubJob, tmp_path: Path, empty_prom_url: str
) -> None:
    github.secrets["PROMETHEUS_URL"] = empty_prom_url
    work = _workdir(tmp_path, "empty")
    assert github.run(work, 1) == 1
    assert "failed: Audit" in github.log and "skipped: Save the baseline" in github.log
    assert not list(github.cache.iterdir())
    doc = json.loads((work / "report.json").read_text())
    assert doc["nothing_audited"] is True
    assert "NOTHING WAS AUDITED" in "\n".join(github.log)
    assert "<error" in (work / "gpuaudit.xml").read_text()


@dataclass
class GitLabJob:
    """The job as the runner runs it: variables expanded from the CI/CD variables, the cache
    restored, the script's lines run in one `bash -e -o pipefail` shell, the cache saved when
    the job passed, the artifacts (`when: always`) checked for."""

    job: dict[str, Any]
    env: dict[str, str]
    ci_vars: dict[str, str]
    cache: Path

    def run(self, work: Path) -> tuple[int, str]:
        env = dict(self.env, **self.ci_vars)
        for name, value in self.job.get("variables", {}).items():
            env[name] = re.sub(r"\$(\w+)", lambda m: self.ci_vars.get(m.group(1), ""), value)
        stored = self.cache / self.job["cache"]["key"]
        if stored.is_dir():
            shutil.copytree(stored, work, dirs_exist_ok=True)
        code, out = _run("\n".join(self.job["script"]) + "\n", work, env, "-o", "pipefail")
        if code == 0:
            for path in self.job["cache"]["paths"]:
                shutil.copytree(work / path, stored / path, dirs_exist_ok=True)
        artifacts = self.job["artifacts"]
        assert artifacts["when"] == "always"
        for path in [*artifacts["paths"], artifacts["reports"]["junit"]]:
            assert (work / path).is_file(), f"the artifacts lack {path}\n{out}"
        return code, out


def test_gitlab_ci_records_a_baseline_and_gates_on_new_findings(
    tools: Path,
    tmp_path: Path,
    prom_url: str,
    kubeconfig: Path,
    scenario_tsdb: Backfilled,
) -> None:
    (doc,) = [yaml.safe_load(b) for b in _blocks(_doc("ci.md"), "yaml") if "script:" in b]
    (job,) = doc.values()
    cache = tmp_path / "gitlab-cache"
    cache.mkdir()
    ci_vars = {
        "PROMETHEUS_URL": prom_url,
        "PROMETHEUS_TOKEN": "unused-token",
        "KUBECONFIG": str(kubeconfig),
    }
    gitlab = GitLabJob(job, _base_env(tools, scenario_tsdb, tmp_path), ci_vars, cache)
    code, out = gitlab.run(_workdir(tmp_path, "job1"))
    assert code == 0, out
    baseline = cache / "gpuaudit-baseline" / "gpuaudit-baseline" / "report.json"
    assert baseline.is_file()
    second = _workdir(tmp_path, "job2")
    code, out = gitlab.run(second)
    assert code == 0, out
    assert _statuses(second / "report.json") == {"unchanged"}
    doc = json.loads(baseline.read_text())
    doc["findings"] = [f for f in doc["findings"] if f["severity"] not in ("high", "critical")]
    baseline.write_text(json.dumps(doc))
    third = _workdir(tmp_path, "job3")
    code, _ = gitlab.run(third)
    assert code == 1
    assert "new" in _statuses(third / "report.json")
    assert json.loads(baseline.read_text()) == doc, "a failing job leaves the baseline alone"


def test_the_weekly_cron_script_chains_the_trend_and_writes_every_report(
    tools: Path, tmp_path: Path, prom_url: str, scenario_tsdb: Backfilled
) -> None:
    (script,) = [b for b in _blocks(_doc("cron.md"), "sh") if "REPORTS_DIR" in b]
    reports = tmp_path / "srv"
    reports.mkdir()
    date = tools / "date"
    date.write_text('#!/bin/sh\necho "$FAKE_DAY"\n')  # the clock: two Mondays in one test
    date.chmod(0o755)
    env = _base_env(tools, scenario_tsdb, tmp_path)
    del env["GPUAUDIT_WINDOW"], env["GPUAUDIT_END"]  # the file says it
    env["REPORTS_DIR"] = str(reports)
    # Two runs, two windows (the history refuses a second report of one window): the scenario's
    # first day, then its second.
    ends = (scenario_tsdb.end - 86400, scenario_tsdb.end)
    for day, end in zip(("2026-11-16", "2026-11-23"), ends, strict=True):
        # The folder's gpuaudit.toml, as the docs describe it, pointed at the test Prometheus.
        (reports / "gpuaudit.toml").write_text(
            f'[scan]\nprometheus_url = "{prom_url}"\nno_kubernetes = true\n'
            f'window = "1d"\nend = {end}\n'
        )
        code, out = _run(script, reports, dict(env, FAKE_DAY=day))
        assert code == 0, out
        assert out.startswith("# GPU audit"), "the Markdown report, for cron's mail"
    names = sorted(p.name for p in reports.glob("gpuaudit-*"))
    assert names == [
        f"gpuaudit-{d}.{x}" for d in ("2026-11-16", "2026-11-23") for x in ("html", "json", "md")
    ]
    second = json.loads((reports / "gpuaudit-2026-11-23.json").read_text())
    assert second["comparison"]["against"] == history.name_of(ends[0])
    assert sorted(p.name for p in (reports / "history").iterdir()) == [
        history.name_of(e) for e in ends
    ]
    assert (reports / "snapshots" / "gpuaudit-2026-11-23.snapshot.json.gz").is_file()
    assert not list(reports.rglob("*.part"))


def test_the_weekly_cron_script_fails_after_writing_when_nothing_was_audited(
    tools: Path, tmp_path: Path, empty_prom_url: str, scenario_tsdb: Backfilled
) -> None:
    (script,) = [b for b in _blocks(_doc("cron.md"), "sh") if "REPORTS_DIR" in b]
    reports = tmp_path / "srv"
    reports.mkdir()
    (reports / "gpuaudit.toml").write_text(
        f'[scan]\nprometheus_url = "{empty_prom_url}"\nno_kubernetes = true\n'
        f'window = "{scenario_tsdb.days}d"\nend = {scenario_tsdb.end}\n'
    )
    env = _base_env(tools, scenario_tsdb, tmp_path)
    del env["GPUAUDIT_WINDOW"], env["GPUAUDIT_END"]
    code, out = _run(script, reports, dict(env, REPORTS_DIR=str(reports)))
    assert code == 2, out
    assert "NOTHING WAS AUDITED" in out
    (report,) = reports.glob("gpuaudit-*.json")
    assert json.loads(report.read_text())["nothing_audited"] is True


def test_the_docs_name_only_flags_gpuaudit_has() -> None:
    """Every `--flag` the recipes pass to `gpuaudit scan` exists (a renamed flag would break
    the recipes before these tests run them)."""
    from gpuaudit.app.options import BY_FLAG

    text = _doc("ci.md") + _doc("cron.md")
    scans = re.findall(r"gpuaudit scan([^\n]*(?:\\\n[^\n]*)*)", text)
    flags = {f for s in scans for f in re.findall(r"(--[a-z-]+)", s)}
    assert flags and flags <= {*BY_FLAG, "--help"}, flags - set(BY_FLAG)
