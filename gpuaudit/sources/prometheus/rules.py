"""Prometheus rules from gpuaudit: alerts for what should page now, and recording rules that make
long-window audits cheap.

The recording rules pre-aggregate each DCGM gauge gpuaudit reads into 5-minute sums, counts and
maxima per GPU and holder, and write a heartbeat (`catalogue.HEARTBEAT`) at every evaluation.
A 7-day audit then reads 2,016 points per series instead of 40,320 raw samples at a 15 s
scrape. When gpuaudit finds every rule of a metric and the heartbeat on the server
(`/api/v1/rules`), it reads the recorded series where the heartbeat shows them whole and the
raw series elsewhere, cut so that the figures do not change (`recorded`).

The hourly group (`hourly`) records, once an hour, every statistic the scan reads per hour
and per window with exactly the scan's own PromQL for one bucket, and a heartbeat whose value
fingerprints the group: a scan with `--step 1h` then ends its window on the group's last
evaluation and reads each family as a plain selector at one point per series per hour.
"""

from __future__ import annotations

from typing import Any

from gpuaudit.domain import xid
from gpuaudit.sources.prometheus import catalogue, hourly
from gpuaudit.sources.prometheus.catalogue import AGGS, RECORDED, record_name

RULE_INTERVAL_S = 300
DRAIN_XIDS = xid.codes_in(xid.Bucket.REBOOT, xid.Bucket.CONTACT_SUPPORT)
"""XIDs whose resolution bucket in NVIDIA's Xid catalog is a reboot or a support case: the
node must be drained (see `gpuaudit.domain.xid`)."""


def xid_event(window: str) -> str:
    """An XID event in the last `window`: a change of the XID gauge into a code, not the code
    itself (the gauge keeps its last value until the exporter restarts). With `err_code`
    labels (current exporters) each code is its own series, so a code's series that appeared
    in the window while the GPU reported another value before it; without them, the gauge
    changed in the window to a value other than 0."""
    x = catalogue.XID
    fresh = f"({x} > 0) unless ({x} offset {window})"
    labelled = f"(({fresh}) and ignoring (err_code, err_msg) ({x} offset {window}))"
    legacy = f"({x} != 0 and on (UUID, gpu) changes({x}[{window}]) > 0)"
    return f"({labelled} or {legacy})"


def _by(pod_spelling: str) -> str:
    return ", ".join(catalogue.IDENTITY_LABELS + catalogue.POD_LABELS[pod_spelling])


def recording_rules(pod_spelling: str = "exported") -> list[dict[str, Any]]:
    by = _by(pod_spelling)
    rules = [
        {
            "record": record_name(m, agg),
            "expr": f"{'max' if agg == 'max' else 'sum'} by ({by}) ({agg}_over_time({m}[5m]))",
        }
        for m in RECORDED
        for agg in AGGS
    ]
    # Last in the group, so written once the rules before it were evaluated: gpuaudit reads
    # where it has points to know which evaluations the recorded series hold.
    rules.append({"record": catalogue.HEARTBEAT, "expr": "vector(1)"})
    return [
        {"name": "gpuaudit.recording", "interval": "5m", "rules": rules},
        hourly.group(pod_spelling),
    ]


def alerting_rules(pod_spelling: str = "exported") -> list[dict[str, Any]]:
    pod, ns = (
        ("exported_pod", "exported_namespace")
        if pod_spelling == "exported"
        else ("pod", "namespace")
    )
    held = f'{pod}!=""'
    where = f"{{{{ $labels.{ns} }}}}/{{{{ $labels.{pod} }}}}"
    gpu = "GPU {{ $labels.gpu }} ({{ $labels.UUID }}) on {{ $labels.Hostname }}"
    labels = f"UUID, gpu, GPU_I_ID, Hostname, {pod}, {ns}"
    drain = " or ".join(f"{catalogue.XID} == {x}" for x in DRAIN_XIDS)
    event = xid_event("15m")
    return [
        {
            "name": "gpuaudit.alerts",
            "rules": [
                {
                    "alert": "GpuauditFramebufferPressure",
                    "expr": (
                        f"max by (UUID, gpu, GPU_I_ID, Hostname, {pod}, {ns}) "
                        f"({catalogue.FB_USED} / ({catalogue.FB_USED} + {catalogue.FB_FREE})) "
                        "> 0.95"
                    ),
                    "for": "15m",
                    "labels": {"severity": "critical", "gpuaudit_code": "GPU020"},
                    "annotations": {
                        "summary": f"{where} uses over 95 % of the memory of {gpu}.",
                        "description": "Out-of-memory failures are likely; see `gpuaudit explain "
                        "GPU020`.",
                    },
                },
                {
                    "alert": "GpuauditFramebufferPressureWarning",
                    "expr": (
                        f"max by (UUID, gpu, GPU_I_ID, Hostname, {pod}, {ns}) "
                        f"({catalogue.FB_USED} / ({catalogue.FB_USED} + {catalogue.FB_FREE})) "
                        "> 0.90"
                    ),
                    "for": "30m",
                    "labels": {"severity": "warning", "gpuaudit_code": "GPU020"},
                    "annotations": {"summary": f"{where} uses over 90 % of the memory of {gpu}."},
                },
                {
                    "alert": "GpuauditIdleReservation",
                    "expr": (
                        f"avg by ({labels}) "
                        f"(avg_over_time({catalogue.ACT_PROF}{{{held}}}[4h])) < 0.05"
                        f" and avg by ({labels}) "
                        f"(present_over_time({catalogue.ACT_PROF}{{{held}}}[10m] offset 3h50m))"
                    ),
                    "for": "30m",
                    "labels": {"severity": "warning", "gpuaudit_code": "GPU001"},
                    "annotations": {
                        "summary": f"{where} has held {gpu} for 4 h at under 5 % engine activity.",
                        "description": "See `gpuaudit explain GPU001`.",
                    },
                },
                {
                    "alert": "GpuauditIdleReservationUtil",
                    "expr": (
                        f"avg by (UUID, gpu, Hostname, {pod}, {ns}) "
                        f"(avg_over_time({catalogue.UTIL}{{{held}}}[4h])) < 5 "
                        f"unless on (UUID, gpu) {catalogue.ACT_PROF}"
                    ),
                    "for": "30m",
                    "labels": {"severity": "warning", "gpuaudit_code": "GPU001"},
                    "annotations": {
                        "summary": f"{where} has held {gpu} for 4 h at under 5 % GPU utilisation "
                        "(no profiling metrics on this GPU).",
                    },
                },
                {
                    "alert": "GpuauditXidDrain",
                    "expr": f"{event} and ({drain})",
                    "labels": {"severity": "critical", "gpuaudit_code": "GPU070"},
                    "annotations": {
                        "summary": f"XID {{{{ $value }}}} on {gpu}: cordon and drain the node.",
                        "description": "NVIDIA's Xid catalog says to reboot the node or contact "
                        "support for this XID; see `gpuaudit explain GPU070`.",
                    },
                },
                {
                    "alert": "GpuauditXid",
                    "expr": event,
                    "labels": {"severity": "warning", "gpuaudit_code": "GPU070"},
                    "annotations": {"summary": f"XID {{{{ $value }}}} on {gpu}."},
                },
            ],
        }
    ]


def rule_groups(pod_spelling: str = "exported") -> list[dict[str, Any]]:
    return recording_rules(pod_spelling) + alerting_rules(pod_spelling)


def render(
    fmt: str, pod_spelling: str = "exported", name: str = "gpuaudit", namespace: str = "monitoring"
) -> str:
    """YAML of a Prometheus rule file (`rules`) or a prometheus-operator PrometheusRule."""
    import yaml  # type: ignore[import-untyped,unused-ignore]

    groups = rule_groups(pod_spelling)
    if fmt == "rules":
        doc: dict[str, Any] = {"groups": groups}
    else:
        doc = {
            "apiVersion": "monitoring.coreos.com/v1",
            "kind": "PrometheusRule",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": {"app.kubernetes.io/name": "gpuaudit"},
            },
            "spec": {"groups": groups},
        }
    text: str = yaml.safe_dump(doc, sort_keys=False, width=100, allow_unicode=False)
    return "# Generated by `gpuaudit rules`. See `gpuaudit explain CODE` for each alert.\n" + text
