"""`gpuaudit ack`: accept one finding until a date, written as a waiver into `gpuaudit.toml`
(`gpuaudit.app.acknowledge`)."""

from __future__ import annotations

import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated as A

import typer

from gpuaudit.console.params import opt
from gpuaudit.console.style import failing, fit_terminal

HELP = (
    "Accept one finding until a date: write a waiver of its fingerprint, with the reason and "
    "who accepted it, into the waivers of gpuaudit.toml (--config), or of the file its "
    "waivers_file names, keeping the file's comments and layout; the acknowledgement is a "
    "dated line to review in Git. Until then scan lists the finding as waived; after it the "
    "finding is reported again with what the waiver said.\n\n"
    "The fingerprint must be a finding's of the report you read (--report-json, such as the "
    "cron job's JSON report) or of an audit of --demo or --snapshot FILE. Refused, with one "
    "line and exit code 2: an unknown fingerprint, a date in the past (UTC), no reason."
)

ACK_HELP = {
    "--until": "The last day the waiver applies, YYYY-MM-DD (today or later, UTC).",
    "--reason": "Why the finding is accepted (one line, required).",
    "--by": "Who accepts it (written beside the reason).",
    "--report-json": "An earlier `scan --format json` report the fingerprint is one of.",
    "--demo": "The fingerprint is of a finding of the bundled demo.",
    "--snapshot": "The fingerprint is of a finding of this saved snapshot.",
    "--config": "The gpuaudit.toml to write the waiver into (default ./gpuaudit.toml, created "
    "if missing); where it sets waivers_file, that file instead.",
}


def ack(
    fingerprint: A[str, typer.Argument(help="The finding's fingerprint (findings[].fingerprint).")],
    until: A[str, opt("--until", table=ACK_HELP, command="ack", metavar="DATE")],
    reason: A[str, opt("--reason", table=ACK_HELP, command="ack", metavar="TEXT")] = "",
    by: A[str, opt("--by", table=ACK_HELP, command="ack", metavar="NAME")] = "",
    report_json: A[
        Path | None, opt("--report-json", table=ACK_HELP, command="ack", metavar="FILE")
    ] = None,
    demo: A[bool, opt("--demo", table=ACK_HELP, command="ack", metavar="")] = False,
    snapshot: A[
        Path | None, opt("--snapshot", table=ACK_HELP, command="ack", metavar="FILE")
    ] = None,
    config: A[Path | None, opt("--config", table=ACK_HELP, command="ack", metavar="FILE")] = None,
) -> None:
    """Accept a finding until a date (`HELP`)."""
    from gpuaudit.app import acknowledge  # lazy, as in `scan`: it loads pandas

    with failing():
        sources = {"demo": demo, "snapshot": snapshot, "config": config}
        note = acknowledge.Ack(fingerprint, until, reason, by)
        today = datetime.now(timezone.utc).date()
        path = acknowledge.run(note, sources, report_json, today)
    sys.stderr.write(
        fit_terminal(f"gpuaudit ack: waived {fingerprint} until {until} in {path}") + "\n"
    )
