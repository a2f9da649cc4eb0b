"""The settings an audit runs with (`Settings`): window, prices, currency, check thresholds and
the topology folder, frozen and passed explicitly.

`gpuaudit.app.config` resolves them once, with every option, from flags, environment,
`gpuaudit.toml` and defaults. The file's tables that are no option's, `[prices]`, `[checks]` and
`currency`, are read and checked here (`settings_from`), in the one place that reads them.
"""

from __future__ import annotations

import difflib
import math
import unicodedata
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from gpuaudit import checks as check_registry
from gpuaudit.core.errors import ConfigError
from gpuaudit.domain.pricing import DEFAULT_PRICES
from gpuaudit.inventory.ownership import DEFAULT_KEYS as DEFAULT_OWNER_KEYS

DEFAULT_WINDOW_S = 7 * 86400
"""The window of a live scan when `--window` is not given: a week."""
DEFAULT_STEP_S = 3600
"""The bucket of the hourly series when `--step` is not given: an hour."""


def known_check_settings() -> dict[str, str]:
    """Every check setting, by name, in name order -> one line: what it is, its default and
    the checks that read it. The names are the fields of the checks' `Thresholds`; a name
    several checks declare is one setting."""
    return {name: s.line() for name, s in check_registry.settings().items()}


def unknown_setting(name: str, known: Iterable[str], table: str = "") -> str:
    """Why `name` is refused, as a clause: the known names closest to it (`did you mean
    idle_activity?`), else every known name. `table` prefixes the name as it is shown
    (`checks.`)."""
    names = sorted(known)
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
    if close:  # only those about as close as the closest
        best = _likeness(name, close[0])
        close = [c for c in close if _likeness(name, c) >= best - 0.1]
    shown = table + terminal_safe(name)
    if close:
        return f"unknown setting {shown}; did you mean {' or '.join(close)}?"
    return f"unknown setting {shown}; known: {', '.join(names)}"


def _likeness(a: str, b: str) -> float:
    return difflib.SequenceMatcher(None, a, b).ratio()


def terminal_safe(text: str, most: int = 60) -> str:
    """A name from a file or the command line, as a message shows it: quoted when it holds
    anything but letters, digits, `_`, `-` and `.`, and cut short."""
    if text and len(text) <= most and all(c.isalnum() or c in "_-." for c in text):
        return text
    return repr(text[:most])


def _unknown(what: str, known: Iterable[str]) -> ConfigError:
    return ConfigError(unknown_setting(what, known, "checks."))


class CheckSettings(Mapping[str, float]):
    """The thresholds of every check: each known setting (see `known_check_settings`) -> its
    value, the default its checks declare unless set. Immutable; names are checked when it is
    made (`ConfigError` for one no check declares)."""

    __slots__ = ("_set",)

    def __init__(self, **values: float) -> None:
        known = check_registry.settings()
        for name in values:
            if name not in known:
                raise _unknown(name, known)
        self._set: Mapping[str, float] = MappingProxyType(dict(values))

    def __getitem__(self, name: str) -> float:
        if name in self._set:
            return self._set[name]
        return check_registry.settings()[name].default

    def __iter__(self) -> Iterator[str]:
        return iter(check_registry.settings())

    def __len__(self) -> int:
        return len(check_registry.settings())

    def replace(self, **values: float) -> CheckSettings:
        """A copy with these settings given these values."""
        return CheckSettings(**{**self._set, **values})

    def __repr__(self) -> str:
        return f"CheckSettings({', '.join(f'{k}={v!r}' for k, v in self._set.items())})"


@dataclass(frozen=True)
class Settings:
    """Everything an audit needs besides its data, resolved once and passed explicitly."""

    window_s: int = DEFAULT_WINDOW_S
    step_s: int = DEFAULT_STEP_S
    end: float | None = None
    prices: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_PRICES))
    checks: CheckSettings = field(default_factory=CheckSettings)
    """The checks' thresholds (`--set NAME=VALUE`, `[checks]` in `gpuaudit.toml`)."""
    currency: str = "USD"
    topology_dir: Path | None = None
    """A directory of `nvidia-smi topo -m` outputs, one per node (`<node>.txt`) or per GPU
    product (`<nvidia.com/gpu.product>.txt`), read by `gpuaudit.inventory.build` for the
    placement checks (`--topology`)."""
    timezone: str = "UTC"
    """The cluster's time zone, an IANA name (`--timezone`): `gpuaudit fix` writes a schedule
    in it (gpuaudit cannot read a cluster's time zone)."""
    owner_keys: tuple[str, ...] = DEFAULT_OWNER_KEYS
    """The label and annotation keys a finding's owner is read from, first wins
    (`--owner-keys`, see `gpuaudit.inventory.ownership`)."""


def settings_from(config: Mapping[str, Any], **checks: float) -> Settings:
    """Settings from a parsed `gpuaudit.toml`: its `[prices]`, `[checks]` and `currency`, each
    value checked (`ConfigError` naming the key), then the thresholds `checks` on top (values
    already checked, such as `--set`'s: a threshold set there replaces the file's, which then
    goes unchecked). Window, step, end and topology folder keep their defaults: the resolver
    (`gpuaudit.app.config`) sets them from the options."""
    prices = dict(DEFAULT_PRICES)
    raw_prices = config.get("prices", {})
    if not isinstance(raw_prices, dict):
        raise ConfigError("[prices] must be a table of model = price per GPU-hour")
    for key, value in raw_prices.items():
        prices[str(key)] = _price(str(key), value)
    raw_checks = config.get("checks", {})
    if not isinstance(raw_checks, dict):
        raise ConfigError("[checks] must be a table")
    kinds = check_registry.settings()
    values: dict[str, float] = {}
    for key, value in raw_checks.items():
        if key not in kinds:
            raise _unknown(str(key), kinds)
        number = _num(value, f"checks.{key}")
        problem = None if key in checks else kinds[key].kind.problem(number)
        if problem:
            raise ConfigError(f"[checks] {key}: {key} {problem}")
        values[key] = number
    return Settings(
        prices=prices,
        checks=CheckSettings(**{**values, **checks}),
        currency=_currency(config.get("currency", "USD")),
    )


MAX_PRICE = 1e9
"""The highest price per GPU-hour: above any currency's (a billion rupiah), far below where
a window's cost would overflow."""

MAX_CURRENCY_CHARS = 8
"""The longest currency: a code (`USD`) or a symbol (`€`, `R$`, `zł`), never a sentence."""


def _currency(value: Any) -> str:
    """`currency`: a short code or symbol, letters and currency signs only (the reports print
    it beside every figure, so no space, markup or control character)."""
    ok = isinstance(value, str) and 0 < len(value) <= MAX_CURRENCY_CHARS
    if ok and all(c.isalpha() or unicodedata.category(c) == "Sc" for c in value):
        return str(value)
    shown = repr(value[:40]) if isinstance(value, str) else repr(value)[:40]
    raise ConfigError(
        f"currency {shown} is not a currency code or symbol: use up to "
        f"{MAX_CURRENCY_CHARS} letters or currency signs, such as USD, EUR or €"
    )


def _num(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{what} must be a number, got {repr(value)[:60]}")
    return float(value)


def _price(model: str, value: Any) -> float:
    """A `[prices]` entry: a finite number of at least 0."""
    price = _num(value, f"prices.{model}")
    if not (math.isfinite(price) and 0 <= price <= MAX_PRICE):
        raise ConfigError(
            f"[prices] {terminal_safe(model)}: a price per GPU-hour is a number from 0 to "
            f"{MAX_PRICE:,.0f}, got {price:g}"
        )
    return price
