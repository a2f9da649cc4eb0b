"""Settings: flag > environment > `gpuaudit.toml` > default, resolved once into a frozen object."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from gpuaudit import checks as check_registry
from gpuaudit.core.errors import ConfigError
from gpuaudit.domain.pricing import DEFAULT_PRICES

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib  # type: ignore[import-not-found,unused-ignore]

_DURATION_RE = re.compile(r"(\d{1,15}(?:\.\d{1,9})?)([smhdw]?)", re.ASCII)
_UNIT = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str) -> int:
    """`7d`, `12h`, `30m`, `90s` or plain seconds -> whole seconds, at least 1. At most 15
    digits, so the result is a finite number whatever the text."""
    t = text.strip()
    m = _DURATION_RE.fullmatch(t)
    if not m:
        raise ConfigError(f"invalid duration {t[:40]!r}; use e.g. 7d, 12h, 30m or seconds")
    seconds = int(float(m.group(1)) * _UNIT[m.group(2)])
    if seconds <= 0:
        raise ConfigError(f"duration {t!r} must be at least 1 second")
    return seconds


def known_check_settings() -> dict[str, str]:
    """Every check setting, by name, in name order -> one line: what it is, its default and
    the checks that read it. The names are the fields of the checks' `Thresholds`; a name
    several checks declare is one setting."""
    return {name: s.line() for name, s in check_registry.settings().items()}


def _unknown(what: str, known: Iterable[str]) -> ConfigError:
    return ConfigError(f"unknown setting {what}; known: {', '.join(sorted(known))}")


class CheckSettings(Mapping[str, float]):
    """The thresholds of every check: each known setting (see `known_check_settings`) -> its
    value, the default its checks declare unless set. Immutable; names are checked when it is
    made (`ConfigError` for one no check declares)."""

    __slots__ = ("_set",)

    def __init__(self, **values: float) -> None:
        known = check_registry.settings()
        for name in values:
            if name not in known:
                raise _unknown(f"checks.{name}", known)
        self._set: Mapping[str, float] = MappingProxyType(dict(values))

    def __getitem__(self, name: str) -> float:
        if name in self._set:
            return self._set[name]
        return check_registry.settings()[name].default

    def __iter__(self) -> Iterator[str]:
        return iter(check_registry.settings())

    def __len__(self) -> int:
        return len(check_registry.settings())

    def overrides(self) -> Mapping[str, float]:
        """Only the settings given a value."""
        return self._set

    def replace(self, **values: float) -> CheckSettings:
        """A copy with these settings given these values."""
        return CheckSettings(**{**self._set, **values})

    def __repr__(self) -> str:
        return f"CheckSettings({', '.join(f'{k}={v!r}' for k, v in self._set.items())})"


@dataclass(frozen=True)
class Settings:
    """Everything a run needs, resolved once and passed explicitly."""

    window_s: int = 7 * 86400
    step_s: int = 3600
    end: float | None = None
    prices: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_PRICES))
    checks: CheckSettings = field(default_factory=CheckSettings)
    """The checks' thresholds (`--set NAME=VALUE`, `[checks]` in `gpuaudit.toml`)."""
    currency: str = "USD"
    topology_dir: Path | None = None
    """A directory of `nvidia-smi topo -m` outputs, one per node (`<node>.txt`) or per GPU
    product (`<nvidia.com/gpu.product>.txt`), read by `gpuaudit.inventory.build` for the
    placement checks (`--topology`)."""


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
    raw_checks = config.get("checks", {})
    if not isinstance(raw_checks, dict):
        raise ConfigError("[checks] must be a table")
    known = known_check_settings()
    values: dict[str, float] = {}
    for key, value in raw_checks.items():
        if key not in known:
            raise _unknown(f"checks.{key}", known)
        values[key] = _num(value, f"checks.{key}")
    checks = CheckSettings(**values)
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
        s = replace(s, checks=s.checks.replace(**check_over))
    return replace(s, **top)
