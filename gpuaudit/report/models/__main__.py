"""Print the report's JSON Schema: `python -m gpuaudit.report.models > docs/report.schema.json`."""

from __future__ import annotations

import sys

from gpuaudit.report.models.document import schema_text

sys.stdout.write(schema_text())
