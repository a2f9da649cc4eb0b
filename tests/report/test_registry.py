"""The format registry: every format by name, one render entry point, the table as text, and
renderers that import only shared helpers, never each other."""

from __future__ import annotations

import ast
import dataclasses
import io
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

import gpuaudit.report
from gpuaudit.audit.assemble import AuditResult
from gpuaudit.checks import REGISTRY
from gpuaudit.checks.findings import Skipped
from gpuaudit.report import (
    FORMATS,
    html,
    json_report,
    junit,
    markdown,
    print_table,
    render,
    table_text,
)
from tests.support.reports import demo_result

RENDERERS = ("table", "json_report", "markdown", "html", "junit", "showback_csv", "focus")
SHARED = {
    "gpuaudit.report.renderer",
    "gpuaudit.report.text",
    "gpuaudit.report.csvsafe",
    "gpuaudit.report.showback_text",
    "gpuaudit.report.since_last_week",
    "gpuaudit.report.charts",
    "gpuaudit.report.fold",
    "gpuaudit.report.models",
}


@pytest.fixture(scope="module")
def result() -> AuditResult:
    return demo_result()


def test_formats_are_registered_in_cli_order() -> None:
    assert list(FORMATS) == ["table", "json", "markdown", "html", "junit", "showback", "focus"]
    assert all(name == f.name for name, f in FORMATS.items())


@pytest.mark.parametrize(
    ("fmt", "module"),
    [("json", json_report), ("markdown", markdown), ("html", html), ("junit", junit)],
)
def test_render_is_the_format_module_render(result: AuditResult, fmt: str, module: Any) -> None:
    assert render(result, fmt) == module.render(result)


def test_table_text_is_plain_fixed_width(result: AuditResult) -> None:
    text = table_text(result)
    assert "\x1b" not in text
    assert max(len(line) for line in text.splitlines()) <= 160
    assert render(result, "table") == text
    narrow = table_text(result, width=100)
    assert max(len(line) for line in narrow.splitlines()) <= 100


def test_print_table_prints_to_the_console(result: AuditResult) -> None:
    buf = io.StringIO()
    print_table(result, Console(file=buf, width=160, no_color=True, force_terminal=False))
    assert buf.getvalue() == table_text(result)


def test_unknown_format_names_the_known_ones(result: AuditResult) -> None:
    with pytest.raises(ValueError, match="known: table, json, markdown, html, junit"):
        render(result, "yaml")


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module == "gpuaudit.report":
            found |= {f"gpuaudit.report.{a.name}" for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
    return found


@pytest.mark.parametrize("name", RENDERERS)
def test_no_renderer_imports_another(name: str) -> None:
    folder = Path(gpuaudit.report.__file__).parent
    mine = {f"gpuaudit.report.{name}"}
    imported = {i for i in _imports(folder / f"{name}.py") if i.startswith("gpuaudit.report")}
    others = {f"gpuaudit.report.{r}" for r in RENDERERS} - mine
    assert not imported & others, imported
    assert imported <= SHARED, imported


def _classes(xml: str) -> list[str]:
    return [
        line.split(' classname="')[1].split('"')[0]
        for line in xml.splitlines()
        if "<testcase" in line
    ]


def test_junit_lists_the_checks_the_result_ran_or_skipped() -> None:
    subset = demo_result(checks=REGISTRY[:3])
    assert set(_classes(junit.render(subset))) == {c.code for c in REGISTRY[:3]}


def test_junit_keeps_skipped_checks_in_the_audit_order(result: AuditResult) -> None:
    # Whatever else the demo skipped (a check without its data there) stays skipped.
    others = tuple(s for s in result.skipped if s.code != "GPU010")
    skipped = dataclasses.replace(
        result,
        checks_run=tuple(c for c in result.checks_run if c != "GPU010"),
        skipped=(*others, Skipped("GPU010", "no pods")),
        findings=tuple(f for f in result.findings if f.code != "GPU010"),
    )
    xml = junit.render(skipped)
    assert set(_classes(xml)) == {c.code for c in REGISTRY}
    assert '<skipped message="skipped: no pods"/>' in xml
    assert f'skipped="{len(others) + 1}"' in xml
