"""The JSON report's typed models (pydantic), the single source of truth for the JSON: the
report writes `document(result)` and `docs/report.schema.json` is `json_schema()`, generated,
never edited by hand (`python -m gpuaudit.report.models > docs/report.schema.json`).

The parts: `units` (the base model and the number, time and code types), `problems` (findings,
waived findings, skipped checks), `fleet` (window, summary, breakdown, comparison, attribution,
clusters), `planning` (the capacity plan), `document` (the whole report and its schema), and
`from_result`, the one place an audit result becomes a report.
"""

from __future__ import annotations

from gpuaudit.report.models.document import (
    SCHEMA_ID,
    SCHEMA_VERSION,
    Report,
    json_schema,
    schema_text,
)
from gpuaudit.report.models.from_result import document

__all__ = ["SCHEMA_ID", "SCHEMA_VERSION", "Report", "document", "json_schema", "schema_text"]
