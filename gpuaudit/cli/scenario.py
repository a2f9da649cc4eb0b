"""`gpuaudit scenario`: generate test data with planted problems."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated as A

from gpuaudit.cli.options import failing, opt

HELP = {
    "--gpus": "About how many GPUs.",
    "--days": "Window length in days.",
    "--seed": "Random seed.",
    "--output": "Snapshot file to write (.json or .json.gz).",
    "--truth": "Write the planted problems as JSON.",
    "--openmetrics": "Write every sample as OpenMetrics for promtool backfill.",
    "--k8s-dir": "Write the Kubernetes objects as list JSON files.",
    "--end": "Window end (default 2026-11-23T00:00:00Z).",
    "--scrape-interval": "Seconds between samples.",
    "--label-style": "DCGM label spelling: helm (exported_pod), honor (pod) or old (pod_name).",
}


def scenario(
    gpus: A[int, opt("--gpus", table=HELP)] = 400,
    days: A[int, opt("--days", table=HELP)] = 7,
    seed: A[int, opt("--seed", table=HELP)] = 1,
    output: A[Path, opt("--output", "-o", table=HELP)] = Path("scenario.snapshot.json.gz"),
    truth: A[Path | None, opt("--truth", table=HELP)] = None,
    openmetrics: A[Path | None, opt("--openmetrics", table=HELP)] = None,
    k8s_dir: A[Path | None, opt("--k8s-dir", table=HELP)] = None,
    end: A[str | None, opt("--end", table=HELP)] = None,
    scrape_interval: A[int, opt("--scrape-interval", table=HELP)] = 60,
    label_style: A[str, opt("--label-style", table=HELP)] = "helm",
) -> None:
    """Generate a deterministic cluster scenario with planted problems."""
    from gpuaudit import scenario_files  # lazy: it loads numpy, which would slow `--help`

    with failing():
        scenario_files.write_scenario(
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
