"""Prices per GPU-hour by GPU model, used to turn wasted GPU-hours into money.

The defaults are indicative on-demand list prices per GPU, derived from public cloud price
pages (AWS EC2 on-demand, us-east-1, 2025: instance price divided by its GPU count:
p5.48xlarge for H100, p5en.48xlarge for H200, p4de.24xlarge for A100 80GB, p4d.24xlarge for
A100 40GB, g6e.12xlarge for L40S, g6.xlarge for L4, g5.xlarge for A10G). They are a starting
point, not your bill: set your own in `gpuaudit.toml` under `[prices]`, keyed by a substring of
the GPU model name (`"H100" = 4.10`).
"""

from __future__ import annotations

from collections.abc import Mapping

DEFAULT_PRICES: dict[str, float] = {
    "GB200": 10.50,
    "B200": 8.60,
    "H200": 7.91,
    "H100": 6.88,
    "A100-SXM4-80GB": 5.12,
    "A100 80GB": 5.12,
    "A100-80GB": 5.12,
    "A100": 4.10,
    "L40S": 2.70,
    "A10": 1.01,
    "L4": 0.80,
    "T4": 0.53,
}
"""USD per GPU-hour by model substring; the longest matching key wins."""

FALLBACK_PRICE = 2.00
"""USD per GPU-hour for a model that matches no key."""


def _norm(text: str) -> str:
    return text.upper().replace("_", "-")


def price_key(model: str, prices: Mapping[str, float]) -> str:
    """The key of `prices` that prices `model`: the longest one found in the model name;
    `default` when none is (the key `default`, else `FALLBACK_PRICE`)."""
    name = _norm(model)
    best = ""
    for key in prices:
        k = _norm(key)
        if k != "DEFAULT" and k in name and len(k) > len(_norm(best)):
            best = key
    return best or "default"


def price_for(model: str, prices: Mapping[str, float]) -> float:
    """Price per GPU-hour of `model`: the longest key of `prices` found in the model name."""
    key = price_key(model, prices)
    return float(prices.get(key, FALLBACK_PRICE))


def price_source(model: str, prices: Mapping[str, float]) -> str:
    """Where the price of `model` comes from, in words: the configuration's `[prices]` key, or
    gpuaudit's default list price (see this module's docstring) of that key."""
    key = price_key(model, prices)
    if key in DEFAULT_PRICES and prices[key] == DEFAULT_PRICES[key]:
        return f"default list price of {key} (AWS EC2 on-demand, us-east-1, 2025)"
    if key == "default" and key not in prices:
        return "fallback price for a model no [prices] key matches"
    return f"[prices] {key} in the configuration"
