"""`--report showback=FILE.csv` and `--report focus=FILE.csv` (issue 35): written in one scan
with the other reports, adding up to the cluster's cost, formula-safe, and the FOCUS file
checked against the column rules of FOCUS 1.2 (FinOps-Open-Cost-and-Usage-Spec/FOCUS_Spec at
tag v1.2: `specification/columns/*.md` for presence, type and nullability, and
`specification/attributes/` for the Date/Time, Numeric, Key-Value, Unit and Currency formats).
No FOCUS validator is published on PyPI, so the rules are encoded here."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import re
from decimal import Decimal
from pathlib import Path

from typer.testing import CliRunner

from gpuaudit.audit.assemble import AuditResult, run_checks
from gpuaudit.audit.settings import Settings
from gpuaudit.cli import app
from gpuaudit.report import focus, render, showback_csv
from gpuaudit.report.csvsafe import guard
from tests.test_showback import PRICES, _hand

runner = CliRunner()

# FOCUS 1.2, specification/columns/<column>.md, "Content Constraints" (Feature level, Allows
# nulls, Data type).
MANDATORY = {
    "BilledCost": ("Decimal", False),
    "BillingAccountId": ("String", False),
    "BillingAccountName": ("String", True),
    "BillingCurrency": ("String", False),
    "BillingPeriodEnd": ("DateTime", False),
    "BillingPeriodStart": ("DateTime", False),
    "ChargeCategory": ("String", False),
    "ChargeClass": ("String", True),
    "ChargeDescription": ("String", True),
    "ChargePeriodEnd": ("DateTime", False),
    "ChargePeriodStart": ("DateTime", False),
    "ContractedCost": ("Decimal", False),
    "EffectiveCost": ("Decimal", False),
    "InvoiceIssuerName": ("String", False),
    "ListCost": ("Decimal", False),
    "PricingQuantity": ("Decimal", True),
    "PricingUnit": ("String", True),
    "ProviderName": ("String", False),
    "PublisherName": ("String", False),
    "ServiceCategory": ("String", False),
    "ServiceName": ("String", False),
}
OPTIONAL = {
    "ConsumedQuantity": "Decimal",
    "ConsumedUnit": "String",
    "Tags": "JSON",
    "SkuPriceDetails": "JSON",
    "CommitmentDiscountQuantity": "Decimal",
    "ChargeFrequency": "String",
}
CHARGE_CATEGORY = {"Usage", "Purchase", "Tax", "Credit", "Adjustment"}
CHARGE_FREQUENCY = {"One-Time", "Recurring", "Usage-Based"}
PRICING_CATEGORY = {"Standard", "Dynamic", "Committed", "Other"}
SERVICE_CATEGORY = {
    "AI and Machine Learning", "Analytics", "Business Applications", "Compute", "Databases",
    "Developer Tools", "Multicloud", "Identity", "Integration", "Internet of Things",
    "Management and Governance", "Media", "Migration", "Mobile", "Networking", "Security",
    "Storage", "Web", "Other",
}  # fmt: skip
DATETIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z")  # Date/Time Format: UTC, 'Z'
NUMBER = re.compile(r"-?\d+(\.\d+)?([eE]-?\d+)?")  # Numeric Format: no '+', commas, symbols
UNIT = re.compile(r"[A-Z][A-Za-z]*(-[A-Z][a-z]+)?")  # Unit Format: `GPU-Hours`


def _result(rule: str = "proportional", cluster: str = "lab") -> AuditResult:
    r = run_checks(_hand(), Settings(prices=PRICES), group_label="cost", idle_rule=rule)
    return dataclasses.replace(r, cluster=cluster)


def _read(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def assert_focus_valid(text: str) -> list[dict[str, str]]:
    """The column rules of FOCUS 1.2 on a CSV dataset (null: an empty cell)."""
    rows = _read(text)
    header = next(csv.reader(io.StringIO(text)))
    assert len(header) == len(set(header))
    assert set(MANDATORY) <= set(header), set(MANDATORY) - set(header)
    for row in rows:
        for col, value in row.items():
            kind, nulls = MANDATORY.get(col, (OPTIONAL.get(col, "String"), True))
            if value == "":
                assert nulls, f"{col} must not be null"
                continue
            if kind == "Decimal":
                assert NUMBER.fullmatch(value), (col, value)
                Decimal(value)
            elif kind == "DateTime":
                assert DATETIME.fullmatch(value), (col, value)
            elif kind == "JSON":  # Key-Value Format: an object of scalar values
                obj = json.loads(value)
                assert isinstance(obj, dict)
                assert all(not isinstance(v, (dict, list)) for v in obj.values()), col
        assert row["ChargeCategory"] in CHARGE_CATEGORY
        assert row["ChargeFrequency"] in CHARGE_FREQUENCY
        assert row["ServiceCategory"] in SERVICE_CATEGORY
        assert row["PricingCategory"] in PRICING_CATEGORY | {""}
        assert re.fullmatch(r"[A-Z]{3}", row["BillingCurrency"])  # ISO 4217
        # ConsumedQuantity: not null for Usage (no correction), null otherwise; ConsumedUnit
        # and PricingUnit null exactly where their quantity is.
        usage = row["ChargeCategory"] == "Usage"
        assert (row["ConsumedQuantity"] != "") == usage
        assert (row["PricingQuantity"] != "") == usage
        assert (row["ConsumedUnit"] == "") == (row["ConsumedQuantity"] == "")
        assert (row["PricingUnit"] == "") == (row["PricingQuantity"] == "")
        for unit in (row["ConsumedUnit"], row["PricingUnit"]):
            assert unit == "" or UNIT.fullmatch(unit), unit
        assert row["ChargePeriodStart"] < row["ChargePeriodEnd"]
    return rows


def test_focus_file_follows_the_column_rules_and_adds_up() -> None:
    for rule in ("none", "proportional", "even"):
        result = _result(rule)
        rows = assert_focus_valid(render(result, "focus"))
        assert result.showback is not None
        cluster = result.showback.total("capacity_cost")
        assert sum(Decimal(r["BilledCost"]) for r in rows) == cluster == Decimal("48.00")
        used = [r for r in rows if r["ChargeCategory"] == "Usage"]
        assert sum(Decimal(r["ConsumedQuantity"]) for r in used) == Decimal("7.71")
        assert {r["ConsumedUnit"] for r in used} == {"GPU-Hours"}
        for r in rows:
            assert json.loads(r["Tags"])["gpuaudit/idle_rule"] == rule
            for col in focus.FOCUS_NULL:
                assert r[col] == "", col


def test_focus_columns_cover_the_issue_and_null_what_gpuaudit_cannot_fill() -> None:
    header = next(csv.reader(io.StringIO(render(_result(), "focus"))))
    for col in ("BilledCost", "EffectiveCost", "ListCost", "ChargePeriodStart",
                "ChargePeriodEnd", "ResourceId", "ResourceType", "ServiceName",
                "ConsumedQuantity", "ConsumedUnit", "Tags", "RegionId", "SkuId"):  # fmt: skip
        assert col in header


def test_showback_csv_adds_up_per_grouping() -> None:
    result = _result("even")
    rows = _read(render(result, "showback"))
    assert list(rows[0]) == list(showback_csv.SHOWBACK_COLUMNS)
    assert {r["group_by"] for r in rows} == {"namespace", "label:cost", "owner"}
    for by in ("namespace", "label:cost", "owner"):
        mine = [r for r in rows if r["group_by"] == by]
        for col in ("allocation_basis_cost", "usage_basis_cost"):
            assert sum(Decimal(r[col]) for r in mine) == Decimal("48.00"), (by, col)
        assert sum(Decimal(r["gpu_hours_allocated"]) for r in mine) == Decimal("9.71")
        assert {r["idle_rule"] for r in mine} == {"even"}


def test_cells_that_start_like_a_formula_are_guarded() -> None:
    assert [guard(x) for x in ("=1+1", "+a", "-b", "@c", "ok", "")] == [
        "'=1+1", "'+a", "'-b", "'@c", "ok", ""
    ]  # fmt: skip
    result = _result(cluster='=HYPERLINK("x")')
    rows = _read(render(result, "focus"))
    assert {r["BillingAccountId"] for r in rows} == {'\'=HYPERLINK("x")'}
    for r in rows:
        for value in r.values():
            assert not value.startswith(("=", "+", "@")), value
            if value.startswith("-"):
                Decimal(value)  # a negative number, never text


def test_written_in_one_scan_with_the_other_reports(tmp_path: Path) -> None:
    sb, fo, js = tmp_path / "showback.csv", tmp_path / "focus.csv", tmp_path / "r.json"
    args = ["scan", "--demo", "-q", "--idle-rule", "proportional", "--group-by-label", "team"]
    args += ["--report", f"showback={sb}", "--report", f"focus={fo}", "--report", f"json={js}"]
    res = runner.invoke(app, args)
    assert res.exit_code in (0, 1), res.output
    rows = assert_focus_valid(fo.read_text(encoding="utf-8"))
    lines = _read(sb.read_text(encoding="utf-8"))
    total = sum(Decimal(r["BilledCost"]) for r in rows)
    by_ns = [r for r in lines if r["group_by"] == "namespace"]
    assert sum(Decimal(r["usage_basis_cost"]) for r in by_ns) == total
    assert {r["idle_rule"] for r in lines} == {"proportional"}
    assert json.loads(js.read_text())["summary"]


def test_an_unknown_rule_is_refused() -> None:
    res = runner.invoke(app, ["scan", "--demo", "-q", "--idle-rule", "fair"])
    assert res.exit_code == 2 and "--idle-rule must be one of" in res.output


def test_no_number_is_malformed() -> None:
    for r in _read(render(_result(), "showback")):
        for col in showback_csv.SHOWBACK_COLUMNS[7:]:
            assert NUMBER.fullmatch(r[col]), (col, r[col])


def _cents(x: float) -> int:
    return round(x * 100)


def test_the_json_section_adds_up_to_the_summary_and_the_cluster() -> None:
    for rule in ("none", "proportional", "even"):
        doc = json.loads(render(_result(rule), "json"))
        sb, s = doc["showback"], doc["summary"]
        assert sb["idle_rule"] == rule
        products = sb["products"]
        assert sum(p["gpus"] for p in products) == s["gpus_total"]
        assert sum(_cents(p["allocated_gpu_hours"]) for p in products) == _cents(
            s["allocated_gpu_hours"]
        )
        assert sum(_cents(p["idle_gpu_hours"]) for p in products) == _cents(s["idle_gpu_hours"])
        assert _cents(sb["idle_cost"]) == _cents(s["wasted_cost"])
        assert _cents(sb["cluster_cost"]) == _cents(sb["allocated_cost"] + sb["unallocated_cost"])
        for g in sb["groupings"]:
            for basis in ("allocation_basis_cost", "usage_basis_cost"):
                assert sum(_cents(ln[basis]) for ln in g["lines"]) == _cents(sb["cluster_cost"])


def test_markdown_html_and_terminal_show_the_showback() -> None:
    result = _result("proportional")
    text = render(result, "markdown")
    assert "## Showback" in text and "Idle rule: proportional" in text
    assert "| total | 9.71 | 20.6 % | 48.00 | 48.00 |" in text
    assert "| cost |" in text  # the label's table
    page = render(result, "html")
    assert '<section id="showback">' in page and 'href="#showback"' in page
    assert "Showback (idle rule proportional): GPU cost 48.00 USD" in page
    assert "Showback (idle rule proportional): GPU cost 48.00 USD" in render(result, "table")


def test_names_are_data_in_every_showback_table() -> None:
    result = _result("none")
    assert result.showback is not None
    hostile = "<b>=x|y</b>\x1b[31m"
    groupings = tuple(
        dataclasses.replace(
            g,
            lines=tuple(dataclasses.replace(ln, group=hostile) for ln in g.lines[:1]) + g.lines[1:],
        )
        for g in result.showback.groupings
    )
    result = dataclasses.replace(
        result, showback=dataclasses.replace(result.showback, groupings=groupings)
    )
    page = render(result, "html")
    assert "<b>=x" not in page and "&lt;b&gt;=x" in page
    text = render(result, "markdown")
    assert "<b>" not in text and "\x1b" not in text and "=x|y" not in text
    rows = _read(render(result, "showback"))
    assert rows[0]["group"] == hostile  # kept as data: it starts like no formula


def test_the_demo_adds_up_to_its_summary() -> None:
    args = ["scan", "--demo", "-q", "-f", "json", "--idle-rule", "even", "--group-by-label", "team"]
    res = runner.invoke(app, args)
    assert res.exit_code in (0, 1), res.output
    doc = json.loads(res.stdout)
    sb, s = doc["showback"], doc["summary"]
    products = sb["products"]
    assert sum(p["gpus"] for p in products) == s["gpus_total"]
    for field in ("allocated_gpu_hours", "idle_gpu_hours"):
        assert sum(_cents(p[field]) for p in products) == _cents(s[field]), field
    assert _cents(sb["idle_cost"]) == _cents(s["wasted_cost"])
    assert [g["by"] for g in sb["groupings"]] == ["namespace", "label:team", "owner"]
    for g in sb["groupings"]:
        for field in ("allocated_gpu_hours", "idle_gpu_hours"):
            assert sum(_cents(ln[field]) for ln in g["lines"]) == _cents(s[field])
        for basis in ("allocation_basis_cost", "usage_basis_cost"):
            assert sum(_cents(ln[basis]) for ln in g["lines"]) == _cents(sb["cluster_cost"])
