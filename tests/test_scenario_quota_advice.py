"""GPU090's quota advice end to end on a generated scenario
(`gpuaudit.scenario.quota_advice_cases`): the overcommitted flavor's finding names its queues
and their new quota as the truth expects, lowering them together to no less than what they
admitted at once; the near-miss flavor and the queues themselves stay quiet."""

from __future__ import annotations

from typing import Any

import pytest

from gpuaudit.audit.assemble import AuditResult, run_checks
from gpuaudit.audit.settings import Settings
from gpuaudit.checks.findings import Finding
from gpuaudit.inventory import build
from gpuaudit.scenario import generate, to_snapshot
from gpuaudit.scenario.quota_advice_cases import NEAR_MISS, PLANTED

DAYS = 2
CODE = "GPU090"
QUEUES = {"shared-a-cq", "shared-b-cq", "lent-a-cq", "lent-b-cq"}


@pytest.fixture(scope="module")
def audited() -> tuple[dict[str, Any], AuditResult]:
    sc = generate(60, DAYS, 5)
    return sc.truth, run_checks(build(to_snapshot(sc)), Settings())


def _flavor(result: AuditResult, name: str) -> list[Finding]:
    return [
        f
        for f in result.findings
        if f.code == CODE and (f.resource.kind, f.resource.name) == ("ResourceFlavor", name)
    ]


def test_the_overcommitted_flavor_names_its_queues_and_their_new_quota(
    audited: tuple[dict[str, Any], AuditResult],
) -> None:
    truth, result = audited
    (entry,) = [e for e in truth["planted"][CODE] if e["name"] == PLANTED]
    want = entry["expect"]
    (f,) = _flavor(result, PLANTED)
    ev = f.evidence
    assert [
        {k: c[k] for k in ("queue", "from", "to", "borrows_at_peak")} for c in ev["quota_changes"]
    ] == want["quota_changes"]
    assert ev["short_after_changes"] == 0
    assert ev["flavor_allocatable"] == want["flavor_allocatable"]
    assert ev["peak_admitted_together"] == want["peak_admitted_together"]
    assert ev["queue_peaks_admitted"] == want["queue_peaks_admitted"]
    # Never below what the queues admitted at once: 2 + 2 of quota for the 3 admitted at once.
    assert sum(c["to"] for c in ev["quota_changes"]) >= ev["peak_admitted_together"]
    assert ev["cohort_peaks_admitted_together"] == {"shared": 3}
    assert f.recommendation.startswith(
        "Lower nominalQuota of nvidia.com/gpu in flavor gb200-shared: shared-a-cq from 4 to 2 "
        "(peak admitted 3, borrowing 1 from cohort shared at its peak), shared-b-cq from 4 to 2 "
        "(peak admitted 3, borrowing 1 from cohort shared at its peak); together 4 above what "
        "the flavor's nodes allocate (4 of 8 quota)."
    )
    assert "together they admitted at most 3 at once (their own peaks add up to 6)" in (
        f.recommendation
    )


def test_the_near_miss_flavor_and_the_queues_stay_quiet(
    audited: tuple[dict[str, Any], AuditResult],
) -> None:
    truth, result = audited
    near = {e["name"] for e in truth["near_misses"][CODE]}
    assert {NEAR_MISS, "shared-a-cq", "shared-b-cq"} <= near
    assert _flavor(result, NEAR_MISS) == []
    assert not [f for f in result.findings if f.code == CODE and f.resource.name in QUEUES]
