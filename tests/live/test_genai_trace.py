"""A real production trace through a real Prometheus: gpuaudit's held time, idle GPU-hours and
mean activity agree with a direct computation over the same samples.

The trace is the per-pod GPU duty cycle of Alibaba's GenAI serving cluster (GenTD26,
`alibaba/clusterdata` `cluster-trace-v2026-GenAI`, research and study use only): about 140
pods, one GPU each, one sample every 57 s over 22.8 h, with missed samples and pods that come
and go within the hour. It is read at run time from `../shared/traces/` and never copied into
the project; without it the test is skipped and says why.

Its samples are served as dcgm-exporter's Helm chart labels DCGM series in Prometheus
(`DCGM_FI_DEV_GPU_UTIL` in percent; the workload as `exported_pod`, `exported_namespace`,
`exported_container`; `UUID`, `gpu`, `modelName`, `Hostname`; the exporter's own `pod`,
`namespace`, `instance`, `job` target labels), backfilled with promtool, and scanned with
`gpuaudit scan --prometheus-url ... --no-kubernetes`. The reference is pandas over the CSV:
every sample stands for the trace's sampling interval, buckets are the scan's hours.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from gpuaudit import snapshot
from gpuaudit.cli import app
from gpuaudit.sources.prometheus import discovery
from tests.support.paths import ROOT
from tests.support.promserver import prometheus
from tests.support.servers import require

TRACE = Path("alibaba-genai-2026") / "pod_gpu_duty_cycle_anon.tar.gz"
STEP = 3600
IDLE = 0.05
MIN_HOURS = 4.0
GPUS_PER_NODE = 8


def _trace() -> Path | None:
    """The trace file under `../shared/traces/` of the checkout (or of the folder holding it,
    for a worktree), or under `$GPUAUDIT_TRACES`."""
    roots = [Path(os.environ["GPUAUDIT_TRACES"])] if os.environ.get("GPUAUDIT_TRACES") else []
    roots += [ROOT.parent / "shared" / "traces", ROOT.parent.parent / "shared" / "traces"]
    return next((r / TRACE for r in roots if (r / TRACE).is_file()), None)


@pytest.fixture(scope="module")
def samples() -> pd.DataFrame:
    path = _trace()
    if path is None:
        pytest.skip(
            f"the GenAI 2026 trace is not here ({TRACE} under ../shared/traces/ or "
            "$GPUAUDIT_TRACES); it is research data the project must not copy"
        )
    with tarfile.open(path) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith(".csv"))
        fh = tar.extractfile(member)
        assert fh is not None
        frame = pd.read_csv(io.BytesIO(fh.read()), dtype={"container_ip": str})
    frame = frame.rename(columns={"timestamp_anon": "t", "container_ip": "ip"})
    return frame.sort_values(["ip", "t"], kind="stable").reset_index(drop=True)


def _labels(ip: str, i: int) -> str:
    """The labels dcgm-exporter (Helm chart defaults) and Prometheus give pod `ip`'s GPU."""
    node, gpu = divmod(i, GPUS_PER_NODE)
    uuid = f"GPU-{ip[:8]}-{ip[8:12]}-{ip[12:16]}-{ip[16:20]}-{ip[20:32]}"
    labels = {
        "gpu": str(gpu),
        "UUID": uuid,
        "pci_bus_id": f"00000000:{0x18 + gpu:02X}:00.0",
        "device": f"nvidia{gpu}",
        "modelName": "NVIDIA A10",
        "Hostname": f"gpu-node-{node:02d}",
        "DCGM_FI_DRIVER_VERSION": "570.133.20",
        "exported_container": "inference",
        "exported_namespace": "genai-serving",
        "exported_pod": f"sd-serving-{ip[:10]}",
        "container": "nvidia-dcgm-exporter",
        "endpoint": "gpu-metrics",
        "instance": f"10.0.{node}.10:9400",
        "job": "nvidia-dcgm-exporter",
        "namespace": "gpu-operator",
        "pod": f"nvidia-dcgm-exporter-{ip[-5:]}",
        "service": "nvidia-dcgm-exporter",
    }
    return ",".join(f'{k}="{v}"' for k, v in labels.items())


def _openmetrics(frame: pd.DataFrame, out: Path) -> None:
    """The samples as OpenMetrics text: one family, each series contiguous in time order."""
    ips = frame["ip"].drop_duplicates().tolist()
    prefix = {ip: f"DCGM_FI_DEV_GPU_UTIL{{{_labels(ip, i)}}} " for i, ip in enumerate(ips)}
    lines = (
        frame["ip"].map(prefix)
        + frame["value"].map(repr)
        + " "
        + frame["t"].astype("int64").astype(str)
    )
    with open(out, "w", encoding="utf-8") as fh:
        fh.write("# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n")
        fh.write("\n".join(lines.tolist()))
        fh.write("\n# EOF\n")


@dataclass(frozen=True)
class Served:
    url: str
    start: int
    end: int


@pytest.fixture(scope="module")
def served(samples: pd.DataFrame, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    promtool = require("promtool")
    tmp = tmp_path_factory.mktemp("genai")
    om, tsdb = tmp / "trace.om", tmp / "tsdb"
    _openmetrics(samples, om)
    subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", "-q", str(om), str(tsdb)],
        check=True,
        capture_output=True,
    )
    om.unlink()
    end = int(np.ceil(samples["t"].max() / STEP) * STEP)
    start = int(np.floor(samples["t"].min() / STEP) * STEP)
    with prometheus(tsdb) as url:
        yield Served(url, start, end)


def _live(served: Served) -> list[str]:
    """The options of a quiet live collection of the trace's whole hours."""
    window = f"{(served.end - served.start) // 3600}h"
    return [
        "--prometheus-url",
        served.url,
        "--no-kubernetes",
        "-q",
        "--window",
        window,
        "--end",
        str(served.end),
    ]


@pytest.fixture(scope="module")
def report(served: Served) -> dict[str, Any]:
    res = CliRunner().invoke(app, ["scan", "-f", "json", *_live(served)])
    assert res.exit_code == 0, res.output
    doc: dict[str, Any] = json.loads(res.stdout)
    return doc


@dataclass(frozen=True)
class Reference:
    """The figures computed directly from the CSV, as the summary defines them."""

    interval: float
    mean_activity: float
    idle_gpu_hours: float
    idle_pods: dict[str, float]
    """Pod -> GPU-hours held, for pods GPU001 must report."""
    border: set[str]
    """Pods within 1 % of a GPU001 threshold, which either side may put either way."""


def _reference(frame: pd.DataFrame, start: int) -> Reference:
    # The sampling interval: the spacing of consecutive samples of a pod (57 s).
    interval = float(frame.groupby("ip")["t"].diff().median())
    ratio = frame["value"] / 100.0
    bucket = np.ceil((frame["t"] - start) / STEP)
    per_bucket = ratio.groupby([frame["ip"], bucket]).agg(["mean", "size"])
    idle = float(per_bucket.loc[per_bucket["mean"] < IDLE, "size"].sum() * interval / 3600)
    per_pod = ratio.groupby(frame["ip"]).agg(["mean", "size"])
    hours = per_pod["size"] * interval / 3600
    name = {ip: f"sd-serving-{ip[:10]}" for ip in per_pod.index}
    chosen = (per_pod["mean"] < IDLE) & (hours >= MIN_HOURS)
    near = ((per_pod["mean"] / IDLE - 1).abs() < 0.01) | ((hours / MIN_HOURS - 1).abs() < 0.01)
    return Reference(
        interval=interval,
        mean_activity=float(ratio.mean()),
        idle_gpu_hours=idle,
        idle_pods={name[ip]: float(h) for ip, h in hours[chosen].items()},
        border={name[ip] for ip in per_pod.index[near]},
    )


def test_figures_agree_with_a_direct_computation_over_the_samples(
    samples: pd.DataFrame, served: Served, report: dict[str, Any]
) -> None:
    ref = _reference(samples, served.start)
    s = report["summary"]
    errors = {
        "mean_activity": s["mean_activity"] / ref.mean_activity - 1,
        "idle_gpu_hours": s["idle_gpu_hours"] / ref.idle_gpu_hours - 1,
        "scrape_interval_s": s["scrape_interval_s"] / ref.interval - 1,
    }
    assert s["held_time"] == "samples"
    assert abs(errors["mean_activity"]) < 0.005, errors
    assert abs(errors["idle_gpu_hours"]) < 0.005, errors
    assert abs(errors["scrape_interval_s"]) < 0.005, errors
    found = {
        f["resource"]["name"]: f["impact"]["gpu_hours"]
        for f in report["findings"]
        if f["code"] == "GPU001"
    }
    assert ref.idle_pods, "the trace has idle pods for GPU001"
    assert set(found) - ref.border == set(ref.idle_pods) - ref.border
    worst = max(abs(found[p] / h - 1) for p, h in ref.idle_pods.items() if p in found)
    assert worst < 0.01, {p: (found.get(p), h) for p, h in ref.idle_pods.items()}


def _saved(served: Served, out: Path) -> snapshot.Snapshot:
    res = CliRunner().invoke(app, ["snapshot", "save", str(out), *_live(served)])
    assert res.exit_code == 0, res.output
    return snapshot.read(out)


def _audit(path: Path) -> dict[str, Any]:
    res = CliRunner().invoke(app, ["scan", "--snapshot", str(path), "-f", "json", "-q"])
    assert res.exit_code == 0, res.output
    doc: dict[str, Any] = json.loads(res.stdout)
    for key in ("generated_at", "snapshot", "source"):
        doc.pop(key, None)
    return doc


def test_counts_left_out_where_full_read_as_those_answered_where_they_change(
    served: Served, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Real uneven buckets (pods that come and go within the hour, missed samples, a 57 s
    interval that does not divide the hour): the sample counts answered only where a bucket
    does not hold the measured interval's 63 samples give the audit that the counts answered
    where they change give (the form sent when the interval cannot be measured)."""
    sparse = _saved(served, tmp_path / "sparse.json")
    monkeypatch.setattr(discovery, "full_count", lambda step, interval: None)
    changes = _saved(served, tmp_path / "changes.json")
    described = {q["id"]: q for q in sparse.manifest.get("queries")}
    assert described["util_count_hourly"]["full"] == 63
    assert described["util_count_hourly"]["query"].endswith(") != 63")
    assert all("full" not in q for q in changes.manifest.get("queries"))
    assert "offset 3600s" in changes.prometheus["util_count_hourly"][0]["query"]

    def points(snap: snapshot.Snapshot, qid: str) -> int:
        return sum(len(e["answer"].ts) for e in snap.prometheus[qid])

    assert 0 < points(sparse, "util_count_hourly") < points(sparse, "util_hourly")
    assert points(changes, "util_count_hourly") > 0
    assert _audit(tmp_path / "sparse.json") == _audit(tmp_path / "changes.json")
