"""`gpuaudit scenario`: a deterministic scenario with planted problems, written to files (the
snapshot, and where asked the planted problems, OpenMetrics samples and Kubernetes objects).

OpenMetrics text holds every sample of every series, about 300 bytes each: a week of a few
hundred GPUs at the default scrape interval is tens of gigabytes. The size is worked out before
anything is written, said on stderr, and above `OPENMETRICS_LIMIT` the file is written only
when asked for (`--yes`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import numpy.typing as npt

from gpuaudit.app.config import parse_end
from gpuaudit.app.pipeline import write_text
from gpuaudit.core.errors import ConfigError, GpuauditError
from gpuaudit.report.text import num, plural
from gpuaudit.scenario import DEFAULT_END, generate, k8s_lists, write_openmetrics, write_snapshot
from gpuaudit.scenario.emit import LABEL_STYLES
from gpuaudit.scenario.generator import Scenario
from gpuaudit.scenario.next_week_cases import generate_next_week
from gpuaudit.scenario.series import INT_METRICS, RAMPED, WRITTEN, Table, counter_samples, fmt
from gpuaudit.snapshot import index

OPENMETRICS_LIMIT = 10**9
"""Largest `--openmetrics` file written without `--yes` (bytes)."""


def write_scenario(
    *,
    gpus: int,
    days: int,
    seed: int,
    output: Path,
    truth: Path | None,
    openmetrics: Path | None,
    k8s_dir: Path | None,
    end: str | None,
    scrape_interval: int,
    label_style: str,
    large_ok: bool = False,
    say: Callable[[str], None] | None = None,
    side_file: bool = True,
    next_week: bool = False,
) -> None:
    """Generate a deterministic scenario and write its snapshot and, where asked, its planted
    problems, OpenMetrics samples and Kubernetes objects (`gpuaudit scenario`). `say` gets the
    size of the OpenMetrics file before it is written; above `OPENMETRICS_LIMIT` it is refused
    (`ConfigError`, before any file is written) unless `large_ok`. `side_file`: write the
    snapshot's columnar side-file too (`snapshot.index`), from the file once the scenario is
    let go of, so that the first scan of it skips parsing its text. `next_week`: the week after
    that scenario, some of its findings fixed and one new (`scenario.next_week_cases`; its
    window ends a week after `end`)."""
    if label_style not in LABEL_STYLES:
        raise ConfigError(f"--label-style must be one of {', '.join(LABEL_STYLES)}")
    end_ts = parse_end(end)
    end_i = int(end_ts) if end_ts is not None else DEFAULT_END
    end_i -= end_i % 3600
    try:
        make = generate_next_week if next_week else generate
        sc = make(gpus, days, seed, end=end_i, scrape_s=scrape_interval)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if openmetrics:
        _check_size(sc, label_style, openmetrics, large_ok, say)
    cmd = (
        f"gpuaudit scenario --gpus {gpus} --days {days} --seed {seed} "
        f"--scrape-interval {scrape_interval} --label-style {label_style}"
        + (" --next-week" if next_week else "")
    )
    try:
        write_snapshot(sc, output, label_style, cmd)
        if truth:
            write_text(truth, json.dumps(sc.truth, indent=2, sort_keys=True) + "\n")
        if openmetrics:
            with open(openmetrics, "w", encoding="utf-8") as fh:
                write_openmetrics(sc, fh, label_style)
        if k8s_dir:
            k8s_dir.mkdir(parents=True, exist_ok=True)
            for name, lst in k8s_lists(sc).items():
                write_text(k8s_dir / f"{name}.json", json.dumps(lst, indent=1, sort_keys=True))
    except OSError as exc:
        raise GpuauditError(f"cannot write scenario output: {exc}") from None
    if side_file:
        del sc  # the side-file is read from the file: the scenario's memory is not needed
        index(output)


def _check_size(
    sc: Scenario,
    style: str,
    path: Path,
    large_ok: bool,
    say: Callable[[str], None] | None,
) -> None:
    size = openmetrics_bytes(sc, style)
    what = (
        f"--openmetrics {path} will be about {size_text(size)} "
        f"({plural(sc.days, 'day')} at one sample every {sc.scrape_s} s)"
    )
    if size > OPENMETRICS_LIMIT and not large_ok:
        raise ConfigError(
            f"{what}, more than {size_text(OPENMETRICS_LIMIT)}; pass --yes to write it, or "
            "ask for fewer --gpus or --days or a longer --scrape-interval"
        )
    if say is not None:
        say(what)


def size_text(n: float) -> str:
    """A size in bytes as people read it: `950 kB`, `1.4 GB` (powers of 1,000, as `df -H`)."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            digits = 1 if n < 10 * scale and round(n / scale, 1) != round(n / scale) else 0
            return f"{num(n / scale, digits)} {unit}"
    return f"{num(n)} bytes"


def openmetrics_bytes(sc: Scenario, style: str) -> int:
    """The size of `write_openmetrics(sc, ..., style)`, worked out from the series' labels and
    values without writing the text: every line is `metric{labels} value timestamp`."""
    table = Table(sc, style)
    per_hour = 3600 // sc.scrape_s
    half = per_hour // 2
    # The timestamps of one hour, as written: one per sample.
    stamp = len(f" {sc.start + 3600 * max(1, sc.days * 24)}\n")
    total = len("# EOF\n")
    for m in WRITTEN:
        total += len(f"# TYPE {m} gauge\n")
        v = table.values(m)
        if v is None:
            continue
        lengths = v.lengths
        label_len = np.array([len(_label_text(lab)) for lab in v.labels], dtype=np.int64)
        # Per sample: the metric, the braces and a space, the labels, the timestamp.
        total += int((lengths * per_hour * (len(m) + 3 + label_len + stamp)).sum())
        if m in RAMPED:
            # A counter's samples ramp up, each written as it is (few series: the GPUs whose
            # exporter has the violation counters, the containers whose CPU cAdvisor reports).
            total += sum(len(fmt(x)) for x in counter_samples(v, per_hour).ravel().tolist())
            continue
        whole = m in INT_METRICS
        total += half * int(_text_lengths(v.hi, whole).sum() + _text_lengths(v.lo, whole).sum())
    return total


def _label_text(labels: dict[str, str]) -> str:
    def esc(x: str) -> str:
        return x.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")

    return ",".join(f'{k}="{esc(x)}"' for k, x in labels.items())


def _text_lengths(values: npt.NDArray[np.float64], whole: bool) -> npt.NDArray[np.int64]:
    """The length of each value as written: `%d` for whole-number metrics, else `%.6f`."""
    mag = np.abs(np.round(values) if whole else values)
    digits = np.floor(np.log10(np.maximum(mag, 1.0))).astype(np.int64) + 1
    sign = ((values < 0) & (np.round(values, 0 if whole else 6) != 0)).astype(np.int64)
    out: npt.NDArray[np.int64] = digits + sign + (0 if whole else 7)
    return out
