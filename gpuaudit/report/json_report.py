"""The JSON report: a versioned contract with deterministic order and formatting. Its shape is
`gpuaudit.report.models` (the schema `docs/report.schema.json` is generated from it)."""

from __future__ import annotations

import json

from gpuaudit.audit.assemble import AuditResult
from gpuaudit.report.models import document
from gpuaudit.report.renderer import ReportFormat


def render(result: AuditResult) -> str:
    """The JSON document of `result` (`gpuaudit.report.models.document`), indented, ending in a
    newline."""
    doc = document(result).model_dump(mode="json")
    # ensure_ascii keeps control characters and odd Unicode in names escaped; allow_nan=False
    # refuses a figure that went wrong rather than write what strict JSON readers reject.
    return json.dumps(doc, indent=2, ensure_ascii=True, allow_nan=False) + "\n"


FORMAT = ReportFormat("json", render)
