"""Record gpuaudit's user-visible outputs into a folder, to compare them byte for byte across a
refactor (`diff -r before/ after/`).

    .venv/bin/python scripts/record_outputs.py OUT_DIR [--no-live]

What it records, each run as a subprocess of the installed console script with a fixed terminal
width: every command's `--help`; the demo in every report format (and with `--all`,
`--group-by-label team`, `--what-if release-idle`); a generated 1,000-GPU scenario in every
format; and, unless `--no-live`, live scans of a backfilled scenario through a real Prometheus,
with the test API server and without Kubernetes. The only edits are to what names the run
rather than the data: `generated_at`, temporary paths and loopback ports.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import typer.main

from gpuaudit.cli import app

ROOT = Path(__file__).resolve().parent.parent
GPUAUDIT = str(Path(sys.executable).parent / "gpuaudit")
FORMATS = ("table", "json", "markdown", "html", "junit")
ENV = {**os.environ, "COLUMNS": "100", "TERM": "dumb", "NO_COLOR": "1"}
for key in [k for k in ENV if k.startswith("GPUAUDIT_") or k == "KUBECONFIG"]:
    del ENV[key]


def _commands(cmd: Any, path: tuple[str, ...]) -> list[tuple[str, ...]]:
    out = [path]
    if hasattr(cmd, "commands"):
        for name, sub in sorted(cmd.commands.items()):
            out += _commands(sub, (*path, name))
    return out


def _normalise(text: str, tmp: str) -> str:
    text = re.sub(r'"generated_at": "[^"]*"', '"generated_at": "-"', text)
    text = re.sub(r"generated_at=\"[^\"]*\"", 'generated_at="-"', text)
    text = re.sub(r"(generated|Generated)( at)? \d{4}-\d\d-\d\dT[\d:]+Z", r"\1\2 -", text)
    text = re.sub(r'timestamp="[^"]*"', 'timestamp="-"', text)
    text = text.replace(tmp, "TMP")
    return re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:PORT", text)


def _run(out: Path, name: str, args: list[str], tmp: str, cwd: str | None = None) -> None:
    res = subprocess.run(
        [GPUAUDIT, *args], capture_output=True, text=True, env=ENV, cwd=cwd or tmp, check=False
    )
    body = _normalise(res.stdout, tmp)
    err = _normalise(res.stderr, tmp)
    (out / f"{name}.out").write_text(f"exit {res.returncode}\n{body}")
    (out / f"{name}.err").write_text(err)


def record_help(out: Path, tmp: str) -> None:
    for path in _commands(typer.main.get_command(app), ()):
        name = "help-" + ("-".join(path) or "gpuaudit")
        _run(out, name, [*path, "--help"], tmp)


def record_demo(out: Path, tmp: str) -> None:
    for fmt in FORMATS:
        _run(out, f"demo-{fmt}", ["scan", "--demo", "-f", fmt], tmp)
    _run(out, "demo-table-all", ["scan", "--demo", "--all"], tmp)
    _run(out, "demo-json-team", ["scan", "--demo", "-f", "json", "--group-by-label", "team"], tmp)
    whatif = ["--what-if", "release-idle"]
    _run(out, "demo-md-whatif", ["scan", "--demo", "-f", "markdown", *whatif], tmp)
    _run(out, "checks", ["checks"], tmp)
    _run(out, "explain-GPU001", ["explain", "GPU001"], tmp)
    _run(out, "rules", ["rules"], tmp)


def record_scenario(out: Path, tmp: str) -> None:
    snap = f"{tmp}/s1000.snapshot.json.gz"
    subprocess.run(
        [GPUAUDIT, "scenario", "--gpus", "1000", "--days", "7", "--seed", "3", "-o", snap],
        check=True,
        env=ENV,
        capture_output=True,
    )
    for fmt in FORMATS:
        _run(out, f"s1000-{fmt}", ["scan", "--snapshot", snap, "-f", fmt], tmp)


def record_live(out: Path, tmp: str) -> None:
    sys.path.insert(0, str(ROOT))
    try:
        from tests.support.apiserver import KubeAPIServer, make_tls  # type: ignore
        from tests.support.promserver import backfill, prometheus  # type: ignore
    except ImportError:
        from tests.support.apiserver import KubeAPIServer, make_tls  # type: ignore
        from tests.support.promserver import backfill, prometheus  # type: ignore
    b = backfill(Path(tmp) / "live", gpus=60, days=2, seed=5, scrape_s=300)
    window = ["--window", f"{b.days}d", "--end", str(b.end)]
    tls = make_tls(Path(tmp) / "tls")
    with prometheus(b.tsdb) as url, KubeAPIServer.from_dir(b.k8s_dir, tls=tls) as srv:
        kubeconfig = srv.write_kubeconfig(Path(tmp) / "kubeconfig")
        for fmt in FORMATS:
            live = ["scan", "--prometheus-url", url, *window, "-f", fmt]
            _run(out, f"live-k8s-{fmt}", [*live, "--kubeconfig", str(kubeconfig)], tmp)
            _run(out, f"live-nok8s-{fmt}", [*live, "--no-kubernetes"], tmp)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--no-live", action="store_true")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        record_help(args.out, tmp)
        record_demo(args.out, tmp)
        record_scenario(args.out, tmp)
        if not args.no_live:
            record_live(args.out, tmp)


if __name__ == "__main__":
    main()
