"""The TSDB blocks `tests.support.tsdbblocks` writes directly hold exactly what promtool backfills
from the same samples as OpenMetrics text: every sample of every series under `promtool tsdb
dump` (which reads them through Prometheus' own index and chunk readers, checksums included),
and the same audit when a real Prometheus serves them."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from gpuaudit.cli import app
from gpuaudit.scenario import generate, write_openmetrics
from gpuaudit.scenario.recorded_series import write_recorded
from tests.support.promserver import create_blocks, prometheus
from tests.support.servers import require
from tests.support.tsdbblocks import SAMPLES_PER_CHUNK, write_blocks, write_scenario

runner = CliRunner()


def _dump(tsdb: Path) -> list[str]:
    (tsdb / "wal").mkdir(exist_ok=True)
    out = subprocess.run(
        [require("promtool"), "tsdb", "dump", str(tsdb)], check=True, capture_output=True, text=True
    ).stdout
    return sorted(out.splitlines())


def _dump_sorted(tsdb: Path) -> tuple[Path, int]:
    """`promtool tsdb dump`, sorted by the C locale into a file beside the TSDB, and its number
    of lines: a scenario's dump runs to millions of lines, which a list of strings holds in
    gigabytes."""
    (tsdb / "wal").mkdir(exist_ok=True)
    raw, out = tsdb.with_suffix(".dump"), tsdb.with_suffix(".sorted")
    with open(raw, "wb") as fh:
        subprocess.run([require("promtool"), "tsdb", "dump", str(tsdb)], check=True, stdout=fh)
    subprocess.run(
        ["sort", "-o", str(out), str(raw)], check=True, env={"LC_ALL": "C", "PATH": "/usr/bin:/bin"}
    )
    raw.unlink()
    with open(out, "rb") as fh:
        lines = sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 20), b""))
    return out, lines


def _same_file(a: Path, b: Path) -> bool:
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while True:
            x, y = fa.read(1 << 20), fb.read(1 << 20)
            if x != y:
                return False
            if not x:
                return True


class _NoEOF:
    def __init__(self, fh: Any) -> None:
        self.fh = fh

    def write(self, text: str) -> int:
        return 0 if text == "# EOF\n" else int(self.fh.write(text))


def test_irregular_series_read_back_as_promtool_writes_them(tmp_path: Path) -> None:
    """Gaps of every size (each timestamp encoding), repeated and changing values of every
    magnitude and sign, a series of one sample and one of several chunks, labels with
    escapes and non-ASCII values, given out of order."""
    rng = np.random.default_rng(7)
    labels = [
        {"job": "b", "pod": 'q"uo\\te'},
        {"job": "a", "zone": "é-ü"},
        {"job": "a"},
        {"job": "c", "empty": ""},
    ]
    sizes = [1, 3 * SAMPLES_PER_CHUNK + 7, SAMPLES_PER_CHUNK, 50]
    values = np.array([0.0, -0.0, 1.0, 2.5, -3.25, 1e-9, 7e30, 123456789.123, 1 / 3])
    t_parts, v_parts = [], []
    for n in sizes:
        steps = rng.choice([15_000, 15_000, 1, 8_000, 70_000, 600_000, 5_000_000], n)
        t_parts.append(1_700_000_000_000 + np.cumsum(steps))
        v_parts.append(rng.choice(values, n))
    off = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=off[1:])
    t, v = np.concatenate(t_parts), np.concatenate(v_parts)
    write_blocks(tmp_path / "mine", [(int(t.min()), int(t.max()) + 1, [("m", labels, off, t, v)])])
    om = tmp_path / "in.om"
    with open(om, "w", encoding="utf-8") as fh:
        fh.write("# TYPE m gauge\n")
        for i, lab in enumerate(labels):
            text = ",".join(
                f'{k}="{x.replace(chr(92), chr(92) * 2).replace(chr(34), chr(92) + chr(34))}"'
                for k, x in lab.items()
            )
            for j in range(off[i], off[i + 1]):
                sec, ms = divmod(int(t[j]), 1000)
                fh.write(f"m{{{text}}} {float(v[j])!r} {sec}.{ms:03d}5\n")
        fh.write("# EOF\n")
    create_blocks(om, tmp_path / "ref")
    mine = _dump(tmp_path / "mine")
    assert len(mine) == sum(sizes)
    assert mine == _dump(tmp_path / "ref")


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("scrape", [60, 15])
def test_a_scenario_reads_back_and_audits_as_promtool_backfills_it(
    tmp_path: Path, scrape: int
) -> None:
    """Raw and recorded series of a scenario, in blocks of 6 hours: the same samples, and the
    same audit from a real Prometheus serving each. At an odd scrape interval (15 s) the
    samples fall on half seconds, written `.5` in the text promtool reads."""
    sc = generate(12, 1, 5, scrape_s=scrape)
    raw, rec = write_scenario(sc, tmp_path / "mine", phase_ms=67_000, block_hours=6)
    assert raw and rec
    assert len([p for p in (tmp_path / "mine").iterdir() if (p / "meta.json").exists()]) == 4
    om = tmp_path / "in.om"
    with open(om, "w", encoding="utf-8") as fh:
        write_openmetrics(sc, _NoEOF(fh), "helm")  # type: ignore[arg-type]
        write_recorded(sc, fh, "helm", 67_000)
    create_blocks(om, tmp_path / "ref")
    om.unlink()
    mine, lines = _dump_sorted(tmp_path / "mine")
    assert lines == raw + rec
    ref, _ = _dump_sorted(tmp_path / "ref")
    assert _same_file(mine, ref)
    mine.unlink()
    ref.unlink()
    docs = []
    for tsdb in ("mine", "ref"):
        with prometheus(tmp_path / tsdb) as url:
            args = ["--prometheus-url", url, "--window", "1d", "--end", str(sc.end)]
            res = runner.invoke(app, ["scan", "-f", "json", "-q", "--no-kubernetes", *args])
            assert res.exit_code in (0, 1), res.output
            docs.append(json.loads(res.stdout))
    assert docs[0]["findings"] and docs[0]["findings"] == docs[1]["findings"]
    assert docs[0]["summary"] == docs[1]["summary"]
