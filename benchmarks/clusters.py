"""Many clusters in one scan, measured as whole processes against a real VictoriaMetrics.

    python benchmarks/clusters.py [--clusters 20] [--gpus 1000] [--days 1] [--scrape 1800]

Generates one scenario of `--gpus` GPUs (`gpuaudit`'s scenario generator, labelled as the
dcgm-exporter Helm chart labels its series) and imports it into one VictoriaMetrics once per
cluster, each copy labelled `cluster="cNN"` (so node names, UUIDs and pods collide across
clusters, as the scan must handle). Then, three times over each, it times a whole `gpuaudit scan
--cluster-label cluster` (every cluster in one scan) and `--cluster-label cluster=c00` (one of
them, today's meaning), and replays each scan's recorded queries with plain httpx to show the
backend's own time. It prints the median, min and max wall time, peak RSS, the requests and
queries of each, and the machine's load average. It asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.run import GPUAUDIT, run  # noqa: E402


def _replay(url: str, snap_path: Path) -> tuple[float, int, int]:
    """Seconds to replay a snapshot's queries with plain httpx; its requests and queries."""
    import httpx

    from gpuaudit import snapshot

    snap = snapshot.read(snap_path)
    requests = [e["params"] for entries in snap.prometheus.values() for e in entries]
    start = time.perf_counter()
    with httpx.Client(base_url=url, timeout=600) as client:
        for params in requests:
            path = "/api/v1/query_range" if "step" in params else "/api/v1/query"
            client.post(path, data=params).raise_for_status().read()
    http = snap.manifest.get("http_requests")
    return time.perf_counter() - start, int(http or 0), len(snap.manifest.queries)


def _figures(label: str, live: list[str], url: str, tmp: Path, repeat: int) -> dict[str, Any]:
    out = tmp / f"{label.replace('=', '_')}.snapshot.json"
    args = [*live, "--cluster-label", label, "--no-kubernetes", "--quiet"]
    run([*GPUAUDIT, "snapshot", "save", str(out), *args])  # also warms the server's caches
    walls, rss, bare = [], [], []
    for _ in range(repeat):
        wall, peak, _ = run(
            [*GPUAUDIT, "scan", *args, "-f", "json", "-o", os.devnull, "--fail-on", "none"]
        )
        walls.append(wall)
        rss.append(peak)
        bare.append(_replay(url, out)[0])
    _, http, queries = _replay(url, out)
    return {
        "label": label,
        "median": statistics.median(walls),
        "min": min(walls),
        "max": max(walls),
        "rss": max(rss),
        "bare": statistics.median(bare),
        "http": http,
        "queries": queries,
        "load": os.getloadavg(),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clusters", type=int, default=20)
    ap.add_argument("--gpus", type=int, default=1000)
    ap.add_argument("--days", type=int, default=1)
    ap.add_argument("--scrape", type=int, default=1800)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    from tests.support.multicluster import load, victoriametrics

    tmp = Path(tempfile.mkdtemp(prefix="gpuaudit-clusters-"))
    try:
        with victoriametrics(tmp) as url:
            t0 = time.perf_counter()
            names = [(f"c{i:02d}", 1) for i in range(a.clusters)]
            fleet = load(url, tmp, names, a.gpus, a.days, a.scrape)
            print(
                f"imported {a.clusters} clusters x {a.gpus} GPUs x {a.days} d at {a.scrape} s "
                f"({fleet.samples:,} samples of one metric) in {time.perf_counter() - t0:.0f} s"
            )
            live = ["--prometheus-url", url, "--window", f"{a.days}d", "--end", str(fleet.end)]
            for label in ("cluster", "cluster=c00"):
                f = _figures(label, live, url, tmp, a.repeat)
                print(
                    f"--cluster-label {f['label']}: wall median {f['median']:.2f} s "
                    f"(min {f['min']:.2f}, max {f['max']:.2f}; whole process, {a.repeat} runs), "
                    f"peak RSS {f['rss']:.0f} MiB; {f['http']} requests, {f['queries']} queries; "
                    f"the same queries replayed with plain httpx, median {f['bare']:.2f} s; "
                    "load average {:.1f} {:.1f} {:.1f}".format(*f["load"])
                )
    finally:
        # The backend's own words on a refused query (gpuaudit's message cuts a long one).
        log = tmp / "vm.log"
        if log.is_file():
            errors = [x for x in log.read_text(errors="replace").splitlines() if "error" in x]
            for line in errors[-3:]:
                print("victoria-metrics:", line[-800:])
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
