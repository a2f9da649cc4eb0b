"""The JSON report: a versioned contract with deterministic order and formatting."""

from __future__ import annotations

import json

from gpuaudit.audit.assemble import AuditResult
from gpuaudit.report.renderer import ReportFormat


def render(result: AuditResult) -> str:
    """The JSON document of `AuditResult.to_dict()`, indented, ending in a newline."""
    # ensure_ascii keeps control characters and odd Unicode in names escaped.
    return json.dumps(result.to_dict(), indent=2, ensure_ascii=True, allow_nan=False) + "\n"


FORMAT = ReportFormat("json", render)
