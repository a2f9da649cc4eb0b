"""The JSON report's schema is generated from its models (`gpuaudit.report.models`): the
published `docs/report.schema.json` is the generated one, every report validates against it,
and it refuses what the report never writes."""

from __future__ import annotations

import copy
import dataclasses
import json
import subprocess
import sys
from typing import Any

import jsonschema
import pytest

from gpuaudit.audit.assemble import AuditResult, ClusterSection
from gpuaudit.inventory.attribution import Method, Reason
from gpuaudit.report import json_report
from gpuaudit.report.models import json_schema, schema_text
from gpuaudit.report.models.fleet import Attributed, Unattributed
from gpuaudit.report.models.problems import Resource
from tests.support.paths import ROOT
from tests.support.reports import demo_result

PUBLISHED = ROOT / "docs" / "report.schema.json"
VALIDATOR = jsonschema.Draft202012Validator(
    json_schema(), format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
)


@pytest.fixture(scope="module")
def demo() -> AuditResult:
    return demo_result()


def _errors(doc: Any) -> list[str]:
    return [e.message for e in VALIDATOR.iter_errors(doc)]


def test_the_published_schema_is_the_generated_one() -> None:
    assert PUBLISHED.read_text() == schema_text(), (
        "docs/report.schema.json is stale: python -m gpuaudit.report.models > "
        "docs/report.schema.json"
    )


def test_the_module_prints_the_schema() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "gpuaudit.report.models"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout == schema_text()


def test_the_schema_is_a_2020_12_schema_with_its_id() -> None:
    schema = json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == "https://gpuaudit.dev/schema/report-1.6.json"
    assert schema["title"] == "gpuaudit JSON report"


def test_every_field_says_what_it_is() -> None:
    """Each property of the report and of every part describes itself, or is a part that
    does."""
    schema = json_schema()
    defs = schema["$defs"]
    parts = {"(report)": schema, **defs}
    for name, part in parts.items():
        assert part.get("description") or "enum" in part, name
        for prop, spec in part.get("properties", {}).items():
            ref = spec.get("$ref", "").removeprefix("#/$defs/")
            assert spec.get("description") or defs.get(ref, {}).get("description"), (name, prop)


def test_the_demo_report_validates(demo: AuditResult) -> None:
    doc = json.loads(json_report.render(demo))
    assert _errors(doc) == []
    assert doc["findings"] and doc["capacity"]["by_product"] and doc["attribution"]


def test_a_scan_of_every_cluster_adds_its_fields_and_other_reports_leave_them_out(
    demo: AuditResult,
) -> None:
    plain = json.loads(json_report.render(demo))
    assert "cluster_label" not in plain and "clusters" not in plain
    assert not any("cluster" in f["resource"] for f in plain["findings"])
    first, *rest = demo.findings
    placed = dataclasses.replace(first, resource=dataclasses.replace(first.resource, cluster="a"))
    every = dataclasses.replace(
        demo,
        findings=(placed, *rest),
        cluster_label="cluster",
        clusters=(ClusterSection("a", demo.summary, 1), ClusterSection("b", demo.summary, 0)),
    )
    doc = json.loads(json_report.render(every))
    assert _errors(doc) == []
    assert list(doc)[-2:] == ["cluster_label", "clusters"]
    assert doc["cluster_label"] == "cluster" and list(doc["clusters"]) == ["a", "b"]
    assert doc["clusters"]["a"] == {"summary": plain["summary"], "findings": 1}
    assert doc["findings"][0]["resource"]["cluster"] == "a"
    assert list(doc["findings"][0]["resource"])[-1] == "cluster"


_DROP = object()


def _break(doc: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    at = out
    for key in path[:-1]:
        at = at[key]
    if value is _DROP:
        del at[path[-1]]
    else:
        at[path[-1]] = value
    return out


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("surprise",), 1),
        (("schema_version",), "2.0"),
        (("findings", 0, "severity"), "urgent"),
        (("findings", 0, "code"), "X1"),
        (("findings", 0, "code"), _DROP),
        (("findings", 0, "resource", "gpus"), "1"),
        (("findings", 0, "status"), None),
        (("findings", 0, "confidence"), "certain"),
        (("summary", "held_time"), "minutes"),
        (("summary", "gpus_total"), 1.5),
        (("cluster_label",), "cluster"),
        (("attribution", "attributed", "dra_claim"), _DROP),
        (("attribution", "attributed", "dra_claim", "gpu_hours"), -1),
        (("capacity", "what_if"), ["everything"]),
        (("breakdown", "by_namespace", 0, "extra"), 0),
    ],
)
def test_the_schema_refuses_what_the_report_never_writes(
    demo: AuditResult, path: tuple[Any, ...], value: Any
) -> None:
    doc = json.loads(json_report.render(demo))
    assert _errors(_break(doc, path, value))


def test_a_waived_finding_counts_toward_no_total(demo: AuditResult) -> None:
    first = json.loads(json_report.render(demo))["findings"][0]
    waived = {
        **first,
        "counted_in_total": False,
        "waiver": {
            "code": first["code"],
            "namespace": "",
            "selector": "",
            "resource": "",
            "reason": "accepted",
            "expires": "2099-01-01",
        },
    }
    doc = json.loads(json_report.render(demo))
    doc["suppressed"] = [waived]
    assert _errors(doc) == []
    doc["suppressed"] = [{**waived, "counted_in_total": True}]
    assert _errors(doc)


def test_attribution_lists_every_method_and_reason_in_their_order() -> None:
    assert list(Attributed.model_fields) == [m.value for m in Method]
    assert list(Unattributed.model_fields) == [r.value for r in Reason]


def test_numbers_keep_their_type_and_are_rounded_as_published() -> None:
    def gpus(value: float) -> Any:
        r = Resource(kind="Pod", namespace="ns", name="p", node="n", gpus=value)
        return json.loads(json.dumps(r.model_dump(mode="json")))["gpus"]

    assert gpus(1) == 1 and isinstance(gpus(1), int)
    assert gpus(1.0) == 1.0 and isinstance(gpus(1.0), float)
    assert gpus(1 / 7) == 0.1429


def test_a_figure_that_went_wrong_is_refused_never_written_as_null(demo: AuditResult) -> None:
    first = demo.findings[0]
    for bad in (
        dataclasses.replace(first, evidence={**first.evidence, "ratio": float("nan")}),
        dataclasses.replace(first, impact=dataclasses.replace(first.impact, cost=float("inf"))),
    ):
        with pytest.raises(ValueError, match="JSON compliant"):
            json_report.render(dataclasses.replace(demo, findings=(bad,)))
