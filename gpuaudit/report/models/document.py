"""The JSON report as a whole (`Report`), its version, and the JSON Schema generated from it
(`json_schema`), which `docs/report.schema.json` publishes."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, cast

from pydantic import ConfigDict, Field
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaMode, JsonSchemaValue, SkipJsonSchema
from pydantic_core import CoreSchema, core_schema

from gpuaudit.report.models.chargeback import Showback
from gpuaudit.report.models.fleet import (
    Attribution,
    Breakdown,
    ClusterSection,
    Comparison,
    Summary,
    Window,
)
from gpuaudit.report.models.held_causes import CauseLedger
from gpuaudit.report.models.planning import Capacity
from gpuaudit.report.models.problems import Finding, Skipped, Suppressed
from gpuaudit.report.models.units import ReportModel, Timestamp

SCHEMA_VERSION = "1.6"
"""The report's version: a minor version adds fields, a major version may change them."""
SCHEMA_ID = f"https://gpuaudit.dev/schema/report-{SCHEMA_VERSION}.json"
"""The `$id` of the published schema."""
DIALECT = "https://json-schema.org/draft/2020-12/schema"
"""The JSON Schema dialect the schema is written in."""


class Report(ReportModel):
    """The output of `gpuaudit scan --format json`. Versioned by schema_version: a minor version
    adds fields, a major version may change them. Two runs on one snapshot are byte-identical
    apart from generated_at."""

    model_config = ConfigDict(
        title="gpuaudit JSON report",
        json_schema_extra={
            "dependentRequired": {"clusters": ["cluster_label"], "cluster_label": ["clusters"]}
        },
    )

    schema_version: str = Field(pattern=r"^1\.[0-9]+$")
    """The report's version (`1.x`): a minor version only adds fields."""
    gpuaudit_version: str
    """The version of gpuaudit that wrote the report."""
    generated_at: Timestamp
    """When the report was written (RFC 3339, UTC): the one field two runs on one snapshot
    differ in."""
    cluster: str
    """The cluster's name, as the data gave it."""
    window: Window
    """The audit window."""
    complete: bool
    """False when a source answered only in part, or nothing was audited; `incomplete_reasons`
    says what."""
    incomplete_reasons: tuple[str, ...]
    """Why the audit is incomplete, one sentence each; empty when it is complete."""
    nothing_audited: bool
    """True when the audit audited nothing: no GPU in the DCGM data of the window, or every
    check skipped. Such an audit is also incomplete (`complete` is false, `incomplete_reasons`
    says why); its lack of findings never means healthy GPUs. Added in 1.2."""
    summary: Summary
    """The fleet at a glance."""
    findings: tuple[Finding, ...]
    """In the one total order, in two parts (`category`): the risks first, most urgent first
    (severity, then GPU-hours at risk, then cost); then the waste, ranked by wasted GPU-hours,
    then cost, then severity. Ties go by code, then resource, then message."""
    checks_run: tuple[str, ...]
    """Codes of the checks that ran, in the order they ran."""
    skipped: tuple[Skipped, ...]
    """The checks that could not run, and why."""
    suppressed_count: int
    """How many findings waivers accepted (the length of `suppressed`)."""
    suppressed: tuple[Suppressed, ...]
    """The findings waivers accepted, in rank order."""
    breakdown: Breakdown
    """Waste by namespace and by `--group-by-label`."""
    comparison: Comparison | None
    """Against `--baseline` or `--previous`; null without one."""
    capacity: Capacity | None
    """The capacity plan; null only when no audit ran."""
    attribution: Attribution | None
    """The attribution ledger; null only when no audit ran."""
    showback: Showback | None = None
    """Schema 1.5: the window's GPU cost by product and holder, on the allocation and usage
    bases, the idle and unallocated remainder shared by the declared rule; null only when no
    audit ran."""
    ledger: CauseLedger | None = None
    """Schema 1.4: the ledger of every held GPU-hour by cause and the effective GPUs; null only
    when no audit ran."""
    warnings: tuple[str, ...]
    """What the reader should know about the data or the settings, one sentence each."""
    cluster_label: str = Field("", exclude_if=lambda value: not value)
    """Schema 1.3: only in a scan of every cluster (`--cluster-label NAME`): the label the
    backend tells clusters apart by. Present exactly when `clusters` is."""
    clusters: Mapping[str, ClusterSection] | SkipJsonSchema[None] = Field(
        None, exclude_if=lambda value: value is None
    )
    """Schema 1.3: only in a scan of every cluster (`--cluster-label NAME`). Cluster name (the
    label's value) -> that cluster's figures. The fleet `summary` is the clusters' sum for
    gpus_total, gpus_allocated_now, gpus_allocated_avg, allocated_gpu_hours, idle_gpu_hours,
    wasted_cost, findings_gpu_hours and findings_cost (up to rounding; allocation_rate and
    mean_activity are ratios, not sums)."""
    namespaces: tuple[str, ...] = Field((), exclude_if=lambda value: not value)
    """Schema 1.6: only in a team's view (`--namespace NS`): the namespaces the report was
    narrowed to. Its findings, summary, capacity plan, ledgers and showback then cover their
    pods' GPUs only, a cluster-scoped finding (a node, a GPU, a queue) only where it names a
    pod of them."""


class _Generate(GenerateJsonSchema):
    """pydantic's schema generator, with each description on one line (a docstring's lines
    make one paragraph), less what describes the Python models rather than the report: the
    titles it makes up from field names (`Gpu Hours`), the docstrings of the enums (the
    fields that use them say what they mean), and defaults (a field with one is left out of
    the report when it is empty, never written with its default)."""

    def field_title_should_be_set(self, schema: object) -> bool:
        return False

    def default_schema(self, schema: core_schema.WithDefaultSchema) -> JsonSchemaValue:
        return self.generate_inner(schema["schema"])

    def generate(self, schema: CoreSchema, mode: JsonSchemaMode = "validation") -> JsonSchemaValue:
        out = super().generate(schema, mode)
        for definition in out.get("$defs", {}).values():
            if "enum" in definition:
                definition.pop("description", None)
        return cast(JsonSchemaValue, _one_line(out))


def _one_line(node: object) -> object:
    if isinstance(node, dict):
        return {
            k: " ".join(v.split()) if k == "description" and isinstance(v, str) else _one_line(v)
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [_one_line(v) for v in node]
    return node


def json_schema() -> dict[str, Any]:
    """The JSON Schema of `Report`, with the dialect and `$id` it is published under."""
    body = Report.model_json_schema(schema_generator=_Generate)
    return {"$schema": DIALECT, "$id": SCHEMA_ID, **body}


def schema_text() -> str:
    """The schema as `docs/report.schema.json` holds it: indented, ending in a newline."""
    return json.dumps(json_schema(), indent=2, ensure_ascii=False) + "\n"
