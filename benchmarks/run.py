"""Benchmarks of gpuaudit at fleet scale, measured as whole processes.

    python benchmarks/run.py [--sizes 1000,10000,50000] [--days 7] [--side-file]
    python benchmarks/run.py --live [--live-gpus 1000] [--live-days 7] [--scrape 60]

The snapshot benchmark generates each scenario once with `gpuaudit scenario` (cached under
benchmarks/.cache), audits it with `gpuaudit scan --snapshot`, and prints wall time, peak RSS and
the time of each stage (load, inventory, checks, render; from GPUAUDIT_TIMINGS). The live
benchmark backfills a real Prometheus with promtool, times a whole `gpuaudit scan
--prometheus-url` against it, and replays the same queries with plain httpx to show the time
Prometheus alone needs.
It prints figures; it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / "benchmarks" / ".cache"
GPUAUDIT = [sys.executable, "-m", "gpuaudit"]
LAST_CPU = [0.0]


def run(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, float, str]:
    """Run a command; wall seconds, peak RSS in MiB, and stderr. Its CPU seconds (user and
    system) are left in `LAST_CPU`: on a shared machine they vary less than the wall time."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, **(env or {})},
        text=True,
    )
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - start
    LAST_CPU[0] = usage.ru_utime + usage.ru_stime
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{err[-2000:]}")
    return wall, usage.ru_maxrss / 1024.0, err


def scenario(gpus: int, days: int) -> tuple[Path, float]:
    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f"scenario-{gpus}-{days}d.json.gz"
    gen = 0.0
    if not path.exists():
        gen, _, _ = run(
            [
                *GPUAUDIT,
                "scenario",
                "--gpus",
                str(gpus),
                "--days",
                str(days),
                "--seed",
                "1",
                "--output",
                str(path),
            ]
        )
    return path, gen


def snapshot_bench(
    sizes: list[int], days: int, repeat: int, side_file: bool = False
) -> list[dict[str, Any]]:
    """Each size audited `repeat` times as a whole process; the run with the median wall time
    is reported (its stages beside it), with the largest peak RSS of all runs. `side_file`:
    the snapshot's columnar side-file is written first (`gpuaudit snapshot index`, timed) and
    the scans read it; otherwise any side-file is removed, and the scans parse the text."""
    rows = []
    for gpus in sizes:
        path, gen = scenario(gpus, days)
        side = path.with_name(path.name + ".columns")
        side.unlink(missing_ok=True)
        index_s = index_cpu = index_rss = float("nan")
        if side_file:
            index_s, index_rss, _ = run([*GPUAUDIT, "snapshot", "index", str(path)])
            index_cpu = LAST_CPU[0]
        runs = []
        for _ in range(repeat):
            wall, rss, err = run(
                [
                    *GPUAUDIT,
                    "scan",
                    "--snapshot",
                    str(path),
                    "--format",
                    "json",
                    "--output",
                    os.devnull,
                    "--quiet",
                ],
                {"GPUAUDIT_TIMINGS": "1"},
            )
            stages = {}
            for line in err.splitlines():
                if line.startswith("gpuaudit-timings: "):
                    stages = json.loads(line.split(": ", 1)[1])
            runs.append((wall, rss, stages, LAST_CPU[0]))
        runs.sort(key=lambda r: r[0])
        wall, _, stages, cpu = runs[len(runs) // 2]
        rows.append(
            {
                "gpus": gpus,
                "snapshot_mb": path.stat().st_size / 2**20,
                "generate_s": gen,
                "wall_s": wall,
                "min_wall_s": runs[0][0],
                "max_wall_s": runs[-1][0],
                "peak_rss_mb": max(r[1] for r in runs),
                "cpu_s": cpu,
                "index_s": index_s,
                "index_cpu_s": index_cpu,
                "index_rss_mb": index_rss,
                **stages,
            }
        )
        print_table(rows)
    return rows


def print_table(rows: list[dict[str, Any]]) -> None:
    cols = [
        "gpus",
        "snapshot_mb",
        "wall_s",
        "min_wall_s",
        "max_wall_s",
        "peak_rss_mb",
        "cpu_s",
        "load",
        "inventory",
        "checks",
        "render",
        "generate_s",
        "index_s",
        "index_rss_mb",
    ]
    print("\n" + " | ".join(f"{c:>11}" for c in cols))
    for r in rows:
        print(
            " | ".join(
                f"{r.get(c, float('nan')):>11.2f}" if c != "gpus" else f"{r[c]:>11d}" for c in cols
            )
        )
    if len(rows) > 1:
        first, last = rows[0], rows[-1]
        per_first = first["wall_s"] / first["gpus"]
        per_last = last["wall_s"] / last["gpus"]
        print(
            f"wall time per GPU: {per_first * 1e3:.3f} ms at {first['gpus']} GPUs, "
            f"{per_last * 1e3:.3f} ms at {last['gpus']} GPUs "
            f"(ratio {per_last / per_first:.2f}; <= 1 means no worse than linear)"
        )
    sys.stdout.flush()


def live_bench(gpus: int, days: int, scrape: int) -> None:
    sys.path.insert(0, str(ROOT))
    from tests.promserver import backfill, prometheus  # noqa: PLC0415

    tmp = Path(tempfile.mkdtemp(prefix="gpuaudit-live-"))
    try:
        t0 = time.perf_counter()
        b = backfill(tmp, gpus=gpus, days=days, seed=1, scrape_s=scrape, by_day=True)
        print(
            f"backfilled {gpus} GPUs x {days} d at {scrape} s in {time.perf_counter() - t0:.1f} s"
        )
        with prometheus(b.tsdb) as url:
            live = ["--prometheus-url", url, "--window", f"{days}d", "--end", str(b.end)]
            # The requests gpuaudit makes, recorded once (this also warms the server's caches
            # for both sides alike).
            out = tmp / "live.json"
            run([*GPUAUDIT, "snapshot", "save", str(out), *live, "--no-kubernetes", "--quiet"])
            from gpuaudit import snapshot  # noqa: PLC0415

            snap = snapshot.read(out)
            requests = [e["params"] for entries in snap.prometheus.values() for e in entries]
            import httpx  # noqa: PLC0415

            bare = []
            scans = []
            for _ in range(3):
                wall, rss, _ = run(
                    [
                        *GPUAUDIT,
                        "scan",
                        *live,
                        "--no-kubernetes",
                        "--format",
                        "json",
                        "--output",
                        os.devnull,
                        "--quiet",
                        "--fail-on",
                        "none",
                    ]
                )
                scans.append((wall, rss))
                start = time.perf_counter()
                with httpx.Client(base_url=url, timeout=600) as client:
                    for params in requests:
                        path = "/api/v1/query_range" if "step" in params else "/api/v1/query"
                        client.post(path, data=params).raise_for_status().read()
                bare.append(time.perf_counter() - start)
            wall, rss = min(scans)
            print(
                f"live scan (gpuaudit scan --prometheus-url, whole process, best of 3): "
                f"{wall:.2f} s wall, {rss:.0f} MiB peak RSS; the same "
                f"{snap.manifest.get('http_requests')} requests ({len(requests)} queries) "
                f"replayed with plain httpx, best of 3: {min(bare):.2f} s; "
                f"ratio {wall / min(bare):.2f}"
            )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--sizes", default="1000,10000,50000")
    ap.add_argument("--days", type=int, default=7)
    ap.add_argument("--repeat", type=int, default=3, help="audits per size (median reported)")
    ap.add_argument(
        "--side-file",
        action="store_true",
        help="index each snapshot first (gpuaudit snapshot index) and scan through its side-file",
    )
    ap.add_argument("--live", action="store_true")
    ap.add_argument("--live-gpus", type=int, default=1000)
    ap.add_argument("--live-days", type=int, default=7)
    ap.add_argument("--scrape", type=int, default=60)
    args = ap.parse_args()
    if args.live:
        live_bench(args.live_gpus, args.live_days, args.scrape)
    else:
        snapshot_bench(
            [int(s) for s in args.sizes.split(",")], args.days, args.repeat, args.side_file
        )


if __name__ == "__main__":
    main()
