"""What a report format is: a name `--format` accepts and a function that renders an audit
result as text. Each format module declares one `FORMAT`; `gpuaudit.report.FORMATS` lists them.

A frozen dataclass rather than an abstract base class: a format has no state and one
operation, so a name and a function say everything a subclass would.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gpuaudit.audit.assemble import AuditResult


@dataclass(frozen=True)
class ReportFormat:
    """One report format."""

    name: str
    """What `--format` accepts: `table`, `json`, `markdown`, `html`, `junit`."""
    render: Callable[[AuditResult], str]
    """The whole report as text, exactly as it is written to stdout or `--output`. For the
    terminal table this is the plain text at 160 columns that `--output` writes."""
