"""The shared text helpers: one way to write a number, a percentage, money and a plural."""

from __future__ import annotations

import pytest

from gpuaudit.report.text import (
    count,
    delta_text,
    money,
    num,
    pct,
    plural,
    terminal,
    value_text,
)


@pytest.mark.parametrize(
    ("args", "kw", "shown"),
    [
        ((1234.56,), {}, "1,235"),
        ((1234.56, 1), {}, "1,234.6"),
        ((1234.56, 1), {"grouped": False}, "1234.6"),
        ((-1234.4,), {"sign": True}, "-1,234"),
        ((2.5, 1), {"sign": True, "grouped": False}, "+2.5"),
        ((0.0,), {"sign": True}, "+0"),
    ],
)
def test_num(args: tuple[float, ...], kw: dict[str, bool], shown: str) -> None:
    assert num(*args, **kw) == shown


def test_figures() -> None:
    assert count(1234567) == "1,234,567"
    assert pct(None) == "n/a" and pct(0.1234) == "12.3 %" and pct(12.5) == "1250.0 %"
    assert money(11790.4, "USD") == "11,790 USD"
    assert plural(1, "check") == "1 check" and plural(0, "check") == "0 checks"
    assert plural(1234, "finding") == "1,234 findings"
    assert (
        plural(2, "query", "queries") == "2 queries" and plural(1, "query", "queries") == "1 query"
    )


def test_trend_figures() -> None:
    assert delta_text("mean_activity", 0.025, "USD") == "+2.5 pp"
    assert delta_text("wasted_cost", -1234.0, "USD") == "-1,234 USD"
    assert delta_text("gpus_total", 3, "USD") == "+3"
    assert delta_text("gpus_total", None, "USD") == "n/a"
    assert value_text("allocation_rate", 0.5, "EUR") == "50.0 %"
    assert value_text("wasted_cost", 1000.0, "EUR") == "1,000 EUR"
    assert value_text("idle_gpu_hours", 12345.6, "EUR") == "12,346"


def test_terminal_shows_control_characters_and_cuts() -> None:
    assert terminal("a\x1b[31mb\nc") == "a\\x1b[31mb\\x0ac"
    assert terminal("x" * 10, 5) == "xxxx…"
