"""The JSON report: a versioned contract with deterministic order and formatting."""

from __future__ import annotations

import json

from gpuaudit.audit import AuditResult


def render(result: AuditResult) -> str:
    # ensure_ascii keeps control characters and odd Unicode in names escaped.
    return json.dumps(result.to_dict(), indent=2, ensure_ascii=True, allow_nan=False) + "\n"
