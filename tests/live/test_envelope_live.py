"""Through a real Prometheus, answers parsed in short form (`http._envelope`: the series left
to the reader that keeps them) give the same report and the same snapshot as answers parsed
whole."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gpuaudit.cli import app
from gpuaudit.sources.prometheus import http
from tests.support.promserver import Backfilled
from tests.support.raw_snapshot import raw_snapshot

runner = CliRunner()


def _run(
    url: str, b: Backfilled, tmp: Path, name: str
) -> tuple[dict[str, Any], dict[str, Any], Any]:
    live = ["--prometheus-url", url, "--no-kubernetes", "--window", f"{b.days}d"]
    live += ["--end", str(b.end)]
    res = runner.invoke(app, ["scan", "-f", "json", "-q", "--fail-on", "none", *live])
    assert res.exit_code == 0, res.output
    report: dict[str, Any] = json.loads(res.stdout)
    report.pop("generated_at", None)
    out = tmp / f"{name}.snapshot.json"
    res = runner.invoke(app, ["snapshot", "save", str(out), "-q", *live])
    assert res.exit_code == 0, res.output
    snap = raw_snapshot(out)
    answers = {
        q: [json.loads(e["raw"]) if "raw" in e else e["body"] for e in entries]
        for q, entries in snap["prometheus"].items()
    }
    for entries in answers.values():
        for body in entries:
            body["data"].pop("stats", None)  # the server's timings differ run to run
    return report, answers, snap["manifest"]["samples_read"]


def test_short_form_answers_give_the_same_report_and_snapshot(
    scenario_tsdb: Backfilled, prom_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shortened: list[int] = []
    envelope = http._envelope

    def counted(raw: bytes) -> dict[str, Any] | None:
        doc = envelope(raw)
        if doc is not None:
            shortened.append(len(doc["data"]["result"]))
        return doc

    monkeypatch.setattr(http, "_envelope", counted)
    monkeypatch.setattr(http, "_SHORT_FROM", 1 << 40)
    whole = _run(prom_url, scenario_tsdb, tmp_path, "whole")
    assert not shortened
    monkeypatch.setattr(http, "_SHORT_FROM", 0)
    short = _run(prom_url, scenario_tsdb, tmp_path, "short")
    assert len(shortened) > 40 and sum(shortened) > 1000
    assert short[0] == whole[0]
    assert short[1] == whole[1]
    # The series counts and the backend's stats come from the short form alike.
    assert short[2] == whole[2] and short[2]["total"]["samples"] > 0
