# ruff: noqa: E501
"""`gpuaudit rules` output, validated and unit-tested by promtool itself."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml  # type: ignore[import-untyped,unused-ignore]
from typer.testing import CliRunner

from gpuaudit.cli import app
from gpuaudit.sources.interface import make_window
from gpuaudit.sources.prometheus import catalogue as queries
from gpuaudit.sources.prometheus import hourly
from gpuaudit.sources.prometheus.catalogue import AGGS, RECORDED, record_name
from gpuaudit.sources.prometheus.http import PromClient, PromConfig
from gpuaudit.sources.prometheus.promsource import collect_prometheus
from tests.support.servers import require

runner = CliRunner()

TESTS = """
rule_files: [rules.yml]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'DCGM_FI_PROF_GR_ENGINE_ACTIVE{UUID="GPU-1",gpu="0",Hostname="n1",exported_pod="idle",exported_namespace="ml"}'
        values: '0.01+0x330'
      - series: 'DCGM_FI_PROF_GR_ENGINE_ACTIVE{UUID="GPU-2",gpu="1",Hostname="n1",exported_pod="busy",exported_namespace="ml"}'
        values: '0.5+0x330'
      - series: 'DCGM_FI_PROF_GR_ENGINE_ACTIVE{UUID="GPU-3",gpu="2",Hostname="n1"}'
        values: '0+0x330'
      - series: 'DCGM_FI_DEV_FB_USED{UUID="GPU-1",gpu="0",Hostname="n1",exported_pod="idle",exported_namespace="ml"}'
        values: '79000+0x60'
      - series: 'DCGM_FI_DEV_FB_FREE{UUID="GPU-1",gpu="0",Hostname="n1",exported_pod="idle",exported_namespace="ml"}'
        values: '1000+0x60'
      - series: 'DCGM_FI_DEV_FB_USED{UUID="GPU-2",gpu="1",Hostname="n1",exported_pod="busy",exported_namespace="ml"}'
        values: '40000+0x60'
      - series: 'DCGM_FI_DEV_FB_FREE{UUID="GPU-2",gpu="1",Hostname="n1",exported_pod="busy",exported_namespace="ml"}'
        values: '40000+0x60'
      - series: 'DCGM_FI_DEV_XID_ERRORS{UUID="GPU-1",gpu="0",Hostname="n1"}'
        values: '0x10 79+0x20'
      - series: 'DCGM_FI_DEV_XID_ERRORS{UUID="GPU-2",gpu="1",Hostname="n1"}'
        values: '0x10 13+0x20'
      - series: 'DCGM_FI_DEV_XID_ERRORS{UUID="GPU-4",gpu="3",Hostname="n1",err_code="0",err_msg="No Error"}'
        values: '0x10'
      - series: 'DCGM_FI_DEV_XID_ERRORS{UUID="GPU-4",gpu="3",Hostname="n1",err_code="79",err_msg="GPU has fallen off the bus"}'
        values: '_x10 79+0x40'
      - series: 'DCGM_FI_DEV_XID_ERRORS{UUID="GPU-5",gpu="4",Hostname="n1",err_code="79",err_msg="GPU has fallen off the bus"}'
        values: '79+0x50'
    promql_expr_test:
      - expr: gpuaudit:dcgm_fi_prof_gr_engine_active:sum5m{exported_pod="idle"} / gpuaudit:dcgm_fi_prof_gr_engine_active:count5m{exported_pod="idle"}
        eval_time: 30m
        exp_samples:
          - labels: '{UUID="GPU-1",gpu="0",Hostname="n1",exported_pod="idle",exported_namespace="ml"}'
            value: 0.01
    alert_rule_test:
      - eval_time: 20m
        alertname: GpuauditFramebufferPressure
        exp_alerts:
          - exp_labels: {severity: critical, gpuaudit_code: GPU020, UUID: GPU-1, gpu: "0", Hostname: n1, exported_pod: idle, exported_namespace: ml}
            exp_annotations:
              summary: "ml/idle uses over 95 % of the memory of GPU 0 (GPU-1) on n1."
              description: "Out-of-memory failures are likely; see `gpuaudit explain GPU020`."
      - eval_time: 5h30m
        alertname: GpuauditIdleReservation
        exp_alerts:
          - exp_labels: {severity: warning, gpuaudit_code: GPU001, UUID: GPU-1, gpu: "0", Hostname: n1, exported_pod: idle, exported_namespace: ml}
            exp_annotations:
              summary: "ml/idle has held GPU 0 (GPU-1) on n1 for 4 h at under 5 % engine activity."
              description: "See `gpuaudit explain GPU001`."
      - eval_time: 3h
        alertname: GpuauditIdleReservation
        exp_alerts: []
      - eval_time: 12m
        alertname: GpuauditXidDrain
        exp_alerts:
          - exp_labels: {severity: critical, gpuaudit_code: GPU070, UUID: GPU-1, gpu: "0", Hostname: n1}
            exp_annotations:
              summary: "XID 79 on GPU 0 (GPU-1) on n1: cordon and drain the node."
              description: "NVIDIA's Xid catalog says to reboot the node or contact support for this XID; see `gpuaudit explain GPU070`."
      # A gauge with err_code labels: the change from 0 to 79 is an event; a gauge that showed
      # 79 from the start (GPU-5) is not, however long it keeps showing it.
      - eval_time: 20m
        alertname: GpuauditXidDrain
        exp_alerts:
          - exp_labels: {severity: critical, gpuaudit_code: GPU070, UUID: GPU-1, gpu: "0", Hostname: n1}
            exp_annotations:
              summary: "XID 79 on GPU 0 (GPU-1) on n1: cordon and drain the node."
              description: "NVIDIA's Xid catalog says to reboot the node or contact support for this XID; see `gpuaudit explain GPU070`."
          - exp_labels: {severity: critical, gpuaudit_code: GPU070, UUID: GPU-4, gpu: "3", Hostname: n1, err_code: "79", err_msg: "GPU has fallen off the bus"}
            exp_annotations:
              summary: "XID 79 on GPU 3 (GPU-4) on n1: cordon and drain the node."
              description: "NVIDIA's Xid catalog says to reboot the node or contact support for this XID; see `gpuaudit explain GPU070`."
      - eval_time: 45m
        alertname: GpuauditXidDrain
        exp_alerts: []
      - eval_time: 12m
        alertname: GpuauditXid
        exp_alerts:
          - exp_labels: {severity: warning, gpuaudit_code: GPU070, UUID: GPU-1, gpu: "0", Hostname: n1}
            exp_annotations: {summary: "XID 79 on GPU 0 (GPU-1) on n1."}
          - exp_labels: {severity: warning, gpuaudit_code: GPU070, UUID: GPU-2, gpu: "1", Hostname: n1}
            exp_annotations: {summary: "XID 13 on GPU 1 (GPU-2) on n1."}
      - eval_time: 40m
        alertname: GpuauditXid
        exp_alerts: []
"""


def _promtool() -> str:
    return require("promtool")


@pytest.mark.server
def test_rule_files_pass_promtool_check(tmp_path: Path) -> None:
    promtool = _promtool()
    for fmt in ("rules", "prometheusrule"):
        res = runner.invoke(app, ["rules", "--format", fmt])
        assert res.exit_code == 0, res.output
        doc = yaml.safe_load(res.stdout)
        groups = doc["groups"] if fmt == "rules" else doc["spec"]["groups"]
        path = tmp_path / f"{fmt}.yml"
        path.write_text(yaml.safe_dump({"groups": groups}))
        check = subprocess.run(
            [promtool, "check", "rules", str(path)], capture_output=True, text=True
        )
        assert check.returncode == 0, check.stdout + check.stderr
    assert doc["kind"] == "PrometheusRule"


@pytest.mark.server
def test_alerts_fire_and_stay_quiet_under_promtool_test(tmp_path: Path) -> None:
    promtool = _promtool()
    out = tmp_path / "rules.yml"
    assert runner.invoke(app, ["rules", "-f", "rules", "-o", str(out)]).exit_code == 0
    (tmp_path / "tests.yml").write_text(TESTS)
    res = subprocess.run(
        [promtool, "test", "rules", "tests.yml"], cwd=tmp_path, capture_output=True, text=True
    )
    assert res.returncode == 0, res.stdout + res.stderr


def _collect(phase_s: int, since: int = 0) -> tuple[list[str], Any]:
    """A collection from a server whose recording rules evaluate `phase_s` past each
    5-minute mark; the queries it was asked and the collection."""
    names = [record_name(m, a) for m in RECORDED for a in AGGS] + [queries.HEARTBEAT]
    seen: list[str] = []
    end = END

    def handler(req: httpx.Request) -> httpx.Response:
        path = req.url.path
        if path.endswith("/rules"):
            return httpx.Response(
                200,
                json={
                    "status": "success",
                    "data": {
                        "groups": [
                            {
                                "name": "gpuaudit.recording",
                                "rules": [{"name": n, "type": "recording"} for n in names],
                            }
                        ]
                    },
                },
            )
        if path.endswith("__name__/values"):
            return httpx.Response(
                200, json={"status": "success", "data": [queries.ACT_PROF, queries.FB_USED]}
            )
        if path.endswith("/labels"):
            return httpx.Response(200, json={"status": "success", "data": ["exported_pod"]})
        if path.endswith("buildinfo"):
            return httpx.Response(200, json={"status": "success", "data": {"version": "2.42"}})
        form = httpx.QueryParams(req.content.decode())
        seen.append(form["query"])
        rtype = "matrix" if path.endswith("query_range") else "vector"
        result: list[dict[str, object]] = []
        if form["query"] == f"timestamp({queries.HEARTBEAT})":
            # Evaluations 7 s past each 5-minute mark: the last one before the window's end.
            result = [{"metric": {}, "value": [end, str(end - 300 + phase_s)]}]
        elif queries.HEARTBEAT in form["query"]:
            lo, hi = float(form["start"]), float(form["end"])
            points = [
                [lo + i * 300, "1"]
                for i in range(int((hi - lo) // 300) + 1)
                if lo + i * 300 > since
            ]
            result = [{"metric": {}, "values": points}]
        return httpx.Response(
            200, json={"status": "success", "data": {"resultType": rtype, "result": result}}
        )

    client = PromClient(PromConfig(url="http://p.test"), transport=httpx.MockTransport(handler))
    return seen, collect_prometheus(client, make_window(86400, 3600, end))


END = 1_795_392_000


def test_scan_reads_recording_rules_when_the_server_has_them() -> None:
    seen, got = _collect(7)
    caps = got.capabilities.to_dict()
    assert caps["recording_rules"] == sorted([queries.ACT_PROF, queries.FB_USED])
    assert caps["recorded"] == {
        "metrics": caps["recording_rules"],
        "phase_ms": 7000,
        "since": END - 86400 - 293,
        "covers": "whole",
    }
    # Two discovery queries find where the recorded series hold, whatever the cluster size.
    assert sum(queries.HEARTBEAT in q for q in seen) == 2
    # The window's sums read the recorded points of the evaluations inside it (7 s past each
    # 5-minute mark), and the raw samples of the 7 s and 293 s at its edges (before
    # Prometheus 3, ranges are closed: a millisecond less on the left of each piece).
    sums = next(q for q in seen if "sum5m" in q and "fb_used" in q)
    rec = "sum_over_time(gpuaudit:dcgm_fi_dev_fb_used:sum5m[86099999ms] offset 293s)"
    assert rec in sums, sums
    assert "sum_over_time(DCGM_FI_DEV_FB_USED[6999ms] offset 86393001ms)" in sums
    assert "sum_over_time(DCGM_FI_DEV_FB_USED[292999ms]))" in sums
    assert any("quantile_over_time(0.95, DCGM_FI_PROF_GR_ENGINE_ACTIVE" in q for q in seen)
    reads = {q["id"]: q["reads"] for q in got.queries}
    assert reads["fb_used_sum"] == reads["fb_used_max"] == "recorded and raw"
    # Raw edges at every hourly bucket would cost the raw series whole: raw buckets.
    assert reads["act_hourly"] == reads["act_count_hourly"] == reads["act_p95_hourly"] == "raw"
    assert not any("count5m" in q and "unless" in q for q in seen)


def test_buckets_on_the_evaluations_read_the_recorded_series_alone() -> None:
    seen, got = _collect(0)
    assert got.capabilities.to_dict()["recorded"]["phase_ms"] == 0
    counts = next(q for q in seen if "count5m" in q and "unless" in q)
    rec = "sum_over_time(gpuaudit:dcgm_fi_prof_gr_engine_active:count5m[3599999ms])"
    assert rec in counts
    assert "count_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE" not in counts
    reads = {q["id"]: q["reads"] for q in got.queries}
    assert reads["act_hourly"] == reads["fb_used_sum"] == reads["act_count_hourly"] == "recorded"


def test_rules_that_began_within_the_window_are_read_after_they_began() -> None:
    began = END - 43200  # the first evaluation covers the 5 minutes before it
    seen, got = _collect(0, since=began)
    cov = got.capabilities.to_dict()["recorded"]
    assert cov["covers"] == "part" and cov["since"] == began
    assert [c[:2] for c in got.plan["act_hourly"]] == [[END - 86400, began], [began, END]]
    raw, rec = got.answers["act_count_hourly"]
    assert "count5m" not in raw["query"] and "count5m" in rec["query"]
    # The recorded counts answer every series at their first bucket: the bucket before it
    # was read raw, and a count is otherwise answered only where it changes.
    assert rec["query"].endswith(f"(vector(time()) > {began + 3600}))")
    assert raw["query"].endswith(f"(vector(time()) > {END - 86400 + 3600}))")
    sums = next(q for q in seen if "sum5m" in q and "fb_used" in q)
    assert "sum_over_time(DCGM_FI_DEV_FB_USED[43199999ms] offset 43200001ms)" in sums
    assert "sum_over_time(gpuaudit:dcgm_fi_dev_fb_used:sum5m[43199999ms])" in sums


HOURLY_TESTS = """
rule_files: [rules.yml]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'DCGM_FI_PROF_GR_ENGINE_ACTIVE{UUID="GPU-1",gpu="0",Hostname="n1",exported_pod="p",exported_namespace="ml"}'
        values: '0.5+0x180'
      - series: 'DCGM_FI_DEV_FB_USED{UUID="GPU-1",gpu="0",Hostname="n1",exported_pod="p",exported_namespace="ml"}'
        values: '1000+10x180'
      - series: 'DCGM_FI_DEV_GPU_UTIL{UUID="GPU-1",gpu="0",Hostname="n1",exported_pod="p",exported_namespace="ml"}'
        values: '50+0x180'
      - series: 'DCGM_FI_DEV_GPU_UTIL{UUID="GPU-2",gpu="1",Hostname="n1",exported_pod="q",exported_namespace="ml"}'
        values: '30+0x180'
    promql_expr_test:
      - expr: gpuaudit:dcgm_fi_prof_gr_engine_active:mean_1h
        eval_time: 2h
        exp_samples:
          - labels: 'gpuaudit:dcgm_fi_prof_gr_engine_active:mean_1h{UUID="GPU-1",gpu="0",Hostname="n1",exported_pod="p",exported_namespace="ml"}'
            value: 0.5
      - expr: gpuaudit:dcgm_fi_dev_fb_used:max_1h
        eval_time: 2h
        exp_samples:
          - labels: 'gpuaudit:dcgm_fi_dev_fb_used:max_1h{UUID="GPU-1",gpu="0",Hostname="n1",exported_pod="p",exported_namespace="ml"}'
            value: 2200
      # GPU_UTIL counts where no profiling series is: the scan's `unless`, over two rules.
      - expr: count by (UUID) (gpuaudit:dcgm_fi_dev_gpu_util:count_1h unless gpuaudit:dcgm_fi_prof_gr_engine_active:count_1h)
        eval_time: 2h
        exp_samples:
          - labels: '{UUID="GPU-2"}'
            value: 1
      - expr: gpuaudit:recording_rules:evaluated_1h
        eval_time: 2h
        exp_samples:
          - labels: 'gpuaudit:recording_rules:evaluated_1h'
            value: FINGERPRINT
"""


@pytest.mark.server
def test_hourly_rules_under_promtool_test(tmp_path: Path) -> None:
    """A few hourly rules by hand, and the heartbeat's fingerprint."""
    promtool = _promtool()
    out = tmp_path / "rules.yml"
    assert runner.invoke(app, ["rules", "-f", "rules", "-o", str(out)]).exit_code == 0
    text = HOURLY_TESTS.replace("FINGERPRINT", str(hourly.fingerprint("exported")))
    (tmp_path / "tests.yml").write_text(text)
    res = subprocess.run(
        [promtool, "test", "rules", "tests.yml"], cwd=tmp_path, capture_output=True, text=True
    )
    assert res.returncode == 0, res.stdout + res.stderr
