"""The one total order (`gpuaudit.checks.findings.rank`): the risks apart and first, most urgent
first; the waste ranked by wasted GPU-hours, then cost, then severity; and the coherence pass's
primary findings, one per resource in each list."""

from __future__ import annotations

import random

from gpuaudit.audit.assemble import run_checks
from gpuaudit.audit.coherence import make_coherent
from gpuaudit.audit.settings import Settings
from gpuaudit.checks import by_code
from gpuaudit.checks.findings import (
    Category,
    Finding,
    Impact,
    Resource,
    Severity,
    lists,
    rank,
)
from tests.support.factories import Series, gpu_labels, inventory


def _f(
    code: str,
    name: str,
    hours: float,
    severity: Severity = Severity.MEDIUM,
    category: Category = Category.WASTE,
    cost: float | None = None,
    message: str = "",
) -> Finding:
    return Finding(
        code=code,
        severity=severity,
        resource=Resource("Pod", "ml", name, "", 1.0),
        message=message or f"{code} about {name}.",
        impact=Impact(hours, hours * 2.0 if cost is None else cost),
        recommendation=f"Fix {name}.",
        category=category,
    )


def test_waste_ranks_by_gpu_hours_then_cost_then_severity() -> None:
    zero_high = _f("GPU090", "q", 0.0, Severity.HIGH)
    small_low = _f("GPU010", "g", 1.0, Severity.LOW)
    big_medium = _f("GPU090", "v", 1176.0, Severity.MEDIUM, cost=12348.0)
    dear = _f("GPU001", "a", 336.0, Severity.MEDIUM, cost=2312.0)
    cheap_high = _f("GPU001", "b", 336.0, Severity.HIGH, cost=907.0)
    cheap_low = _f("GPU002", "c", 336.0, Severity.LOW, cost=907.0)
    ranked = rank([zero_high, small_low, cheap_low, cheap_high, dear, big_medium])
    assert ranked == (big_medium, dear, cheap_high, cheap_low, small_low, zero_high)


def test_risks_come_first_most_urgent_first() -> None:
    waste = _f("GPU001", "idle", 5000.0, Severity.HIGH)
    sick = _f("GPU070", "g1", 148.0, Severity.CRITICAL, Category.RISK)
    pressure = _f("GPU020", "p", 0.0, Severity.HIGH, Category.RISK)
    reset = _f("GPU070", "g2", 168.0, Severity.HIGH, Category.RISK)
    blind = _f("GPU080", "n", 1344.0, Severity.MEDIUM, Category.RISK)
    ranked = rank([waste, blind, pressure, reset, sick])
    assert ranked == (sick, reset, pressure, blind, waste)
    assert lists(ranked) == ((sick, reset, pressure, blind), (waste,))


def test_the_order_is_total_whatever_the_input_order() -> None:
    base = [
        _f("GPU001", "x", 10.0),
        _f("GPU001", "x", 10.0, message="Another sentence about x."),
        _f("GPU001", "y", 10.0),
        _f("GPU021", "x", 10.0),
        _f("GPU020", "x", 0.0, Severity.HIGH, Category.RISK),
        _f("GPU020", "x", 0.0, Severity.HIGH, Category.RISK, message="Crash loop of x."),
    ]
    want = rank(base)
    rng = random.Random(7)
    for _ in range(20):
        shuffled = list(base)
        rng.shuffle(shuffled)
        assert rank(shuffled) == want
    assert len({f.sort_key() for f in base}) == len(base)


def test_a_resource_with_a_risk_and_waste_leads_a_row_in_each_list() -> None:
    pressure = _f("GPU020", "nb-0", 0.0, Severity.HIGH, Category.RISK)
    idle = _f("GPU001", "nb-0", 300.0, Severity.HIGH)
    big = _f("GPU021", "nb-0", 77.0)
    out, _ = make_coherent([big, idle, pressure])
    assert [(f.code, f.primary) for f in out] == [
        ("GPU020", True),
        ("GPU001", True),
        ("GPU021", False),
    ]
    assert out[0].related == ("GPU001", "GPU021") and out[1].related == ("GPU020", "GPU021")


def test_the_checks_put_sick_gpus_and_memory_pressure_with_the_risks() -> None:
    lab = gpu_labels(uuid="G0", pod="nb-0", namespace="ml")
    s = Series(lab, act=[0.01] * 40, fb_used=80000.0, fb_free=1000.0, xids=[119])
    codes = ("GPU001", "GPU020", "GPU070")
    checks = tuple(c for c in map(by_code, codes) if c is not None)
    result = run_checks(inventory([s], 40), Settings(), checks)
    got = {f.code: f.category for f in result.findings}
    assert got == {"GPU001": Category.WASTE, "GPU020": Category.RISK, "GPU070": Category.RISK}
    assert [f.code for f in result.findings][-1] == "GPU001"  # the waste after the risks
    # One row per resource and list: the idle pod's waste is not hidden under its pressure.
    assert {f.code for f in result.primaries} == set(codes)
    (pressure,) = [f for f in result.findings if f.code == "GPU020"]
    assert result.related_to(pressure) == ()
    assert result.worst() is Severity.HIGH
