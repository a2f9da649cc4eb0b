"""JUnit XML for CI systems that show test reports: one test case per check, one failure per
finding (a skipped check is a skipped test case, with its reason)."""

from __future__ import annotations

from xml.sax.saxutils import escape, quoteattr

from gpuaudit.audit import AuditResult
from gpuaudit.checks import REGISTRY
from gpuaudit.report.safe import terminal


def _attr(text: str) -> str:
    return quoteattr(terminal(text, 2000))


def _text(text: str) -> str:
    return escape(terminal(text, 4000).replace("\\x0a", "\n"))


def render(result: AuditResult) -> str:
    by_code: dict[str, list[str]] = {}
    for f in result.findings:
        status = result.status_of(f)
        tag = f" [{status}]" if status else ""
        body = (
            f"{f.message}\nRecommendation: {f.recommendation}\n"
            f"Wasted GPU-hours: {f.impact.gpu_hours:.1f}; cost: {f.impact.cost:.2f} "
            f"{result.summary.currency}"
        )
        by_code.setdefault(f.code, []).append(
            f"      <failure type={_attr(f.severity.value)} "
            f"message={_attr(f'{f.resource.ref()}{tag}: {f.message}')}>"
            f"{_text(body)}</failure>"
        )
    skipped = {s.code: s.reason for s in result.skipped}
    cases: list[str] = []
    failures = 0
    for check in REGISTRY:
        name = f"{check.code} {check.title}"
        head = f'    <testcase classname="gpuaudit" name={_attr(name)}'
        if check.code in skipped:
            cases.append(
                f"{head}>\n      <skipped message={_attr(skipped[check.code])}/>\n    </testcase>"
            )
        elif check.code in by_code:
            failures += 1
            cases.append(f"{head}>\n" + "\n".join(by_code[check.code]) + "\n    </testcase>")
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
        f'skipped="{len(skipped)}" timestamp={_attr(result.generated_at)}>'
    )
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n<testsuites name="gpuaudit">\n'
        f"{suite}\n" + "\n".join(cases) + "\n  </testsuite>\n</testsuites>\n"
    )
