"""The Kubernetes-side join over time, end to end on a generated scenario
(`gpuaudit.scenario.timejoin_cases`): each check names exactly the planted pods of the node and
none of its near-misses, the unattributed hours are those of the buckets two pods shared, and
the ledger adds up to the allocated GPU-hours."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from gpuaudit.audit.assemble import AuditResult, run_checks
from gpuaudit.audit.settings import Settings
from gpuaudit.inventory import Views, build
from gpuaudit.inventory import columns as C
from gpuaudit.inventory.attribution import Method
from gpuaudit.scenario import generate, to_snapshot
from gpuaudit.scenario.timejoin_cases import NODE

DAYS = 2
HOURS = 24 * DAYS


@pytest.fixture(scope="module")
def scenario() -> Any:
    return generate(48, DAYS, 11)


@pytest.fixture(scope="module")
def snap(scenario: Any) -> Any:
    return to_snapshot(scenario)


@pytest.fixture(scope="module")
def audited(scenario: Any, snap: Any) -> tuple[dict[str, Any], AuditResult, Any]:
    inv = build(snap)
    return scenario.truth, run_checks(inv, Settings()), inv


PODS = {("ml-tune", "mig-prep-0"), ("ml-tune", "mig-train-0"), ("ml-eval", "mig-eval-0")}
PODS |= {("ml-eval", "mig-serve-0")}
"""The pods of the cases."""


def _mine(truth: dict[str, Any], key: str, code: str) -> set[str]:
    return {e["name"] for e in truth[key].get(code, []) if (e["namespace"], e["name"]) in PODS}


@pytest.mark.parametrize("code", ["GPU001", "GPU002", "GPU003", "GPU020", "GPU021", "GPU080"])
def test_each_check_names_exactly_the_planted_pods_of_the_node(
    audited: tuple[dict[str, Any], AuditResult, Any], code: str
) -> None:
    truth, result, _ = audited
    found = {
        f.resource.name
        for f in result.findings
        if f.code == code and (f.resource.namespace, f.resource.name) in PODS
    }
    assert found == _mine(truth, "planted", code)
    assert not found & _mine(truth, "near_misses", code)


def test_the_idle_pod_that_ended_is_found_for_its_own_hours(
    audited: tuple[dict[str, Any], AuditResult, Any],
) -> None:
    _, result, _ = audited
    idle = next(
        f for f in result.findings if f.code == "GPU001" and f.resource.name == "mig-prep-0"
    )
    hours = 3 * HOURS // 7
    assert idle.evidence["hours_held"] == pytest.approx(hours)
    # Eight 3g.40gb instances, 3/7 of a GPU each.
    assert idle.impact.gpu_hours == pytest.approx(8 * 3 / 7 * hours)


def test_the_buckets_two_pods_shared_are_unattributed_for_those_hours_only(
    audited: tuple[dict[str, Any], AuditResult, Any],
) -> None:
    _, result, _ = audited
    found = {f.resource.name: f for f in result.findings if f.code == "GPU080"}
    gpus = 8 * 2 / 7
    assert found["mig-eval-0"].evidence["hours"] == pytest.approx(3.0)
    assert found["mig-eval-0"].evidence["attribution"] == "no_pod_label"
    assert found["mig-eval-0"].impact.gpu_hours == pytest.approx(gpus * 3.0)
    ran_first_bucket = 115 / 3600
    assert found["mig-serve-0"].evidence["hours"] == pytest.approx(2 + ran_first_bucket, abs=0.01)
    assert found["mig-serve-0"].impact.gpu_hours == pytest.approx(gpus * (2 + ran_first_bucket))


def test_each_pod_holds_its_own_buckets_and_the_gap_is_unheld(
    audited: tuple[dict[str, Any], AuditResult, Any],
) -> None:
    _, _, inv = audited
    h = inv.holdings[(inv.holdings[C.NODE] == NODE) & (inv.holdings[C.MIG_PROFILE] == "3g.40gb")]
    held = h[h[C.HELD]]
    assert set(held[C.ATTRIBUTION]) == {Method.KUBERNETES_JOIN.value}
    hours = held.groupby(C.POD)[C.HOURS].max().to_dict()
    first_end = 3 * HOURS // 7
    second = first_end + max(2, HOURS // 14)
    assert hours["mig-prep-0"] == pytest.approx(first_end)
    # From its start, 115 s before hour `second`, to the end.
    assert hours["mig-train-0"] == pytest.approx(HOURS - second + 115 / 3600, abs=1e-3)
    # The gap between them: held by no pod, not allocated.
    free = h[~h[C.HELD]]
    assert free[C.HOURS].sum() == pytest.approx(8 * (second - first_end - 115 / 3600), abs=1e-2)


def test_the_ledger_adds_up_to_the_allocated_gpu_hours(
    audited: tuple[dict[str, Any], AuditResult, Any],
) -> None:
    _, result, inv = audited
    book = result.attribution
    assert book is not None
    assert book.allocated_gpu_hours == pytest.approx(result.summary.allocated_gpu_hours)
    held = inv.holdings[inv.holdings[C.HELD]]
    joined = held[held[C.ATTRIBUTION] == Method.KUBERNETES_JOIN.value][C.GPU_HOURS].sum()
    assert book.attributed[Method.KUBERNETES_JOIN.value] == pytest.approx(joined)
    parts = book.rounded()  # the report's hundredths
    assert round(sum(parts.values()), 2) == round(result.summary.allocated_gpu_hours, 2)
    # Independently of the ledger: the GPU-hours measured as held plus the unattributed ones.
    un = Views(inv, Settings().prices).unattributed
    measured = float(held[C.GPU_HOURS].sum())
    assert result.summary.allocated_gpu_hours == pytest.approx(measured + un[C.GPU_HOURS].sum())
    # The node's own share: its pods' buckets joined, the three both 2g.20gb pods ran in not.
    mine = held[held[C.NODE] == NODE][C.GPU_HOURS].sum()
    first_end, second = 3 * HOURS // 7, 3 * HOURS // 7 + max(2, HOURS // 14)
    three_g = first_end + HOURS - second + 115 / 3600
    two_g = HOURS - 3  # mig-eval-0 to 3 h before the handover, mig-serve-0 after it
    assert mine == pytest.approx(8 * 3 / 7 * three_g + 8 * 2 / 7 * two_g)
    left = un[un[C.NODE] == NODE]
    assert left[C.GPU_HOURS].sum() == pytest.approx(8 * 2 / 7 * (3 + 2 + 115 / 3600))


def test_each_part_has_the_largest_hourly_p95_of_its_own_buckets(
    snap: Any, audited: tuple[dict[str, Any], AuditResult, Any]
) -> None:
    # From the snapshot's answer itself: each instance's hourly p95 by bucket end.
    p95: dict[tuple[str, str], dict[float, float]] = {}
    for entry in snap.prometheus["act_p95_hourly"]:
        for r in entry["body"]["data"]["result"]:
            m = r["metric"]
            if m.get("Hostname") == NODE and m.get("GPU_I_ID"):
                by_t = p95.setdefault((m["UUID"], m["GPU_I_ID"]), {})
                by_t.update({float(t): float(v) for t, v in r["values"]})
    _, _, inv = audited
    h, hr = inv.holdings, inv.hourly
    split = h[(h[C.NODE] == NODE) & (h[C.ATTRIBUTION] == Method.KUBERNETES_JOIN.value)]
    series = set(split[C.SLOT])
    checked = 0
    for row in h[h[C.SLOT].isin(series)].itertuples(index=False):
        mine = hr[hr[C.HOLDING] == getattr(row, C.HOLDING)]
        others = hr[hr[C.HOLDING].isin(h.loc[h[C.SLOT] == getattr(row, C.SLOT), C.HOLDING])]
        shared = others[C.TS].duplicated(keep=False)
        uuid, gi = str(getattr(row, C.SLOT)).rsplit("/", 1)
        got = float(getattr(row, C.ACT_P95))
        if shared[others[C.HOLDING] == getattr(row, C.HOLDING)].any():
            assert np.isnan(got)  # a bucket cut between a pod and the rest is neither's
            continue
        want = max(p95[(uuid, gi)][t] for t in mine[C.TS].tolist())
        assert got == want
        checked += 1
    assert checked >= 8 * 3  # mig-prep-0, mig-eval-0 and mig-serve-0 at least
