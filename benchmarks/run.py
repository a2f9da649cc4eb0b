"""Benchmarks of gpuaudit at fleet scale, measured as whole processes.

    python benchmarks/run.py [--sizes 1000,10000,50000] [--days 7] [--side-file]
    python benchmarks/run.py --live [--live-gpus 1000] [--live-days 7] [--scrape 60]
    python benchmarks/run.py --live-recorded [--live-gpus 1000] [--live-days 7] [--scrape 60]
                             [--phase-ms 67000] [--live-repeat 3] [--skip-raw-server]
                             [--backend prometheus,vm] [--parallel 1,2] [--baseline-tree PATH]
                             [--other-repeat N]
    python benchmarks/run.py --live-raw [--live-gpus 10000] [--live-days 7] [--scrape 15]
                             [--no-replay]
    (--live-recorded and --live-raw: [--parallel N] [--keep DIR] [--prepare-only])

The snapshot benchmark generates each scenario once with `gpuaudit scenario` (cached under
benchmarks/.cache), audits it with `gpuaudit scan --snapshot`, and prints wall time, peak RSS and
the time of each stage (load, inventory, checks, render; from GPUAUDIT_TIMINGS). The live
benchmark backfills a real Prometheus with promtool, times a whole `gpuaudit scan
--prometheus-url` against it, and replays the same queries with plain httpx to show the time
Prometheus alone needs.
The recorded-series benchmark writes TSDB blocks of a day (`tests.support.tsdbblocks`, equal to what
promtool backfills from the same text) holding a scenario's raw series together with the series
`gpuaudit rules`' recording group would record over them (`gpuaudit.scenario.recorded_series`,
evaluated `--phase-ms` past each 5-minute mark), and the series of the hourly group evaluated
over the raw series by the backend's own evaluator: promtool (`tsdb create-blocks-from rules`)
for Prometheus, vmalert's replay for VictoriaMetrics (`--backend vm`, the blocks imported with
vmctl). Then it times the scan and its bare replay `--live-repeat` times each against a server
without the rules (raw series read; left out with `--skip-raw-server`) and one with them (the
5-minute rules loaded, so that discovery finds them; the hourly ones found by their heartbeat),
with the backend's default limits, at each `--parallel` value; with `--baseline-tree PATH`, the
gpuaudit of another checkout too, against the same server (`--other-repeat`: how many times the
raw-series and baseline scans are run, minutes each at 10,000 GPUs). It prints the median, min
and max, the samples the queries read (the manifest's `samples_read`), the manifest's backend
timings, which queries read recorded series, the costliest queries, and one line per server in
the form of the README's summary. The raw benchmark does the same with raw series alone and prints
how the planner cut each query under the default sample limit.
`--parallel N` runs the scans with `--parallel-queries N` and replays with as many requests in
flight. It prints figures; it asserts nothing.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / "benchmarks" / ".cache"
GPUAUDIT = [sys.executable, "-m", "gpuaudit"]
LAST_CPU = [0.0]


def compiled() -> None:
    """Write the bytecode of the gpuaudit that the benchmark runs, as an installed package has
    it: every timed process then reads its modules' bytecode instead of compiling their source
    (which it would do on every start where PYTHONDONTWRITEBYTECODE is set, as on this
    workplace's machines: about 0.3 s of each run)."""
    out = subprocess.run(
        [sys.executable, "-c", "import gpuaudit, os; print(os.path.dirname(gpuaudit.__file__))"],
        check=True,
        capture_output=True,
        text=True,
    )
    compileall.compile_dir(out.stdout.strip(), quiet=1)


def run(
    cmd: list[str], env: dict[str, str] | None = None, cwd: Path | None = None
) -> tuple[float, float, str]:
    """Run a command (in `cwd`); wall seconds, peak RSS in MiB, and stderr. Its CPU seconds
    (user and system) are left in `LAST_CPU`: on a shared machine they vary less than the wall
    time."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, **(env or {})},
        cwd=cwd,
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
                # Indexed (or not) by the benchmark itself, timed apart.
                "--no-side-file",
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
    from tests.support.promserver import backfill, prometheus  # noqa: PLC0415

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
            print("  " + _samples_line(dict(snap.manifest)))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


PARALLEL = [1]
"""Queries in flight at once in the live benchmarks' scans and bare replays."""
PARALLELS = [1]
"""The values of `--parallel` (`1,2`: every scan timed at each)."""


def _uptime() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


Cli = tuple[list[str], dict[str, str], Path | None]
"""A gpuaudit to run: its command, the environment it needs and the folder to run it in
(`--baseline-tree`)."""
THIS: Cli = (GPUAUDIT, {}, None)


def _baseline(tree: Path) -> Cli:
    """The gpuaudit of another checkout (today's commit checked out beside this one): its
    virtual environment's `gpuaudit`, else this Python with the checkout first on its path,
    run in the checkout (`python -m` puts the working folder before PYTHONPATH, and this
    checkout's editable install's finder is consulted only after both)."""
    tree = tree.resolve()
    venv = tree / ".venv" / "bin" / "gpuaudit"
    if venv.exists():
        return [str(venv)], {}, tree
    if not (tree / "gpuaudit" / "__init__.py").exists():
        raise SystemExit(f"--baseline-tree {tree}: no gpuaudit package or .venv there")
    return [sys.executable, "-m", "gpuaudit"], {"PYTHONPATH": str(tree)}, tree


def _timed_scan(
    url: str,
    live: list[str],
    out: Path,
    repeat: int = 3,
    replay: bool = True,
    cli: Cli = THIS,
) -> tuple[list[float], list[float], Any]:
    """`repeat` whole `gpuaudit scan` processes and as many bare replays (plain httpx) of the
    requests one `snapshot save` made; the sorted wall times and the saved manifest, with the
    median bare seconds of each query id under `bare_by_query`. `repeat` 0: the `snapshot
    save` itself is timed (a scan's collection, without its audit) against one bare replay.
    `replay` False: the `snapshot save` alone (a week of raw series at a fine scrape takes
    most of an hour a pass). `cli`: which gpuaudit runs the scans and the save."""
    from gpuaudit import snapshot  # noqa: PLC0415

    live = [*live, "--parallel-queries", str(PARALLEL[0])]
    gpuaudit, env, cwd = cli
    saving = [*gpuaudit, "snapshot", "save", str(out), *live, "--no-kubernetes", "-q"]
    save = run(saving, env, cwd)[0]
    print(f"  snapshot save {save:.1f} s, {LAST_CPU[0]:.1f} s CPU; {_uptime()}", flush=True)
    snap = snapshot.read(out)
    if not replay:
        return [save], [], dict(snap.manifest)
    # Without gpuaudit's `timeout` (a piece the scan got answered may run past it when
    # replayed on a busier machine; the server's own limit still holds).
    requests = [
        (q, {k: v for k, v in e["params"].items() if k != "timeout"})
        for q, entries in snap.prometheus.items()
        for e in entries
    ]
    import httpx  # noqa: PLC0415

    scans, bare = [], []
    per_query: dict[str, list[float]] = {}
    for _ in range(max(repeat, 1)):
        args = [*live, "--no-kubernetes", "-f", "json", "-o", os.devnull, "-q", "--fail-on", "none"]
        scans.append(run([*gpuaudit, "scan", *args], env, cwd)[0] if repeat else save)
        if repeat:
            print(f"  scan {scans[-1]:.1f} s, {LAST_CPU[0]:.1f} s CPU; {_uptime()}", flush=True)
        start = time.perf_counter()
        took: dict[str, float] = {}
        said: dict[str, list[int | None]] = {}
        with httpx.Client(base_url=url, timeout=1200) as client:

            def send(item: tuple[str, dict[str, Any]]) -> tuple[str, float, int | None]:
                t0 = time.perf_counter()
                path = "/api/v1/query_range" if "step" in item[1] else "/api/v1/query"
                body = client.post(path, data=item[1]).raise_for_status().read()
                return item[0], time.perf_counter() - t0, _said(body)

            # As many in flight as the scan had (`--parallel`), in the order it sent them.
            with ThreadPoolExecutor(PARALLEL[0]) as pool:
                for qid, sec, n in pool.map(send, requests):
                    took[qid] = took.get(qid, 0.0) + sec
                    said.setdefault(qid, []).append(n)
        bare.append(time.perf_counter() - start)
        print(f"  bare replay {bare[-1]:.1f} s; {_uptime()}", flush=True)
        for qid, sec in took.items():
            per_query.setdefault(qid, []).append(sec)
    manifest = dict(snap.manifest)
    manifest["bare_by_query"] = {q: sorted(v)[len(v) // 2] for q, v in per_query.items()}
    manifest["bare_samples_read"] = _bare_samples(said, manifest.get("samples_read") or {})
    return sorted(scans), sorted(bare), manifest


def _samples(manifest: Any) -> str:
    """The samples the scan's queries read (the manifest's `samples_read`), in millions."""
    total = (manifest.get("samples_read") or {}).get("total") or {}
    if "samples" not in total:
        return "samples read not recorded"
    how = " (some estimated)" if total.get("estimated") else ""
    return f"{total['samples'] / 1e6:,.1f} M samples read{how}"


_SAID = re.compile(rb'"totalQueryableSamples":\s*(\d+)')
"""Prometheus' figure in an answer asked with `stats=all` (`data.stats` follows the result)."""


def _said(body: bytes) -> int | None:
    """The samples the backend says an answer read, from the end of its bytes (no parsing of
    the result), or None where it says nothing (VictoriaMetrics)."""
    m = _SAID.search(body[-65536:])
    return int(m.group(1)) if m else None


def _bare_samples(said: dict[str, list[int | None]], scan: dict[str, Any]) -> dict[str, Any]:
    """The samples the last bare replay read: per query, the sum of the backend's figures;
    where an answer gave none, or the scan's figure for the query is estimated (a subquery's
    samples, which Prometheus leaves out), the scan's own figure, estimated the same way from
    the same requests and answers (`gpuaudit.sources.prometheus.stats`)."""
    queries = scan.get("queries") or {}
    samples, estimated = 0, []
    for qid, figures in said.items():
        own = queries.get(qid) or {}
        if own.get("estimated") or any(n is None for n in figures):
            samples += int(own.get("samples") or 0)
            estimated.append(qid)
        else:
            samples += sum(n for n in figures if n is not None)
    return {"samples": samples, "estimated": sorted(estimated)}


def _samples_line(manifest: Any) -> str:
    """Samples read by the scan (its manifest's `samples_read`) and by its bare replay, and the
    queries that read the most."""
    read = manifest.get("samples_read") or {}
    total = read.get("total") or {}
    if "samples" not in total:
        return "samples read: not recorded (a gpuaudit before issue 37?)"
    text = f"samples read: scan {total['samples'] / 1e6:,.1f} M"
    if total.get("estimated"):
        text += f", {total['estimated']} of {total.get('requests')} requests estimated"
    bare = manifest.get("bare_samples_read")
    if bare:
        guessed = bare["estimated"]
        text += f"; bare replay {bare['samples'] / 1e6:,.1f} M" + (
            f" (the scan's estimate for {', '.join(guessed)})" if guessed else ""
        )
    top = sorted((read.get("queries") or {}).items(), key=lambda kv: -kv[1].get("samples", 0))
    most = ", ".join(f"{q} {v.get('samples', 0) / 1e6:,.1f} M" for q, v in top[:10])
    return f"{text}; most: {most}"


def _report(what: str, scans: list[float], bare: list[float], manifest: Any) -> None:
    """The figures of one server and gpuaudit, the second line in the form of the README's
    summary (`what: <wall> s, <samples> M samples read, ratio <r>`)."""
    m = len(scans) // 2
    plan = manifest.get("plan") or {}
    replayed = (
        f"bare replay median {bare[m]:.2f} s (min {bare[0]:.2f}, max {bare[-1]:.2f}); "
        f"ratio {scans[m] / bare[m]:.2f}"
        if bare
        else "no bare replay (--no-replay)"
    )
    cut = {q: len(c) for q, c in plan.items() if len(c) > 1}
    reads: dict[str, list[str]] = {}
    for q in manifest.get("queries") or []:
        reads.setdefault(q.get("reads", "raw"), []).append(q["id"])
    print(
        f"{what}: {len(scans)} runs; scan median {scans[m]:.2f} s (min {scans[0]:.2f}, max "
        f"{scans[-1]:.2f}); {replayed}; "
        f"{manifest.get('http_requests')} requests; "
        f"chunked {cut or 'none'}; {_uptime()}"
    )
    ratio = f"ratio {scans[m] / bare[m]:.2f}" if bare else "no bare replay"
    print(f"  {what}: {scans[m]:.1f} s, {_samples(manifest)}, {ratio}")
    for how, ids in sorted(reads.items()):
        print(f"  read {how} ({len(ids)}): {', '.join(sorted(ids))}")
    print(f"  backend timings: {json.dumps(manifest.get('backend_timings'))}")
    print("  " + _samples_line(manifest))
    by_query = manifest.get("bare_by_query") or {}
    top = sorted(by_query.items(), key=lambda kv: -kv[1])[:10]
    print("  costliest queries (bare, median s): " + ", ".join(f"{q} {s:.2f}" for q, s in top))
    sys.stdout.flush()


def _backfill(
    tmp: Path, gpus: int, days: int, scrape: int, phase_ms: int | None
) -> tuple[Path, int]:
    """A TSDB holding a scenario's raw series and, with `phase_ms`, the series `gpuaudit
    rules`' recording group would record over them (`scenario.recorded`, evaluated `phase_ms`
    past each 5-minute mark), written as blocks of a day (6 hours at a 15 s scrape; the raw
    and recorded series of a block's hours in one block, so that the server has nothing to
    merge while it is timed) by
    `tests.support.tsdbblocks`, which writes exactly what promtool backfills from the same samples
    (`tests/live/test_tsdbblocks.py`) in a fraction of the time. Returns the TSDB and the
    window's end."""
    sys.path.insert(0, str(ROOT))
    from gpuaudit.scenario import generate  # noqa: PLC0415
    from tests.support.tsdbblocks import write_scenario  # noqa: PLC0415

    t0 = time.perf_counter()
    sc = generate(gpus, days, 1, scrape_s=scrape)
    tsdb = tmp / "tsdb"
    done = tmp / "backfilled.json"
    what = {"gpus": gpus, "days": days, "scrape": scrape, "phase_ms": phase_ms, "end": sc.end}
    if done.exists() and json.loads(done.read_text()) == what:
        print(f"reusing the TSDB in {tsdb}", flush=True)
        return tsdb, sc.end
    shutil.rmtree(tsdb, ignore_errors=True)

    def progress(done: int, blocks: int) -> None:
        print(
            f"  block {done}/{blocks} at {time.perf_counter() - t0:.0f} s; {_uptime()}", flush=True
        )

    # Blocks of a day at 60 s, of 6 hours at 15 s: both workers busy, bounded memory.
    hours = max(2, min(24, 24 * scrape // 60))
    raw, rec = write_scenario(
        sc, tsdb, phase_ms=phase_ms, block_hours=hours, progress=progress, workers=2
    )
    done.write_text(json.dumps(what))
    size = sum(f.stat().st_size for f in tsdb.rglob("*") if f.is_file())
    print(
        f"backfilled {raw / 1e6:.0f} M raw and {rec / 1e6:.0f} M recorded samples in "
        f"{time.perf_counter() - t0:.0f} s; TSDB {size / 2**30:.2f} GiB; {_uptime()}",
        flush=True,
    )
    return tsdb, sc.end


@contextmanager
def _workdir(keep: Path | None, prefix: str, what: str) -> Iterator[Path]:
    """The benchmark's folder (`keep`, or a temporary one removed at the end), after a line
    saying `what` is measured, the disk free and the load."""
    tmp = keep or Path(tempfile.mkdtemp(prefix=prefix))
    tmp.mkdir(parents=True, exist_ok=True)
    print(f"{what}; {shutil.disk_usage(tmp).free / 2**30:.0f} GiB free; {_uptime()}", flush=True)
    try:
        yield tmp
    finally:
        if keep is None:
            shutil.rmtree(tmp, ignore_errors=True)


# min = max block duration: the server compacts nothing while it is timed.
_FROZEN = (
    "--storage.tsdb.min-block-duration=2h",
    "--storage.tsdb.max-block-duration=2h",
    # gpuaudit asks each query to stop at 9/10 of its --timeout (108 s), under the default
    # 2 minutes, so its scans are cut as on a default server; the bare replay sends no
    # `timeout`, and a piece the scan got answered may run longer when replayed.
    "--query.timeout=10m",
)


def _hourly_blocks(tmp: Path, tsdb: Path, end: int, days: int) -> Path:
    """The hourly group of `gpuaudit rules` evaluated over the raw series of `tsdb` by promtool
    (`tsdb create-blocks-from rules`, against a Prometheus serving `tsdb`), every hour from an
    hour before the window to its end, at the group's offset in the hour as a Prometheus server
    puts it, then written again as one block (`_one_block`) in their own folder (reused when
    written for the same TSDB, as `_backfill` records it, and the same rules)."""
    import yaml  # type: ignore[import-untyped,unused-ignore]  # noqa: PLC0415

    from gpuaudit.sources.prometheus import hourly  # noqa: PLC0415
    from tests.support.promserver import prometheus  # noqa: PLC0415
    from tests.support.servers import require  # noqa: PLC0415

    out = tmp / "hourly-blocks"
    done = tmp / "hourly.json"
    tsdb_of = json.loads((tmp / "backfilled.json").read_text())
    what = {"tsdb": tsdb_of, "days": days, "fingerprint": hourly.fingerprint("exported")}
    if done.exists() and json.loads(done.read_text()) == what:
        print(f"reusing the hourly rules' blocks in {out}", flush=True)
        return out
    shutil.rmtree(out, ignore_errors=True)
    evaluated = tmp / "hourly-promtool"
    shutil.rmtree(evaluated, ignore_errors=True)
    rules = tmp / "hourly.yml"
    rules.write_text(yaml.safe_dump({"groups": [hourly.group("exported")]}, sort_keys=False))
    t0 = time.perf_counter()
    with prometheus(tsdb, *_FROZEN) as url:
        proc = subprocess.run(
            [
                require("promtool"),
                "tsdb",
                "create-blocks-from",
                "rules",
                "-q",
                f"--start={end - days * 86400 - 3600}",
                f"--end={end}",
                f"--url={url}",
                f"--output-dir={evaluated}",
                str(rules),
            ],
            check=False,
            capture_output=True,
            text=True,
        )
    if proc.returncode:
        raise SystemExit(f"promtool failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    print(
        f"promtool evaluated the hourly rules in {time.perf_counter() - t0:.0f} s; {_uptime()}",
        flush=True,
    )
    names = [r["record"] for r in hourly.group("exported")["rules"]]
    _one_block(evaluated, out, names, end - days * 86400 - 3600, end)
    shutil.rmtree(evaluated)
    done.write_text(json.dumps(what))
    return out


def _one_block(blocks: Path, out: Path, names: list[str], start: int, end: int) -> None:
    """The series `names` of the TSDB folder `blocks`, from `start` to `end` (seconds), written
    again as one block in `out`: promtool writes a block per rule and per 2 hours (some 3,400
    for a week of the hourly group), where a server that evaluated the rules would have
    compacted them into a few. Read through a Prometheus serving `blocks` (each series' samples
    as stored, a range selector at `end`) and written by `tests.support.tsdbblocks`."""
    import httpx  # noqa: PLC0415
    import numpy as np  # noqa: PLC0415

    from tests.support.promserver import prometheus  # noqa: PLC0415
    from tests.support.tsdbblocks import BlockWriter  # noqa: PLC0415

    t0 = time.perf_counter()
    writer = BlockWriter(out, start * 1000, end * 1000 + 1)
    with prometheus(blocks) as url, httpx.Client(base_url=url, timeout=600) as client:
        for name in names:
            ans = (
                client.post(
                    "/api/v1/query", data={"query": f"{name}[{end - start}s]", "time": str(end)}
                )
                .raise_for_status()
                .json()
            )
            rows = ans["data"]["result"]
            labels = [{k: v for k, v in r["metric"].items() if k != "__name__"} for r in rows]
            counts = np.array([len(r["values"]) for r in rows], dtype=np.int64)
            off = np.r_[0, np.cumsum(counts)]
            pts = [p for r in rows for p in r["values"]]
            t = np.array([round(float(p[0]) * 1000) for p in pts], dtype=np.int64)
            v = np.array([float(p[1]) for p in pts], dtype=np.float64)
            writer.add(name, labels, off, t, v)
    writer.close()
    print(
        f"the hourly rules' {writer.samples / 1e6:.1f} M samples written as one block in "
        f"{time.perf_counter() - t0:.0f} s; {_uptime()}",
        flush=True,
    )


def _linked(into: Path, *folders: Path) -> Path:
    """A TSDB folder holding the blocks of every folder, as hard links (blocks are never
    changed in place)."""
    shutil.rmtree(into, ignore_errors=True)
    into.mkdir()
    for folder in folders:
        for block in folder.iterdir():
            if (block / "meta.json").exists():
                shutil.copytree(block, into / block.name, copy_function=os.link)
    return into


def _scans(label: str, url: str, live: list[str], out: Path, repeat: int, cli: Cli) -> None:
    """`_timed_scan` and `_report` at each `--parallel` value."""
    for n in PARALLELS:
        PARALLEL[0] = n
        _report(f"{label}, parallel {n}", *_timed_scan(url, live, out, repeat, cli=cli))


def recorded_bench(
    gpus: int,
    days: int,
    scrape: int,
    phase_ms: int,
    repeat: int,
    raw_too: bool,
    keep: Path | None = None,
    prepare_only: bool = False,
    backends: tuple[str, ...] = ("prometheus",),
    baseline: Path | None = None,
    other_repeat: int | None = None,
) -> None:
    """Raw series alone against raw plus recorded series, same scenario, default query limits,
    at each `--parallel` value. The 5-minute group's series generated for the whole window the
    way the rules compute them (`scenario.recorded`); the hourly group's evaluated over the raw
    series by the backend's own evaluator: promtool for Prometheus (its rules loaded, so that
    discovery finds the 5-minute ones), vmalert's replay for VictoriaMetrics (the TSDB's blocks
    imported by vmctl; raw scans first, then the replay, then the scans with rules).
    `baseline`: another checkout's gpuaudit timed the same way against the server with rules.
    `other_repeat`: the runs of the raw-series scans and the baseline's (else `repeat`), which
    at 10,000 GPUs take minutes each."""
    sys.path.insert(0, str(ROOT))
    import yaml  # type: ignore[import-untyped,unused-ignore]  # noqa: PLC0415

    from gpuaudit.sources.prometheus import hourly  # noqa: PLC0415
    from gpuaudit.sources.prometheus.rules import recording_rules  # noqa: PLC0415
    from tests.support.promserver import prometheus  # noqa: PLC0415
    from tests.support.vmalert import replay, write_rules  # noqa: PLC0415

    if phase_ms % 1000:
        raise SystemExit("--phase-ms must be whole seconds (gpuaudit's --end takes seconds)")
    what = (
        f"{gpus} GPUs x {days} d at {scrape} s, evaluations {phase_ms / 1000:g} s past each "
        "5-minute mark"
    )
    label = f"live {gpus:,} GPUs x {days} d"
    others = [("baseline", _baseline(baseline))] if baseline else []
    other = repeat if other_repeat is None else other_repeat
    with _workdir(keep, "gpuaudit-recorded-", what) as tmp:
        tsdb, end = _backfill(tmp, gpus, days, scrape, phase_ms)
        blocks = _hourly_blocks(tmp, tsdb, end, days) if "prometheus" in backends else None
        if prepare_only:
            if "vm" in backends:
                with _vm(tmp, tsdb, keep is not None):
                    pass
            return
        live = ["--window", f"{days}d", "--end", str(end)]
        if blocks is not None:
            rules = tmp / "rules.yml"
            rules.write_text(yaml.safe_dump({"groups": recording_rules("exported")}))
            if raw_too:
                with prometheus(tsdb, *_FROZEN) as url:
                    _scans(
                        f"{label}, prometheus, raw series",
                        url,
                        ["--prometheus-url", url, *live],
                        tmp / "raw.json",
                        other,
                        THIS,
                    )
            both = _linked(tmp / "tsdb-rules", tsdb, blocks)
            with prometheus(both, *_FROZEN, rule_files=(rules,)) as url:
                args = ["--prometheus-url", url, *live]
                _scans(f"{label}, prometheus", url, args, tmp / "rec.json", repeat, THIS)
                for name, cli in others:
                    _scans(f"{label}, prometheus, {name}", url, args, tmp / "base.json", other, cli)
        if "vm" in backends:
            with _vm(tmp, tsdb, keep is not None) as (url, state):
                args = ["--prometheus-url", url, *live]
                if raw_too and state.get("replayed"):
                    print(
                        "raw series not timed on VictoriaMetrics: it holds the hourly rules' "
                        "series, replayed by an earlier run into the kept folder",
                        flush=True,
                    )
                elif raw_too:
                    _scans(
                        f"{label}, victoriametrics, raw series",
                        url,
                        args,
                        tmp / "vmraw.json",
                        other,
                        THIS,
                    )
                t0 = time.perf_counter()
                start = end - days * 86400 - 3600
                fingerprint = hourly.fingerprint("exported")
                if state.get("replayed") == fingerprint:
                    print("reusing the hourly rules' series vmalert replayed", flush=True)
                elif state.get("replayed"):
                    raise SystemExit(
                        f"{tmp / 'vm'} holds the series of other hourly rules: remove it"
                    )
                else:
                    rules = write_rules(tmp / "vmalert.yml", [hourly.group("exported")])
                    n = replay(
                        url, rules, start - start % 3600, end - end % 3600, tmp / "vmalert.log"
                    )
                    state["replayed"] = fingerprint
                    (tmp / "vm.json").write_text(json.dumps(state))
                    print(
                        f"vmalert replayed the hourly rules in {time.perf_counter() - t0:.0f} s "
                        f"({n / 1e6:.1f} M samples); {_uptime()}",
                        flush=True,
                    )
                _scans(f"{label}, victoriametrics", url, args, tmp / "vmrec.json", repeat, THIS)
                for name, cli in others:
                    _scans(
                        f"{label}, victoriametrics, {name}",
                        url,
                        args,
                        tmp / "vmbase.json",
                        other,
                        cli,
                    )


@contextmanager
def _vm(tmp: Path, tsdb: Path, keep: bool) -> Iterator[tuple[str, dict[str, Any]]]:
    """A VictoriaMetrics serving the TSDB's blocks (imported by vmctl), and what its folder
    holds (`vm.json`: the TSDB it imported, whether the hourly rules were replayed into it).
    With `keep` (`--keep`), its folder is kept and reused for the same TSDB."""
    from tests.support.vmserver import import_tsdb, victoriametrics  # noqa: PLC0415

    marker = tmp / "vm.json"
    of = json.loads((tmp / "backfilled.json").read_text())
    state: dict[str, Any] = json.loads(marker.read_text()) if marker.exists() else {}
    if not keep or state.get("tsdb") != of:
        shutil.rmtree(tmp / "vm", ignore_errors=True)
        marker.unlink(missing_ok=True)
        state = {}
    (tmp / "vm").mkdir(exist_ok=True)
    with victoriametrics(tmp / "vm", keep=keep) as url:
        if state.get("tsdb") == of:
            print(f"reusing the VictoriaMetrics in {tmp / 'vm'}", flush=True)
        else:
            t0 = time.perf_counter()
            import_tsdb(url, tsdb, tmp / "vmctl.log")
            state = {"tsdb": of}
            marker.write_text(json.dumps(state))
            print(f"vmctl imported the TSDB in {time.perf_counter() - t0:.0f} s; {_uptime()}")
        yield url, state


def raw_bench(
    gpus: int,
    days: int,
    scrape: int,
    repeat: int,
    keep: Path | None = None,
    prepare_only: bool = False,
    replay: bool = True,
) -> None:
    """Raw series alone (no recorded series, no rules) under Prometheus' default limits
    (`--query.max-samples` 50,000,000, `--query.timeout` 2 min): the scan, its bare replay,
    and how the planner cut each query (`manifest.plan`)."""
    sys.path.insert(0, str(ROOT))
    from tests.support.promserver import prometheus  # noqa: PLC0415

    what = f"{gpus} GPUs x {days} d at {scrape} s, raw series only"
    with _workdir(keep, "gpuaudit-raw-", what) as tmp:
        tsdb, end = _backfill(tmp, gpus, days, scrape, None)
        if prepare_only:
            return
        with prometheus(tsdb, *_FROZEN) as url:
            live = ["--prometheus-url", url, "--window", f"{days}d", "--end", str(end)]
            scans, bare, manifest = _timed_scan(url, live, tmp / "raw.json", repeat, replay)
            _report("raw series", scans, bare, manifest)
            for qid, cuts in sorted((manifest.get("plan") or {}).items()):
                print(f"  plan {qid}: {json.dumps(cuts)}")


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
    ap.add_argument("--live-recorded", action="store_true")
    ap.add_argument(
        "--phase-ms",
        type=int,
        default=67_000,
        help="where the recording group's evaluations fall past each 5-minute mark",
    )
    ap.add_argument("--live-raw", action="store_true")
    ap.add_argument(
        "--live-repeat",
        type=int,
        default=3,
        help="scans (and bare replays) per server, live; 0: the snapshot save is timed, "
        "against one bare replay",
    )
    ap.add_argument(
        "--other-repeat",
        type=int,
        help="--live-recorded: runs of the raw-series scans and the baseline's (default: "
        "--live-repeat)",
    )
    ap.add_argument(
        "--parallel",
        default="1",
        help="live: gpuaudit's --parallel-queries, and the bare replay's queries in flight; "
        "--live-recorded: a list (1,2) times every scan at each",
    )
    ap.add_argument(
        "--backend",
        default="prometheus",
        help="--live-recorded: prometheus, vm (VictoriaMetrics with vmalert), or both "
        "(prometheus,vm)",
    )
    ap.add_argument(
        "--baseline-tree",
        type=Path,
        help="--live-recorded: also time the gpuaudit of this checkout (its .venv/bin/gpuaudit, "
        "else `python -m gpuaudit` with it on PYTHONPATH) against the server with the rules",
    )
    ap.add_argument(
        "--no-replay",
        action="store_true",
        help="--live-raw: time the collection alone, without replaying its requests bare",
    )
    ap.add_argument(
        "--skip-raw-server",
        action="store_true",
        help="--live-recorded: time only the server with the rules (not raw series alone)",
    )
    ap.add_argument(
        "--keep",
        type=Path,
        help="live: write (or reuse) the TSDB in this folder and keep it",
    )
    ap.add_argument(
        "--prepare-only", action="store_true", help="live: backfill (into --keep) and stop"
    )
    args = ap.parse_args()
    PARALLELS[:] = [int(n) for n in args.parallel.split(",")]
    PARALLEL[0] = PARALLELS[0]
    backends = tuple(b.strip() for b in args.backend.split(","))
    if not set(backends) <= {"prometheus", "vm"}:
        raise SystemExit(f"--backend {args.backend}: prometheus, vm or prometheus,vm")
    compiled()
    if args.prepare_only and args.keep is None:
        raise SystemExit("--prepare-only needs --keep")
    if args.live_recorded:
        recorded_bench(
            args.live_gpus,
            args.live_days,
            args.scrape,
            args.phase_ms,
            args.live_repeat,
            not args.skip_raw_server,
            args.keep,
            args.prepare_only,
            backends,
            args.baseline_tree,
            args.other_repeat,
        )
    elif args.live_raw:
        raw_bench(
            args.live_gpus,
            args.live_days,
            args.scrape,
            args.live_repeat,
            args.keep,
            args.prepare_only,
            not args.no_replay,
        )
    elif args.live:
        live_bench(args.live_gpus, args.live_days, args.scrape)
    else:
        snapshot_bench(
            [int(s) for s in args.sizes.split(",")], args.days, args.repeat, args.side_file
        )


if __name__ == "__main__":
    main()
