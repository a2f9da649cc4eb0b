"""JUnit XML for CI systems that show test reports: one test case per check the audit
considered, one failure per finding (a skipped check is a skipped test case, with its reason)."""

from __future__ import annotations

import heapq
from xml.sax.saxutils import escape, quoteattr

from gpuaudit.audit import AuditResult
from gpuaudit.checks import by_code
from gpuaudit.report.interface import ReportFormat
from gpuaudit.report.text import num, terminal


def _attr(text: str) -> str:
    return quoteattr(terminal(text, 2000))


def _text(text: str) -> str:
    return escape(terminal(text, 4000).replace("\\x0a", "\n"))


def _checks(result: AuditResult) -> list[tuple[str, str | None]]:
    """(code, reason it was skipped or None) of each check the audit ran or skipped, in the
    order the audit considered them.

    The result keeps ran and skipped checks in two tuples, each in the audit's order, which is
    code order (the audit walks the registry, which is in code order); merging them by code
    restores the one sequence without re-sorting either.
    """
    ran = [(code, None) for code in result.checks_run]
    skipped = [(s.code, s.reason) for s in result.skipped]
    return list(heapq.merge(ran, skipped, key=lambda c: c[0]))


def _name(code: str) -> str:
    # The result names checks by code only; the title is the check's own.
    check = by_code(code)
    return f"{code} {check.title}" if check else code


def _failures(result: AuditResult) -> dict[str, list[str]]:
    """The `<failure>` elements of each check's findings, by check code, in ranked order."""
    by_code: dict[str, list[str]] = {}
    cur = result.summary.currency
    for f in result.findings:
        status = result.status_of(f)
        tag = f" [{status}]" if status else ""
        body = (
            f"{f.message}\nRecommendation: {f.recommendation}\n"
            f"Wasted GPU-hours: {num(f.impact.gpu_hours, 1, grouped=False)}; "
            f"cost: {num(f.impact.cost, 2, grouped=False)} {cur}"
        )
        by_code.setdefault(f.code, []).append(
            f"      <failure type={_attr(f.severity.value)} "
            f"message={_attr(f'{f.resource.ref()}{tag}: {f.message}')}>"
            f"{_text(body)}</failure>"
        )
    return by_code


def render(result: AuditResult) -> str:
    """The JUnit XML document: one suite, a test case per check, one for data completeness
    when the data was incomplete."""
    by_code = _failures(result)
    cases: list[str] = []
    failures = 0
    for code, skip_reason in _checks(result):
        head = f'    <testcase classname="gpuaudit" name={_attr(_name(code))}'
        if skip_reason is not None:
            cases.append(f"{head}>\n      <skipped message={_attr(skip_reason)}/>\n    </testcase>")
        elif code in by_code:
            failures += 1
            cases.append(f"{head}>\n" + "\n".join(by_code[code]) + "\n    </testcase>")
        else:
            cases.append(f"{head}/>")
    if not result.complete:
        reasons = _attr("; ".join(result.incomplete_reasons))
        cases.append(
            '    <testcase classname="gpuaudit" name="data completeness">\n'
            f'      <failure type="incomplete" message={reasons}/>\n    </testcase>'
        )
        failures += 1
    suite = (
        f'  <testsuite name="gpuaudit" tests="{len(cases)}" failures="{failures}" errors="0" '
        f'skipped="{len(result.skipped)}" timestamp={_attr(result.generated_at)}>'
    )
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n<testsuites name="gpuaudit">\n'
        f"{suite}\n" + "\n".join(cases) + "\n  </testsuite>\n</testsuites>\n"
    )


FORMAT = ReportFormat("junit", render)
