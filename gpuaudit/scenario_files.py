"""`gpuaudit scenario`: a deterministic scenario with planted problems, written to files (the
snapshot, and where asked the planted problems, OpenMetrics samples and Kubernetes objects)."""

from __future__ import annotations

import json
from pathlib import Path

from gpuaudit.config import parse_end
from gpuaudit.errors import ConfigError, GpuauditError
from gpuaudit.pipeline import write_text
from gpuaudit.scenario import DEFAULT_END, generate, k8s_lists, write_openmetrics, write_snapshot
from gpuaudit.scenario.emit import LABEL_STYLES


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
) -> None:
    """Generate a deterministic scenario and write its snapshot and, where asked, its planted
    problems, OpenMetrics samples and Kubernetes objects (`gpuaudit scenario`)."""
    if label_style not in LABEL_STYLES:
        raise ConfigError(f"--label-style must be one of {', '.join(LABEL_STYLES)}")
    end_ts = parse_end(end)
    end_i = int(end_ts) if end_ts is not None else DEFAULT_END
    end_i -= end_i % 3600
    try:
        sc = generate(gpus, days, seed, end=end_i, scrape_s=scrape_interval)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    cmd = (
        f"gpuaudit scenario --gpus {gpus} --days {days} --seed {seed} "
        f"--scrape-interval {scrape_interval} --label-style {label_style}"
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
