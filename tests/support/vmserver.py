"""A real VictoriaMetrics for tests: started on loopback and fed through its import API (where a
Prometheus is backfilled with promtool, VictoriaMetrics takes the samples as text)."""

from __future__ import annotations

import os
import pty
import shutil
import subprocess
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import httpx

from tests.support.promserver import free_port, server
from tests.support.servers import require

UUID_SHARDS = (
    *(f'UUID=~"GPU-[{d}{d.upper()}].*"' for d in "0123456789abcdef"),
    'UUID!~"GPU-[0-9a-fA-F].*"',
)
"""Selectors that split the GPUs by the first hex digit of their UUID (and the rest), so that
a server with a small series limit answers each part."""


@contextmanager
def victoriametrics(tmp: Path, *flags: str, keep: bool = False) -> Iterator[str]:
    """A real VictoriaMetrics on loopback, storing under `tmp` (removed afterwards unless
    `keep`), started with `flags`; yields its URL."""
    binary = require("victoria-metrics")
    port = free_port()
    cmd = [
        binary,
        f"-storageDataPath={tmp / 'data'}",
        f"-httpListenAddr=127.0.0.1:{port}",
        "-retentionPeriod=100y",
        *flags,
    ]
    try:
        with server(cmd, f"http://127.0.0.1:{port}", "/health", tmp / "vm.log") as url:
            yield url
    finally:
        if not keep:
            shutil.rmtree(tmp / "data", ignore_errors=True)


def import_lines(om: Path, labels: str = "") -> Iterator[str]:
    """OpenMetrics (seconds) -> VictoriaMetrics' Prometheus text import (milliseconds), with
    `labels` (`cluster="a",pair="p0"`) added to every sample."""
    with open(om, encoding="utf-8") as fh:
        for line in fh:
            if line.startswith("#"):
                continue
            head, ts = line.rsplit(" ", 1)
            if labels:
                name, brace, rest = head.partition("{")
                if brace:
                    head = f"{name}{{{labels},{rest}"
                else:
                    series, value = head.rsplit(" ", 1)
                    head = f"{series}{{{labels}}} {value}"
            yield f"{head} {int(ts) * 1000}\n"


def import_samples(url: str, lines: Iterable[str]) -> None:
    """Post Prometheus text lines to the import API, in chunks, and flush them to storage."""
    r = httpx.post(f"{url}/api/v1/import/prometheus", content=_chunks(lines), timeout=600)
    assert r.status_code == 204, r.text
    httpx.get(f"{url}/internal/force_flush", timeout=60)


def _chunks(lines: Iterable[str], size: int = 50_000) -> Iterator[bytes]:
    buf: list[str] = []
    for line in lines:
        buf.append(line)
        if len(buf) >= size:
            yield "".join(buf).encode()
            buf = []
    if buf:
        yield "".join(buf).encode()


def wait_for_samples(
    url: str, metric: str, samples: float, end: int, days: int, shards: Sequence[str] = ("",)
) -> None:
    """Imported rows become searchable asynchronously: wait until `samples` samples of
    `metric` over the `days` before `end` are there, counted one shard selector at a time."""
    deadline = time.monotonic() + 300
    while True:
        httpx.get(f"{url}/internal/force_flush", timeout=60)
        total = 0.0
        for shard in shards:
            selector = f"{metric}{{{shard}}}" if shard else metric
            q = httpx.post(
                f"{url}/api/v1/query",
                data={
                    "query": f"sum(count_over_time({selector}[{days + 1}d]))",
                    "time": str(end),
                },
                timeout=60,
            ).json()
            assert q.get("status") == "success", q
            got = q["data"]["result"]
            total += float(got[0]["value"][1]) if got else 0.0
        if total >= samples:
            return
        assert time.monotonic() < deadline, "imported data never became searchable"
        time.sleep(0.2)


def import_tsdb(url: str, tsdb: Path, log: Path) -> None:
    """Import every block of the Prometheus TSDB folder `tsdb` into the VictoriaMetrics at
    `url` with vmctl (Debian's `victoria-metrics` package), reading the blocks themselves (a
    fleet's week is too much text for the import API), and flush it to storage."""
    cmd = [
        require("vmctl"),
        "prometheus",
        "-s",
        f"--prom-snapshot={tsdb}",
        "--prom-concurrency=2",
        f"--vm-addr={url}",
        "--vm-concurrency=2",
        "--vm-disable-progress-bar",
    ]
    # vmctl sets its input's terminal up even when told not to ask (`-s`), and fails where
    # that is no terminal: give it one.
    main, other = pty.openpty()
    try:
        with open(log, "wb") as fh:
            proc = subprocess.run(
                cmd, stdin=other, stdout=fh, stderr=subprocess.STDOUT, check=False
            )
    finally:
        os.close(main)
        os.close(other)
    assert proc.returncode == 0, f"vmctl failed: {log.read_text(errors='replace')[-3000:]}"
    httpx.get(f"{url}/internal/force_flush", timeout=600)
