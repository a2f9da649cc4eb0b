"""Settings: flag > environment > `gpuaudit.toml` > default, resolved once into a frozen object."""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gpuaudit.errors import ConfigError
from gpuaudit.pricing import DEFAULT_PRICES

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib  # type: ignore[import-not-found,unused-ignore]

_DURATION_RE = re.compile(r"^(\d+(?:\.\d+)?)([smhdw])$")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str) -> int:
    """`7d`, `12h`, `30m`, `90s` or plain seconds -> seconds."""
    t = text.strip()
    if t.isdigit():
        return int(t)
    m = _DURATION_RE.match(t)
    if not m:
        raise ConfigError(f"invalid duration {text!r}; use e.g. 7d, 12h, 30m or seconds")
    seconds = int(float(m.group(1)) * _UNIT[m.group(2)])
    if seconds <= 0:
        raise ConfigError(f"duration {text!r} must be positive")
    return seconds


@dataclass(frozen=True)
class CheckSettings:
    """Thresholds of every check; defaults are stated in each check's docstring."""

    idle_min_hours: float = 4.0
    """GPU001: shortest holding (hours) that can be an idle reservation."""
    idle_activity: float = 0.05
    """GPU001, GPU002, GPU003: mean engine activity (ratio) below which an hour is idle."""
    idle_tail_hours: float = 6.0
    """GPU002: idle hours at the end of a holding that make an idle tail."""
    active_activity: float = 0.20
    """GPU002, GPU003: mean engine activity (ratio) from which an hour counts as active."""
    part_time_min_days: float = 3.0
    """GPU003: days a holder must have held its GPUs to show a daily pattern."""
    part_time_max_hours: float = 8.0
    """GPU003: longest daily active window (hours) that still counts as part-time."""
    part_time_recurrence: float = 0.8
    """GPU003: share of days on which the active window must recur."""
    fb_pressure_critical: float = 0.95
    """GPU020: p95 of used/(used+free) framebuffer from which a holding is under pressure."""
    fb_pressure_warning: float = 0.90
    """GPU020: p95 of used/(used+free) framebuffer from which pressure is a warning."""
    fb_headroom: float = 0.20
    """GPU020, GPU021: memory headroom over peak use a recommended profile must leave."""
    crashloop_restarts: float = 3.0
    """GPU020: container restarts with a GPU out-of-memory message that make a crash loop."""
    oversized_min_hours: float = 24.0
    """GPU021: shortest holding (hours) worth resizing."""
    busy_util: float = 0.80
    """GPU040: GPU_UTIL (ratio) from which a card looks busy."""
    busy_low_activity: float = 0.20
    """GPU040: SM (else engine) activity below which a busy-looking card does no work."""
    busy_min_hours: float = 3.0
    """GPU040: hours a card must look busy while doing no work."""
    unmonitored_min_hours: float = 1.0
    """GPU080: shortest GPU holding without DCGM data worth reporting."""
    gang_partial_min_minutes: float = 30.0
    """GPU010: minutes a gang must have run short of members before it is reported."""
    gang_start_spread_minutes: float = 30.0
    """GPU010: minutes between the first and the last start of a complete gang's members from
    which the early members' wait is reported."""
    placement_slowdown: float = 0.10
    """GPU030, GPU031: share of a badly placed job's GPU-hours counted as lost to slower
    GPU-to-GPU links (an estimate; 0 ranks these findings by severity alone)."""
    pending_min_minutes: float = 30.0
    """GPU050, GPU051: minutes a pod must have been unschedulable for lack of GPUs."""
    warm_idle_hours: float = 24.0
    """GPU060: contiguous hours a GPU node must have had no GPU pod at work."""


def known_check_settings() -> dict[str, str]:
    """Every check threshold `--set` and `[checks]` accept, by name, with its documentation."""
    return dict.fromkeys(CheckSettings.__dataclass_fields__, "")


@dataclass(frozen=True)
class Settings:
    """Everything a run needs, resolved once and passed explicitly."""

    window_s: int = 7 * 86400
    step_s: int = 3600
    end: float | None = None
    prices: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_PRICES))
    checks: CheckSettings = field(default_factory=CheckSettings)
    currency: str = "USD"
    topology_dir: Path | None = None
    """A directory of `nvidia-smi topo -m` outputs, one per node (`<node>.txt`) or per GPU
    product (`<nvidia.com/gpu.product>.txt`), for GPU030 (`--topology`)."""


def load_config(path: Path | None) -> dict[str, Any]:
    """Read `gpuaudit.toml`; an explicit path that does not exist is an error."""
    if path is None:
        default = Path("gpuaudit.toml")
        if not default.is_file():
            return {}
        path = default
    try:
        with open(path, "rb") as fh:
            doc: dict[str, Any] = tomllib.load(fh)
            return doc
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None


def _num(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{what} must be a number, got {value!r}")
    return float(value)


def settings_from(config: Mapping[str, Any], **overrides: Any) -> Settings:
    """Build settings from a parsed config file, then apply non-None overrides (flags/env)."""
    s = Settings()
    prices = dict(DEFAULT_PRICES)
    raw_prices = config.get("prices", {})
    if not isinstance(raw_prices, dict):
        raise ConfigError("[prices] must be a table of model = price per GPU-hour")
    for key, value in raw_prices.items():
        prices[str(key)] = _num(value, f"prices.{key}")
    checks = CheckSettings()
    raw_checks = config.get("checks", {})
    if not isinstance(raw_checks, dict):
        raise ConfigError("[checks] must be a table")
    known = set(CheckSettings.__dataclass_fields__)
    for key, value in raw_checks.items():
        if key not in known:
            raise ConfigError(f"unknown setting checks.{key}; known: {', '.join(sorted(known))}")
        checks = replace(checks, **{key: _num(value, f"checks.{key}")})
    scan = config.get("scan", {})
    if not isinstance(scan, dict):
        raise ConfigError("[scan] must be a table")
    window_s = parse_duration(str(scan["window"])) if "window" in scan else s.window_s
    step_s = parse_duration(str(scan["step"])) if "step" in scan else s.step_s
    s = replace(
        s,
        window_s=window_s,
        step_s=step_s,
        prices=prices,
        checks=checks,
        currency=str(config.get("currency", s.currency)),
    )
    clean = {k: v for k, v in overrides.items() if v is not None}
    check_over = {k: v for k, v in clean.items() if k in known}
    top = {k: v for k, v in clean.items() if k not in known}
    if check_over:
        s = replace(s, checks=replace(s.checks, **check_over))
    return replace(s, **top)
