"""`gpuaudit scenario`: generate test data with planted problems."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated as A

from gpuaudit.console.params import opt
from gpuaudit.console.style import failing

HELP = {
    "--gpus": "About how many GPUs.",
    "--days": "Window length in days.",
    "--seed": "Random seed.",
    "--output": "Snapshot file to write (.json or .json.gz).",
    "--truth": "Write the planted problems as JSON.",
    "--openmetrics": "Write every sample as OpenMetrics for promtool backfill.",
    "--k8s-dir": "Write the Kubernetes objects as list JSON files.",
    "--end": "Window end (default 2026-11-23T00:00:00Z).",
    "--scrape-interval": "Seconds between samples: a whole number that divides 30 minutes.",
    "--label-style": "DCGM label spelling: helm (exported_pod), honor (pod) or old (pod_name).",
    "--yes": "Write --openmetrics even when it will be larger than 1 GB.",
    "--quiet": "Do not print the size of the --openmetrics file on stderr.",
    "--next-week": (
        "The same cluster one week later (its window ends a week after --end): some planted "
        "findings fixed (a pod gone, a Deployment scaled to 0), the rest still open, one new; "
        "the truth's next_week lists which. Scan it with --previous last week's JSON report."
    ),
    "--no-side-file": (
        "Do not write the snapshot's columnar side-file (FILE.columns), which lets every scan "
        "of it skip parsing its text and takes about four times the disk of a gzipped snapshot."
    ),
}


def _opt(flag: str, *short: str, metavar: str = "", **kw: object) -> object:
    return opt(flag, *short, table=HELP, command="scenario", metavar=metavar, **kw)


_WRITTEN = {"readable": False}
"""What a file the command writes is declared with: Click must not refuse it as "not
readable"."""


def scenario(
    gpus: A[int, _opt("--gpus", metavar="N")] = 400,
    days: A[int, _opt("--days", metavar="N")] = 7,
    seed: A[int, _opt("--seed", metavar="N")] = 1,
    output: A[Path, _opt("--output", "-o", metavar="FILE", **_WRITTEN)] = Path(
        "scenario.snapshot.json.gz"
    ),
    truth: A[Path | None, _opt("--truth", metavar="FILE", **_WRITTEN)] = None,
    openmetrics: A[Path | None, _opt("--openmetrics", metavar="FILE", **_WRITTEN)] = None,
    k8s_dir: A[Path | None, _opt("--k8s-dir", metavar="DIR", **_WRITTEN)] = None,
    end: A[str | None, _opt("--end", metavar="TIME")] = None,
    scrape_interval: A[int, _opt("--scrape-interval", metavar="SECONDS")] = 60,
    label_style: A[str, _opt("--label-style", metavar="helm|honor|old")] = "helm",
    yes: A[bool, _opt("--yes", "-y")] = False,
    quiet: A[bool, _opt("--quiet", "-q")] = False,
    no_side_file: A[bool, _opt("--no-side-file")] = False,
    next_week: A[bool, _opt("--next-week")] = False,
) -> None:
    """Generate a deterministic cluster scenario with planted problems."""
    from gpuaudit.app import scenario_files  # lazy: it loads numpy, which would slow `--help`

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
            large_ok=yes,
            say=None if quiet else _say,
            side_file=not no_side_file,
            next_week=next_week,
        )


def _say(line: str) -> None:
    sys.stderr.write(f"gpuaudit: {line}\n")
