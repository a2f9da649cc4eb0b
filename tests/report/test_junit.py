"""JUnit XML as CI tools read it: a case per finding, a passing case per clean check, a skipped
case per skipped check or waived finding, counts that agree with the elements, and valid
against the Jenkins (`junit-10.xsd`) and the Apache Ant (`JUnit.xsd`) schemas that JUnit
readers are written against (copies in `tests/data/junit`, sources in its README)."""

from __future__ import annotations

import dataclasses
import xml.etree.ElementTree as ET
from collections import Counter
from datetime import date
from pathlib import Path

import pytest
import xmlschema

from gpuaudit import snapshot
from gpuaudit.audit.assemble import AuditResult, run_checks
from gpuaudit.audit.settings import settings_from
from gpuaudit.audit.waivers import Waiver
from gpuaudit.inventory import build
from gpuaudit.report import junit
from tests.support.factories import snapshot as make_snapshot
from tests.support.paths import DEMO, ROOT
from tests.support.reports import demo_result, write_hostile_snapshot

SCHEMAS = {
    name: xmlschema.XMLSchema(ROOT / "tests" / "data" / "junit" / name)
    for name in ("jenkins-junit-10.xsd", "ant-junit.xsd")
}


def _valid(xml: str) -> ET.Element:
    """The parsed document, after checking it against both schemas and checking that the
    suite's counts are those of its elements."""
    for name, schema in SCHEMAS.items():
        errors = list(schema.iter_errors(xml))
        assert not errors, f"{name}: {errors[0]}"
    root = ET.fromstring(xml)
    (suite,) = root.findall("testsuite")
    cases = suite.findall("testcase")
    assert int(suite.get("tests", "")) == len(cases)
    for outcome, attr in (("failure", "failures"), ("error", "errors"), ("skipped", "skipped")):
        assert int(suite.get(attr, "")) == len(suite.findall(f"testcase/{outcome}")), attr
    assert all(len(list(c)) <= 1 for c in cases), "one outcome per test case"
    return suite


def _audit(snap: snapshot.Snapshot, **kw: object) -> AuditResult:
    checks = {k: v for k, v in kw.items() if k != "waivers"}
    waivers = kw.get("waivers", ())
    assert isinstance(waivers, tuple)
    return run_checks(build(snap), settings_from({}, **checks), waivers=waivers)


def _without_kubernetes() -> snapshot.Snapshot:
    why = "not read: --no-kubernetes"
    snap = snapshot.read(DEMO).with_manifest(objects={"pods": why, "nodes": why})
    return dataclasses.replace(snap, kubernetes={})


def test_one_failing_case_per_finding_named_by_check_and_resource() -> None:
    result = demo_result()
    suite = _valid(junit.render(result))
    failing = [c for c in suite.findall("testcase") if c.find("failure") is not None]
    assert len(failing) == len(result.findings) > 20
    for case, f in zip(failing, result.findings, strict=True):
        assert case.get("classname") == f.code
        assert f.resource.ref() in (case.get("name") or "")
        failure = case.find("failure")
        assert failure is not None
        assert failure.get("type") == f.severity.value
        assert failure.get("message") == f.message
        assert f"Recommendation: {f.recommendation}" in (failure.text or "")
    names = [(c.get("classname"), c.get("name")) for c in suite.findall("testcase")]
    assert len(names) == len(set(names)), "no two cases share a class name and a name"
    assert int(suite.get("failures", "")) == len(result.findings)


def test_clean_checks_pass_and_skipped_checks_are_skipped_with_the_reason() -> None:
    # Without Kubernetes the gang and scheduling checks are skipped; an idle threshold no
    # holding reaches leaves GPU001 clean.
    result = _audit(_without_kubernetes(), idle_min_hours=100_000.0)
    assert result.skipped and "GPU001" in result.checks_run
    assert not any(f.code == "GPU001" for f in result.findings)
    suite = _valid(junit.render(result))
    by_class: dict[str, list[ET.Element]] = {}
    for case in suite.findall("testcase"):
        by_class.setdefault(case.get("classname") or "", []).append(case)
    (clean,) = by_class["GPU001"]
    assert clean.get("name") == "GPU001 Idle reservation: no findings" and not list(clean)
    for s in result.skipped:
        (case,) = by_class[s.code]
        skipped = case.find("skipped")
        assert skipped is not None and skipped.get("message") == f"skipped: {s.reason}"
    assert int(suite.get("skipped", "")) == len(result.skipped)
    ran_clean = [c for c in result.checks_run if not any(f.code == c for f in result.findings)]
    passing = [c for c in suite.findall("testcase") if not list(c)]
    assert len(passing) == len(ran_clean)


def test_a_waived_finding_is_a_skipped_case_with_the_waiver() -> None:
    waiver = Waiver("GPU003", "nightly pool, reviewed", date(2099, 1, 1), namespace="batch")
    result = _audit(snapshot.read(DEMO), waivers=(waiver,))
    assert result.suppressed
    suite = _valid(junit.render(result))
    waived = [
        c
        for c in suite.findall("testcase")
        if (s := c.find("skipped")) is not None and "waived" in (s.get("message") or "")
    ]
    assert len(waived) == len(result.suppressed)
    assert all(c.get("classname") == "GPU003" for c in waived)
    message = waived[0].find("skipped")
    assert message is not None
    assert message.get("message") == "waived until 2099-01-01: nightly pool, reviewed"


def test_an_audit_of_nothing_is_an_error_case_not_a_green_suite() -> None:
    result = _audit(make_snapshot([], hours=8))
    assert result.nothing_audited and not result.findings
    suite = _valid(junit.render(result))
    (case,) = [c for c in suite.findall("testcase") if c.find("error") is not None]
    error = case.find("error")
    assert error is not None and error.get("type") == "nothing audited"
    assert "no GPU appears in the DCGM data" in (error.get("message") or "")
    assert suite.get("errors") == "1"
    assert int(suite.get("skipped", "")) == len(result.skipped) > 0
    assert not [c for c in suite.findall("testcase") if not list(c)], "no passing case"


def test_an_incomplete_audit_has_an_error_case_with_the_reasons() -> None:
    snap = snapshot.read(DEMO).with_manifest(
        complete=False, incomplete_reasons=("the backend answered act_sum in part",)
    )
    suite = _valid(junit.render(_audit(snap)))
    (case,) = [c for c in suite.findall("testcase") if c.find("error") is not None]
    assert case.get("name") == "data completeness"
    error = case.find("error")
    assert error is not None and error.get("type") == "incomplete"
    assert "act_sum in part" in (error.get("message") or "")


def test_the_same_resource_twice_in_one_check_gets_two_names() -> None:
    result = demo_result()
    first = result.findings[0]
    twin = dataclasses.replace(first, resource=dataclasses.replace(first.resource, node="n2"))
    doubled = dataclasses.replace(result, findings=(first, twin, *result.findings[1:]))
    suite = _valid(junit.render(doubled))
    names = Counter((c.get("classname"), c.get("name")) for c in suite.findall("testcase"))
    assert max(names.values()) == 1


def test_hostile_names_stay_text_and_the_document_stays_valid(tmp_path: Path) -> None:
    result = _audit(snapshot.read(write_hostile_snapshot(tmp_path)))
    xml = junit.render(result)
    suite = _valid(xml)
    assert "\x1b" not in xml and "<script>" not in xml
    texts = " ".join(c.get("name") or "" for c in suite.findall("testcase"))
    assert "<script>alert(1)</script>" in texts  # the name, read back as text


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_the_schemas_can_fail(name: str) -> None:
    """The validation is not vacuous: a document without the counts is refused."""
    xml = junit.render(demo_result()).replace(' tests="', ' x-tests="', 1)
    assert not SCHEMAS[name].is_valid(xml)
