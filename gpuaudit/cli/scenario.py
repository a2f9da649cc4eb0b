"""`gpuaudit scenario`: generate test data with planted problems."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from gpuaudit.cli.options import failing, opt


def scenario(
    gpus: Annotated[int, opt("--gpus", "About how many GPUs.")] = 400,
    days: Annotated[int, opt("--days", "Window length in days.")] = 7,
    seed: Annotated[int, opt("--seed", "Random seed.")] = 1,
    output: Annotated[
        Path, opt("--output", "Snapshot file to write (.json or .json.gz).", None, "-o")
    ] = Path("scenario.snapshot.json.gz"),
    truth: Annotated[Path | None, opt("--truth", "Write the planted problems as JSON.")] = None,
    openmetrics: Annotated[
        Path | None,
        opt("--openmetrics", "Write every sample as OpenMetrics for promtool backfill."),
    ] = None,
    k8s_dir: Annotated[
        Path | None, opt("--k8s-dir", "Write the Kubernetes objects as list JSON files.")
    ] = None,
    end: Annotated[str | None, opt("--end", "Window end (default 2026-11-23T00:00:00Z).")] = None,
    scrape_interval: Annotated[int, opt("--scrape-interval", "Seconds between samples.")] = 60,
    label_style: Annotated[
        str,
        opt(
            "--label-style",
            "DCGM label spelling: helm (exported_pod), honor (pod) or old (pod_name).",
        ),
    ] = "helm",
) -> None:
    """Generate a deterministic cluster scenario with planted problems."""
    # Lazy: the generator loads numpy, which would slow `gpuaudit --help`.
    from gpuaudit import pipeline

    with failing():
        pipeline.write_scenario(
            gpus=gpus,
            days=days,
            seed=seed,
            output=output,
            truth=truth,
            openmetrics=openmetrics,
            k8s_dir=k8s_dir,
            end=end,
            scrape_interval=scrape_interval,
            label_style=label_style,
        )
