"""Answers that may be missing data are reported as incomplete, never as a smaller complete
audit: VictoriaMetrics' `isPartial`, metadata answers with `warnings` or names missing, and a
backend with no DCGM data at all. The real backends answer; the fault server
(tests/support/promfault.py) changes what a real single-node server cannot be made to say."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gpuaudit.cli import app
from gpuaudit.sources.prometheus import catalogue
from tests.support.promfault import PromFaultServer, metadata, partial_answers
from tests.support.promserver import Backfilled, prometheus

runner = CliRunner()
NAMES = "/api/v1/label/__name__/values"
LABELS = "/api/v1/labels"


def _scan(url: str, b: Backfilled, *extra: str) -> tuple[int, dict[str, Any], str]:
    args = ["scan", "-f", "json", "-q", "--prometheus-url", url, "--no-kubernetes"]
    args += ["--window", f"{b.days}d", "--end", str(b.end), *extra]
    res = runner.invoke(app, args)
    doc: dict[str, Any] = json.loads(res.stdout) if res.stdout.strip() else {}
    return res.exit_code, doc, res.output


@pytest.fixture
def vm_fault(vm_url: str) -> Iterator[PromFaultServer]:
    with PromFaultServer(vm_url) as srv:
        yield srv


@pytest.fixture
def prom_fault(prom_url: str) -> Iterator[PromFaultServer]:
    with PromFaultServer(prom_url) as srv:
        yield srv


def test_victoriametrics_is_partial_makes_the_report_incomplete_and_strict_fail(
    vm_fault: PromFaultServer, vm_url: str, scenario_tsdb: Backfilled
) -> None:
    code, whole, _ = _scan(vm_url, scenario_tsdb)
    assert code == 0 and whole["complete"] is True
    vm_fault.faults.append(partial_answers())
    code, doc, _ = _scan(vm_fault.url, scenario_tsdb)
    assert code == 0
    assert doc["complete"] is False
    assert any("isPartial" in r for r in doc["incomplete_reasons"])
    # Half the series are gone: the figures are smaller, and the report says it is incomplete.
    assert doc["summary"]["gpus_total"] < whole["summary"]["gpus_total"]
    code, _, out = _scan(vm_fault.url, scenario_tsdb, "--strict")
    assert code == 2
    line = next(x for x in out.splitlines() if x.startswith("gpuaudit: exit code 2:"))
    assert "the audit is incomplete" in line and "isPartial" in line


def test_metric_names_with_warnings_are_not_trusted(
    prom_fault: PromFaultServer, prom_url: str, scenario_tsdb: Backfilled
) -> None:
    _, whole, _ = _scan(prom_url, scenario_tsdb)

    def drop_profiling(doc: dict[str, Any]) -> dict[str, Any]:
        doc["data"] = [n for n in doc["data"] if not n.startswith("DCGM_FI_PROF")]
        doc["warnings"] = ["store gateway 10.0.0.7:10901 did not answer: partial response"]
        return doc

    prom_fault.faults.append(metadata(NAMES, drop_profiling))
    code, doc, _ = _scan(prom_fault.url, scenario_tsdb)
    assert code == 0
    assert doc["complete"] is False
    assert any("list of metric names" in r for r in doc["incomplete_reasons"])
    # Every catalogue metric was queried anyway: no check is skipped for "profiling not loaded".
    assert not any("profiling module" in s["reason"] for s in doc["skipped"])
    assert doc["findings"] == whole["findings"]
    assert doc["summary"] == whole["summary"]


def test_a_partial_metric_name_list_is_not_trusted(
    prom_fault: PromFaultServer, scenario_tsdb: Backfilled
) -> None:
    def partial(doc: dict[str, Any]) -> dict[str, Any]:
        doc["data"] = [n for n in doc["data"] if n != catalogue.ACT_PROF]
        doc["isPartial"] = True
        return doc

    prom_fault.faults.append(metadata(NAMES, partial))
    code, doc, out = _scan(prom_fault.url, scenario_tsdb, "--strict")
    assert code == 2, out
    assert any("marked it partial" in r for r in doc["incomplete_reasons"])
    assert not any("profiling module" in s["reason"] for s in doc["skipped"])


def test_label_names_with_warnings_read_both_spellings(
    prom_fault: PromFaultServer, prom_url: str, scenario_tsdb: Backfilled, tmp_path: Path
) -> None:
    _, whole, _ = _scan(prom_url, scenario_tsdb)

    def warned(doc: dict[str, Any]) -> dict[str, Any]:
        doc["data"] = [n for n in doc["data"] if n != "exported_pod"]
        doc["warnings"] = "a single warning text, not a list"
        return doc

    prom_fault.faults.append(metadata(LABELS, warned))
    code, doc, _ = _scan(prom_fault.url, scenario_tsdb)
    assert code == 0
    assert doc["complete"] is False
    assert any("list of label names" in r for r in doc["incomplete_reasons"])
    # Both spellings were read, so the workloads were found all the same.
    assert doc["findings"] == whole["findings"]
    out = tmp_path / "s.json"
    res = runner.invoke(
        app,
        ["snapshot", "save", str(out), "--prometheus-url", prom_fault.url, "--no-kubernetes"]
        + ["--window", f"{scenario_tsdb.days}d", "--end", str(scenario_tsdb.end), "-q"],
    )
    assert res.exit_code == 0, res.output
    manifest = json.loads(out.read_text().splitlines()[0])["manifest"]
    assert manifest["capabilities"]["pod_label"] == "any"
    assert (
        "discovery list of label names: a single warning text, not a list" in (manifest["warnings"])
    )


def test_an_empty_metric_name_list_queries_every_metric(
    prom_fault: PromFaultServer, prom_url: str, scenario_tsdb: Backfilled
) -> None:
    _, whole, _ = _scan(prom_url, scenario_tsdb)
    prom_fault.faults.append(metadata(NAMES, lambda doc: {**doc, "data": []}))
    code, doc, _ = _scan(prom_fault.url, scenario_tsdb)
    assert code == 0
    # The data was all there: the list was wrong, the audit is not.
    assert doc["summary"] == whole["summary"] and doc["findings"] == whole["findings"]
    queried = {c.params["query"][0] for c in prom_fault.calls if "query" in c.params}
    assert any(catalogue.P2P_STATUS in q for q in queried)


def test_a_backend_without_dcgm_data_is_no_audit_of_zero_gpus(
    tmp_path: Path, scenario_tsdb: Backfilled
) -> None:
    empty = tmp_path / "empty-tsdb"
    empty.mkdir()
    with prometheus(empty) as url:
        code, doc, out = _scan(url, scenario_tsdb)
        assert code == 0
        assert doc["complete"] is False
        assert doc["summary"]["gpus_total"] == 0
        assert any("no DCGM" in r and "X-Scope-OrgID" in r for r in doc["incomplete_reasons"])
        code, _, out = _scan(url, scenario_tsdb, "--strict")
        assert code == 2 and "no DCGM" in out
