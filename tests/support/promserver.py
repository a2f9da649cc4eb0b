"""A real Prometheus server for tests: a scenario backfilled with promtool, served on loopback."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from gpuaudit.scenario import generate, k8s_lists, write_openmetrics, write_snapshot
from tests.support.servers import require


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Backfilled:
    """A scenario written as a snapshot and backfilled into a TSDB directory."""

    snapshot_path: Path
    tsdb: Path
    k8s_dir: Path
    end: int
    days: int
    gpus: int


def create_blocks(om: Path, tsdb: Path) -> None:
    """Backfill the OpenMetrics file `om` into the TSDB folder `tsdb` with promtool, in blocks
    of up to a week."""
    subprocess.run(
        [
            require("promtool"),
            "tsdb",
            "create-blocks-from",
            "openmetrics",
            "-q",
            "--max-block-duration=168h",
            str(om),
            str(tsdb),
        ],
        check=True,
        capture_output=True,
    )


def backfill(
    tmp: Path,
    gpus: int,
    days: int,
    seed: int,
    scrape_s: int,
    style: str = "helm",
    by_day: bool = False,
) -> Backfilled:
    """`by_day` writes and backfills one day at a time (a week of 1,000 GPUs at 60 s is some
    60 GB of OpenMetrics text in one piece)."""
    require("promtool")
    sc = generate(gpus, days, seed, scrape_s=scrape_s)
    tmp.mkdir(parents=True, exist_ok=True)
    snap_path = tmp / "scenario.snapshot.json.gz"
    write_snapshot(sc, snap_path, style, "test")
    tsdb = tmp / "tsdb"
    spans = [(24 * d, 24 * d + 24) for d in range(days + 1)] if by_day else [None]
    for span in spans:
        om = tmp / "scenario.om"
        with open(om, "w", encoding="utf-8") as fh:
            write_openmetrics(sc, fh, style, hours=span)
        create_blocks(om, tsdb)
        om.unlink()
    k8s = tmp / "k8s"
    k8s.mkdir(exist_ok=True)
    import json

    for name, lst in k8s_lists(sc).items():
        (k8s / f"{name}.json").write_text(json.dumps(lst))
    return Backfilled(snap_path, tsdb, k8s, sc.end, days, gpus)


@contextmanager
def prometheus(tsdb: Path, *extra: str, rule_files: tuple[Path, ...] = ()) -> Iterator[str]:
    """Start Prometheus over a copy of a TSDB directory (loading `rule_files`, whose rules
    the rules API then lists); yields its URL."""
    binary = require("prometheus")
    port = free_port()
    # Each server gets its own directory: Prometheus locks and writes it. Block files are
    # never changed in place (compaction writes new blocks), so they are hard links.
    data = tsdb.parent / f"data-{port}"
    shutil.copytree(tsdb, data, copy_function=os.link)
    tsdb = data
    cfg = tsdb.parent / f"prom-{port}.yml"
    rules = "".join(f"  - {f}\n" for f in rule_files)
    cfg.write_text(
        "global:\n  scrape_interval: 60s\nscrape_configs: []\n"
        + (f"rule_files:\n{rules}" if rules else "")
    )
    cmd = [
        binary,
        f"--config.file={cfg}",
        f"--storage.tsdb.path={tsdb}",
        "--storage.tsdb.retention.time=3650d",
        f"--web.listen-address=127.0.0.1:{port}",
        *extra,
    ]
    with server(
        cmd, f"http://127.0.0.1:{port}", "/-/ready", tsdb.parent / f"prom-{port}.log"
    ) as url:
        yield url


@contextmanager
def server(cmd: list[str], url: str, ready_path: str, log_path: Path) -> Iterator[str]:
    """Run a server process until the block ends; yields `url` once `ready_path` answers 200."""
    log = open(log_path, "wb")  # noqa: SIM115
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{url}{ready_path}", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                log.close()
                raise RuntimeError(
                    f"{cmd[0]} did not become ready: " + log_path.read_text()[-2000:]
                )
            time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
