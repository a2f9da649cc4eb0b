"""JUnit XML as CI test views read it (GitLab, Jenkins, GitHub test reporters, Azure).

One test suite, `gpuaudit`, whose test cases are, in this order:

- one `data completeness` case in error when the audit is incomplete (a source answered in part,
  or nothing was audited), with the reasons;
- one failing case per finding, in the audit's ranked order: class name the check code, name
  the resource (`Pod ml/x`), failure type the severity, the message and the recommendation in
  the body; a view that keeps one failure per case shows every finding;
- one passing case per check that ran and found nothing (`GPU002 Idle tail: no findings`);
- one skipped case per check that was skipped for lack of data, with the reason;
- one skipped case per waived finding, with the waiver's reason and expiry.

The suite's counts are those of the elements (`tests`, `failures`, `errors`, `skipped`). The
document is valid against both common JUnit schemas: the Jenkins xunit plugin's `junit-10.xsd`
and the stricter Apache Ant schema (`JUnit.xsd` of windyroad/JUnit-Schema), which asks for
`properties`, `system-out`, `system-err`, a `hostname`, a time-zone-less `timestamp` and
`time` on every case (0: an audit has no per-check duration).
"""

from __future__ import annotations

import heapq
from collections import Counter
from dataclasses import dataclass
from xml.sax.saxutils import escape, quoteattr

from gpuaudit import __version__
from gpuaudit.audit.assemble import AuditResult
from gpuaudit.checks import by_code
from gpuaudit.checks.findings import Finding
from gpuaudit.report.renderer import ReportFormat
from gpuaudit.report.text import num, plural, terminal, window_bounds, window_text


def _attr(text: str) -> str:
    return quoteattr(terminal(text, 2000))


def _text(lines: list[str]) -> str:
    """Lines of untrusted text as element content: each made harmless, joined by newlines."""
    return escape("\n".join(terminal(line, 4000) for line in lines))


@dataclass(frozen=True)
class _Case:
    classname: str
    name: str
    outcome: str = ""
    """`failure`, `skipped`, `error`, or empty for a passing case."""
    kind: str = ""
    """The outcome's `type` attribute (failures and errors)."""
    message: str = ""
    body: tuple[str, ...] = ()

    def xml(self) -> str:
        head = f'    <testcase classname={_attr(self.classname)} name={_attr(self.name)} time="0"'
        if not self.outcome:
            return head + "/>"
        kind = f" type={_attr(self.kind)}" if self.kind else ""
        inner = f"      <{self.outcome}{kind} message={_attr(self.message)}"
        inner += f">{_text(list(self.body))}</{self.outcome}>" if self.body else "/>"
        return f"{head}>\n{inner}\n    </testcase>"


def _title(code: str) -> str:
    # The result names checks by code only; the title is the check's own.
    check = by_code(code)
    return f"{code} {check.title}" if check else code


def _names(findings: tuple[Finding, ...]) -> list[str]:
    """Each finding's test case name: its resource, made unique within its check (by node,
    else by a number in rank order) so that no view merges two findings into one case."""
    base = [f"{f.resource.kind} {f.resource.ref()}".strip() for f in findings]
    dup = Counter(zip((f.code for f in findings), base, strict=True))
    names, seen = [], Counter[tuple[str, str]]()
    for f, name in zip(findings, base, strict=True):
        key = (f.code, name)
        if dup[key] > 1:
            seen[key] += 1
            name += f" on {f.resource.node}" if f.resource.node else ""
            name += f" #{seen[key]}"
        names.append(name)
    return names


def _finding_cases(result: AuditResult) -> list[_Case]:
    """The failing case of each finding, in the audit's ranked order."""
    cur = result.summary.currency
    out: list[_Case] = []
    for f, name in zip(result.findings, _names(result.findings), strict=True):
        status = result.status_of(f)
        tag = f"[{status}] " if status else ""
        body = (
            f.message,
            f"Recommendation: {f.recommendation}",
            f"Wasted GPU-hours: {num(f.impact.gpu_hours, 1, grouped=False)}; "
            f"cost: {num(f.impact.cost, 2, grouped=False)} {cur}",
            f"Severity: {f.severity.value}"
            + (f"; against the baseline: {status}" if status else ""),
            f"Rule: gpuaudit explain {f.code}",
        )
        out.append(_Case(f.code, name, "failure", f.severity.value, tag + f.message, body))
    return out


def _check_cases(result: AuditResult) -> list[_Case]:
    """Per check without findings, in code order: a passing case when it ran, a skipped case
    with the reason when it was skipped."""
    with_findings = {f.code for f in result.findings}
    ran = [(code, None) for code in result.checks_run if code not in with_findings]
    skipped = [(s.code, s.reason) for s in result.skipped]
    # Both lists are in code order (the audit walks the registry in code order): merging
    # them restores the one sequence without re-sorting either.
    cases: list[_Case] = []
    for code, reason in heapq.merge(ran, skipped, key=lambda c: c[0]):
        if reason is not None:
            cases.append(_Case(code, _title(code), "skipped", message=f"skipped: {reason}"))
        else:
            cases.append(_Case(code, f"{_title(code)}: no findings"))
    return cases


def _waived_cases(result: AuditResult) -> list[_Case]:
    names = _names(tuple(s.finding for s in result.suppressed))
    return [
        _Case(
            s.finding.code,
            name,
            "skipped",
            message=f"waived until {s.waiver.expires.isoformat()}: {s.waiver.reason}",
        )
        for s, name in zip(result.suppressed, names, strict=True)
    ]


def _completeness_case(result: AuditResult) -> list[_Case]:
    if result.complete:
        return []
    reasons = tuple(result.incomplete_reasons)
    kind = "nothing audited" if result.nothing_audited else "incomplete"
    return [_Case("gpuaudit", "data completeness", "error", kind, "; ".join(reasons), reasons)]


def _properties(result: AuditResult) -> str:
    start, end = window_bounds(result)
    pairs = [
        ("cluster", result.cluster),
        ("window.start", start),
        ("window.end", end),
        ("complete", str(result.complete).lower()),
        ("checks.run", str(len(result.checks_run))),
        ("checks.skipped", str(len(result.skipped))),
        ("findings", str(len(result.findings))),
        ("waived", str(len(result.suppressed))),
        ("gpuaudit.version", __version__),
    ]
    rows = "\n".join(f"      <property name={_attr(k)} value={_attr(v)}/>" for k, v in pairs)
    return f"    <properties>\n{rows}\n    </properties>"


def _system_out(result: AuditResult) -> str:
    s = result.summary
    lines = [
        f"Cluster {result.cluster}, {window_text(result)}.",
        f"{plural(len(result.findings), 'finding')}, {num(s.idle_gpu_hours)} idle GPU-hours, "
        f"{num(s.wasted_cost)} {s.currency} wasted.",
        f"{plural(len(result.checks_run), 'check')} ran, {len(result.skipped)} skipped; "
        f"{len(result.suppressed)} findings waived.",
    ]
    lines += [f"INCOMPLETE: {r}" for r in result.incomplete_reasons]
    return f"    <system-out>{_text(lines)}</system-out>\n    <system-err/>"


def render(result: AuditResult) -> str:
    """The JUnit XML document (see the module docstring)."""
    cases = (
        _completeness_case(result)
        + _finding_cases(result)
        + _check_cases(result)
        + _waived_cases(result)
    )
    counts = Counter(c.outcome for c in cases)
    host = terminal(result.cluster, 200).strip() or "unknown"
    suite = (
        f'  <testsuite name="gpuaudit" package="gpuaudit" id="0" hostname={_attr(host)} '
        f'tests="{len(cases)}" failures="{counts["failure"]}" errors="{counts["error"]}" '
        f'skipped="{counts["skipped"]}" time="0" '
        f"timestamp={_attr(result.generated_at.removesuffix('Z'))}>"
    )
    body = "\n".join(c.xml() for c in cases)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n<testsuites>\n'
        f"{suite}\n{_properties(result)}\n{body}\n{_system_out(result)}\n"
        "  </testsuite>\n</testsuites>\n"
    )


FORMAT = ReportFormat("junit", render)
