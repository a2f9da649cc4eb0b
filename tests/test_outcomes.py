"""What last week's findings became (`gpuaudit.audit.outcomes`), by hand: fixed (gone, scaled
down, no longer matching), still open with the weeks carried forward, waived, not verified, and
the realized savings scaled to a week; and what an earlier report is refused or warned for."""

from __future__ import annotations

from datetime import date
from time import gmtime, strftime
from typing import Any

import pytest

from gpuaudit.audit.outcomes import outcomes, vet
from gpuaudit.audit.waivers import Suppressed, Waiver
from gpuaudit.checks.findings import Finding, Impact, Resource, Severity
from gpuaudit.core.errors import ConfigError
from gpuaudit.inventory.owners import build

DAY = 86400.0
NOW = (1_800_000_000.0, 1_800_000_000.0 + 7 * DAY)


def _obj(name: str, uid: str, ns: str = "ml", **extra: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": ns, "uid": uid}, **extra}


OWNERS = build(
    {
        "deployments": [
            {
                "apiVersion": "apps/v1",
                "items": [
                    _obj("parked", "d1", spec={"replicas": 0}),
                    _obj("busy", "d2", spec={"replicas": 2}),
                ],
            }
        ],
        "pods": [{"apiVersion": "v1", "items": [_obj("still-here", "p1")]}],
        "nodes": [{"apiVersion": "v1", "items": [{"metadata": {"name": "gpu-1"}}]}],
    },
    {"objects": {"deployments": "ok", "pods": "ok", "nodes": "ok"}},
)


def _old(fp: str, kind: str, name: str, hours: float, cost: float, **extra: Any) -> dict[str, Any]:
    code = fp.split("|")[0]
    return {
        "code": code,
        "fingerprint": fp,
        "resource": {"kind": kind, "namespace": "" if kind == "Node" else "ml", "name": name},
        "impact": {"gpu_hours": hours, "cost": cost},
        "category": "waste",
        "counted_in_total": True,
        **extra,
    }


def _finding(name: str, owner: str) -> Finding:
    return Finding(
        code="GPU001",
        severity=Severity.HIGH,
        resource=Resource("Pod", "ml", name),
        message="m",
        impact=Impact(1.0, 2.0),
        recommendation="r",
        evidence={"owner": owner},
    )


def _previous(findings: list[dict[str, Any]], hours: float = 84.0) -> dict[str, Any]:
    end = NOW[0]
    start = end - hours * 3600
    iso = "%Y-%m-%dT%H:%M:%SZ"
    return {
        "schema_version": "1.6",
        "cluster": "c1",
        "window": {"start": strftime(iso, gmtime(start)), "end": strftime(iso, gmtime(end))},
        "summary": {"currency": "USD"},
        "findings": findings,
        "comparison": {
            "still_open": [
                {"fingerprint": "GPU001|Pod|ml|Deployment/open", "weeks": 4, "first_seen": "x"}
            ]
        },
    }


def test_each_earlier_finding_is_judged_and_the_savings_are_scaled_to_a_week() -> None:
    previous = _previous(
        [
            _old("GPU001|Pod|ml|Deployment/gone", "Pod", "gone-abc", 10.0, 30.0,
                 evidence={"owner": "Deployment/gone"}),
            _old("GPU001|Pod|ml|Deployment/parked", "Pod", "parked-abc", 4.0, 12.0,
                 evidence={"owner": "Deployment/parked"}),
            _old("GPU001|Pod|ml|Deployment/busy", "Pod", "busy-abc", 1.5, 4.5,
                 evidence={"owner": "Deployment/busy"}),
            _old("GPU001|Pod|ml|bare-0", "Pod", "bare-0", 2.0, 6.0),
            _old("GPU001|Pod|ml|still-here", "Pod", "still-here", 3.0, 9.0,
                 counted_in_total=False),
            _old("GPU021|Pod|ml|bare-0", "Pod", "bare-0", 1.0, 3.0),
            _old("GPU060|Node||gpu-1", "Node", "gpu-1", 8.0, 24.0),
            _old("GPU070|GPU||GPU-1", "GPU", "GPU-1", 5.0, 15.0, category="risk"),
            _old("GPU001|Pod|ml|Deployment/open", "Pod", "open-abc", 1.0, 3.0),
            _old("GPU001|Pod|ml|Deployment/new-this-week", "Pod", "x", 1.0, 3.0),
            _old("GPU001|Pod|ml|Deployment/waived", "Pod", "waived-abc", 1.0, 3.0),
            _old("GPU030|Pod|ml|Deployment/topo", "Pod", "topo-abc", 7.0, 21.0),
        ]
    )  # fmt: skip
    previous["findings"] = [
        f for f in previous["findings"] if "new-this-week" not in f["fingerprint"]
    ]
    now = [
        _finding("open-def", "Deployment/open"),
        _finding("fresh-xyz", "Deployment/fresh"),
    ]
    waiver = Waiver(
        "GPU001",
        "holiday",
        date(2099, 1, 1),
        fingerprint="GPU001|Pod|ml|Deployment/waived",
        by="al",
    )
    waived = [Suppressed(_finding("waived-def", "Deployment/waived"), waiver)]
    got = outcomes(
        previous,
        now,
        waived,
        OWNERS,
        ["GPU001", "GPU021", "GPU060", "GPU070"],
        {"GPU030": "no topology files"},
        "USD",
    )
    how = {f.fingerprint: f.how for f in got.fixed}
    assert how == {
        "GPU001|Pod|ml|Deployment/gone": "gone",
        "GPU001|Pod|ml|Deployment/parked": "scaled_down",
        "GPU001|Pod|ml|Deployment/busy": "no_longer_matches",
        "GPU001|Pod|ml|bare-0": "gone",
        "GPU021|Pod|ml|bare-0": "gone",
        "GPU001|Pod|ml|still-here": "no_longer_matches",
        "GPU060|Node||gpu-1": "no_longer_matches",
        "GPU070|GPU||GPU-1": "no_longer_matches",
    }
    why = {f.fingerprint: f.why for f in got.fixed}
    assert why["GPU001|Pod|ml|Deployment/gone"] == (
        "Deployment ml/gone, which owned it, is no longer in the cluster."
    )
    assert why["GPU001|Pod|ml|Deployment/parked"] == (
        "Deployment ml/parked, which owned it, is scaled down to 0 replicas."
    )
    assert why["GPU001|Pod|ml|bare-0"] == "The pod ml/bare-0 is no longer in the cluster."
    # An 84-hour window: each figure doubles to a week.
    week = {f.fingerprint: (f.gpu_hours_per_week, f.cost_per_week, f.counted) for f in got.fixed}
    assert week["GPU001|Pod|ml|Deployment/gone"] == (20.0, 60.0, True)
    assert week["GPU001|Pod|ml|still-here"] == (6.0, 18.0, True)  # its hours were freed
    assert week["GPU021|Pod|ml|bare-0"] == (2.0, 6.0, False)  # GPU001's hours on that pod
    assert week["GPU070|GPU||GPU-1"] == (10.0, 30.0, False)  # a risk, not waste
    # gone 20 + parked 8 + busy 3 + bare 4 + still-here 6 + node 16.
    assert (got.savings.gpu_hours, got.savings.cost, got.savings.findings) == (57.0, 171.0, 6)
    (still,) = got.still_open
    assert (still.fingerprint, still.weeks, still.first_seen) == (
        "GPU001|Pod|ml|Deployment/open",
        5,
        "x",
    )
    assert got.new == ("GPU001|Pod|ml|Deployment/fresh",)
    assert [(w.fingerprint, w.reason, w.by) for w in got.waived] == [
        ("GPU001|Pod|ml|Deployment/waived", "holiday", "al")
    ]
    (unverified,) = got.unverified
    assert unverified.why == "GPU030 did not run this week: no topology files"


def test_a_finding_first_in_the_earlier_report_is_open_for_two_weeks() -> None:
    previous = _previous([_old("GPU001|Pod|ml|Deployment/a", "Pod", "a-1", 1.0, 3.0)])
    previous.pop("comparison")
    got = outcomes(previous, [_finding("a-2", "Deployment/a")], [], OWNERS, ["GPU001"], {}, "USD")
    assert [(s.weeks, s.first_seen) for s in got.still_open] == [(2, previous["window"]["end"])]


def test_another_currency_keeps_the_gpu_hours_and_drops_the_cost() -> None:
    previous = _previous([_old("GPU001|Pod|ml|bare-0", "Pod", "bare-0", 2.0, 6.0)], hours=168)
    got = outcomes(previous, [], [], OWNERS, ["GPU001"], {}, "EUR")
    assert (got.savings.gpu_hours, got.savings.cost) == (2.0, None)
    assert got.fixed[0].cost_per_week is None
    assert vet(previous, "--previous", "c1", NOW, "EUR") == (
        "--previous: the earlier report's costs are in 'USD', this one's in 'EUR'; the "
        "realized savings state GPU-hours only",
    )


def test_another_cluster_and_a_later_window_are_refused_an_overlap_warned() -> None:
    previous = _previous([], hours=168)
    assert vet(previous, "--previous", "c1", NOW, "USD") == ()
    with pytest.raises(ConfigError, match="of cluster 'c1', this audit of 'c2'"):
        vet(previous, "--previous", "c2", NOW, "USD")
    with pytest.raises(ConfigError, match="ends .* after this audit's"):
        vet(previous, "--history", "c1", (NOW[0] - 2 * DAY, NOW[0] - DAY), "USD")
    (warning,) = vet(previous, "--previous", "c1", (NOW[0] - DAY, NOW[1]), "USD")
    assert "overlaps" in warning
    previous.pop("window")
    (warning,) = vet(previous, "--previous", "c1", NOW, "USD")
    assert "has no window" in warning


def test_a_fixed_node_and_the_fixed_pods_on_it_count_their_hours_once() -> None:
    def on(node: str, fp: str, name: str, hours: float) -> dict[str, Any]:
        old = _old(fp, "Pod", name, hours, hours)
        old["resource"]["node"] = node
        return old

    previous = _previous(
        [
            _old("GPU060|Node||n1", "Node", "n1", 10.0, 10.0),
            on("n1", "GPU001|Pod|ml|a", "a", 3.0),
            on("n1", "GPU001|Pod|ml|b", "b", 4.0),
            _old("GPU060|Node||n2", "Node", "n2", 5.0, 5.0),
            on("n2", "GPU001|Pod|ml|c", "c", 3.0),
            on("n2", "GPU001|Pod|ml|d", "d", 4.0),
        ],
        hours=168,
    )
    got = outcomes(previous, [], [], OWNERS, ["GPU001", "GPU060"], {}, "USD")
    counted = sorted(f.fingerprint for f in got.fixed if f.counted)
    # n1: the node's 10 beat its pods' 7; n2: its pods' 7 beat the node's 5.
    assert counted == ["GPU001|Pod|ml|c", "GPU001|Pod|ml|d", "GPU060|Node||n1"]
    assert got.savings.gpu_hours == 17.0
