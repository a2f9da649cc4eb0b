"""Live scans through a real Prometheus (and the test API server) give what auditing the
generator's snapshot gives."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from gpuaudit.cli import app
from tests.support.apiserver import KubeAPIServer
from tests.support.promserver import Backfilled
from tests.support.raw_snapshot import raw_snapshot

runner = CliRunner()


def _scan(*args: str) -> dict[str, Any]:
    res = runner.invoke(app, ["scan", "-f", "json", "-q", *args])
    assert res.exit_code == 0, res.output
    doc: dict[str, Any] = json.loads(res.stdout)
    return doc


def _window(b: Backfilled) -> list[str]:
    return ["--window", f"{b.days}d", "--end", str(b.end)]


def _same(doc: dict[str, Any]) -> dict[str, Any]:
    """The report minus what names the run rather than the data."""
    out = dict(doc)
    out.pop("generated_at")
    out.pop("cluster")
    return out


def test_live_scan_equals_snapshot_audit(
    prom_url: str, kubeconfig: Path, kube_server: KubeAPIServer, scenario_tsdb: Backfilled
) -> None:
    live = _scan(
        "--prometheus-url", prom_url, "--kubeconfig", str(kubeconfig), *_window(scenario_tsdb)
    )
    offline = _scan("--snapshot", str(scenario_tsdb.snapshot_path))
    assert live["complete"] is True
    assert {f["code"] for f in live["findings"]} >= {"GPU001", "GPU080"}
    assert _same(live) == _same(offline)
    assert set(kube_server.methods()) == {"GET"}


def test_snapshot_save_then_scan_reproduces_the_live_report(
    prom_url: str, kubeconfig: Path, scenario_tsdb: Backfilled, tmp_path: Path
) -> None:
    out = tmp_path / "s.json.gz"
    args = ["--prometheus-url", prom_url, "--kubeconfig", str(kubeconfig), *_window(scenario_tsdb)]
    res = runner.invoke(app, ["snapshot", "save", str(out), *args, "-q"])
    assert res.exit_code == 0, res.output
    live = _scan(*args)
    replay = _scan("--snapshot", str(out))
    live.pop("generated_at")
    replay.pop("generated_at")
    assert live == replay


def test_without_kubernetes_dcgm_checks_run_and_the_rest_say_why(
    prom_url: str, scenario_tsdb: Backfilled, snapshot_without_k8s: Path
) -> None:
    live = _scan("--prometheus-url", prom_url, "--no-kubernetes", *_window(scenario_tsdb))
    assert _same(live) == _same(_scan("--snapshot", str(snapshot_without_k8s)))
    assert {f["code"] for f in live["findings"]} >= {"GPU001", "GPU021"}
    skipped = {s["check"]: s["reason"] for s in live["skipped"]}
    assert "GPU080" in skipped and "--no-kubernetes" in skipped["GPU080"]


def test_small_max_samples_cuts_queries_and_keeps_figures(
    small_prom_url: str, prom_url: str, scenario_tsdb: Backfilled, tmp_path: Path
) -> None:
    out = tmp_path / "cut.json"
    res = runner.invoke(
        app,
        [
            "snapshot",
            "save",
            str(out),
            "--prometheus-url",
            small_prom_url,
            "--no-kubernetes",
            "-q",
            *_window(scenario_tsdb),
        ],
    )
    assert res.exit_code == 0, res.output
    plan = raw_snapshot(out)["manifest"]["plan"]
    assert len(plan["act_hourly"]) > 1, "the whole-window range query must have been cut"
    whole = _scan("--prometheus-url", prom_url, "--no-kubernetes", *_window(scenario_tsdb))
    assert _same(_scan("--snapshot", str(out))) == _same(whole)


def test_parallel_queries_save_the_same_answers(
    prom_url: str, small_prom_url: str, scenario_tsdb: Backfilled, tmp_path: Path
) -> None:
    """`--parallel-queries 4` against a real Prometheus: the same answers, chunk for chunk,
    as one query at a time; and where the server refuses large queries (a small
    `--query.max-samples`), the same report."""
    docs = []
    for n in ("1", "4"):
        out = tmp_path / f"p{n}.json"
        args = ["--prometheus-url", prom_url, "--no-kubernetes", *_window(scenario_tsdb)]
        res = runner.invoke(
            app, ["snapshot", "save", str(out), *args, "--parallel-queries", n, "-q"]
        )
        assert res.exit_code == 0, res.output
        docs.append(raw_snapshot(out))
    one, four = docs

    def answers(doc: dict[str, Any]) -> dict[str, Any]:
        """Each chunk's query and series (in an order of their own: Prometheus does not sort
        an instant query's series)."""
        return {
            q: [
                (e["query"], e["chunk"], sorted(json.dumps(r, sort_keys=True) for r in rows))
                for e in entries
                for rows in [e["body"]["data"]["result"]]
            ]
            for q, entries in doc["prometheus"].items()
        }

    assert answers(four) == answers(one)
    assert four["manifest"]["plan"] == one["manifest"]["plan"]
    cut = tmp_path / "cut.json"
    args = ["--prometheus-url", small_prom_url, "--no-kubernetes", *_window(scenario_tsdb)]
    res = runner.invoke(app, ["snapshot", "save", str(cut), *args, "--parallel-queries", "4", "-q"])
    assert res.exit_code == 0, res.output
    assert len(raw_snapshot(cut)["manifest"]["plan"]["act_hourly"]) > 1
    whole = _scan("--prometheus-url", prom_url, "--no-kubernetes", *_window(scenario_tsdb))
    assert _same(_scan("--snapshot", str(cut))) == _same(whole)


def test_cluster_label_selects_nothing_when_absent(
    prom_url: str, scenario_tsdb: Backfilled
) -> None:
    doc = _scan(
        "--prometheus-url",
        prom_url,
        "--no-kubernetes",
        "--cluster-label",
        "cluster=elsewhere",
        *_window(scenario_tsdb),
    )
    assert doc["findings"] == []
    assert "GPU001" in {s["check"] for s in doc["skipped"]}
    assert any("no DCGM series" in w for w in doc["warnings"])


def test_unreachable_prometheus_is_one_clear_line() -> None:
    res = runner.invoke(
        app,
        [
            "scan",
            "--prometheus-url",
            "http://127.0.0.1:9",
            "--timeout",
            "2",
            "--no-kubernetes",
            "-q",
        ],
    )
    assert res.exit_code == 2
    assert "cannot reach Prometheus" in res.output
    assert "Traceback" not in res.output


def test_snapshot_save_records_the_servers_bytes(
    prom_url: str, scenario_tsdb: Backfilled, tmp_path: Path
) -> None:
    """`snapshot save` writes each answer as Prometheus sent it (its own key order, not
    re-encoded), and reading it back through the fast reader gives the general parse."""
    import gzip

    import numpy as np

    from gpuaudit import snapshot
    from gpuaudit.snapshot import answers

    out = tmp_path / "s.json.gz"
    res = runner.invoke(
        app,
        ["snapshot", "save", str(out), "--prometheus-url", prom_url, "--no-kubernetes", "-q"]
        + _window(scenario_tsdb),
    )
    assert res.exit_code == 0, res.output
    lines = gzip.decompress(out.read_bytes()).splitlines()
    hourly = next(line for line in lines if b'"prometheus":"act_hourly"' in line)
    assert hourly.startswith(b'{"body":{"status":"success","data":{"resultType":"matrix"')
    assert answers.from_record_line(hourly) is not None  # the fast reader takes that form
    back = snapshot.read(out)
    for line in lines[1:-1]:
        rec = json.loads(line)
        if "prometheus" not in rec:
            continue
        general = answers.parse(rec["body"], "x")
        got = back.prometheus[rec["prometheus"]][0]["answer"]
        assert [dict(m) for m in got.metrics] == [dict(m) for m in general.metrics]
        for name in ("values", "offsets", "ts", "vs"):
            assert np.array_equal(getattr(got, name), getattr(general, name), equal_nan=True)
    assert len(back.prometheus["act_hourly"][0]["answer"].ts) > 1000
