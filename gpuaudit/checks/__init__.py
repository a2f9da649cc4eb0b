"""The checks: every `gpuNNN_<name>.py` module on this package's path, found by discovery.

Adding a check is adding one module (see `gpuaudit.checks.contract` for what it defines);
nothing lists the checks by hand. Codes are permanent: never renumbered, never reused; a
retired code stays in `RETIRED`.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import sys
from dataclasses import dataclass

from gpuaudit.checks.contract import (
    MODULE_NAME,
    Check,
    CheckContractError,
    Setting,
    SettingKind,
    load,
)

RETIRED: dict[str, str] = {}
"""Codes that were used once and must never be reused: code -> why it was retired."""

_LOADED: dict[str, Check] = {}
"""Module name -> its check, so a module is checked against the contract once."""


def discover() -> tuple[Check, ...]:
    """Every check module on `gpuaudit.checks.__path__`, loaded and checked against the
    contract, in code order. The path is scanned at every call, so a module added to it (or a
    folder added to `__path__`) is found by the next call."""
    found: list[Check] = []
    for info in pkgutil.iter_modules(__path__):
        if info.ispkg or MODULE_NAME.fullmatch(info.name) is None:
            continue
        found.append(_load(f"{__name__}.{info.name}", getattr(info.module_finder, "path", "")))
    found.sort(key=lambda c: c.code)
    codes = [c.code for c in found]
    for code in {c for c in codes if codes.count(c) > 1}:
        raise CheckContractError(f"check code {code} is used by more than one module")
    for code in set(codes) & set(RETIRED):
        raise CheckContractError(f"check code {code} is retired and must not be reused")
    _shared_settings(found)
    return tuple(found)


def _load(name: str, folder: str) -> Check:
    module = sys.modules.get(name)
    if module is not None and folder and os.path.dirname(module.__file__ or "") != folder:
        # A module of that name from another folder (a test's temporary package): load anew.
        del sys.modules[name]
        _LOADED.pop(name, None)
        module = None
    if module is None:
        module = importlib.import_module(name)
    check = _LOADED.get(name)
    if check is None or check.module is not module:
        check = _LOADED[name] = load(module)
    return check


def clear_cache() -> None:
    """Forget the checks loaded so far; the next `discover()` loads them again."""
    _LOADED.clear()


def by_code(code: str) -> Check | None:
    """The check of a code (`GPU001`, any case), or None."""
    wanted = code.strip().upper()
    return next((c for c in discover() if c.code == wanted), None)


@dataclass(frozen=True)
class SharedSetting:
    """A check setting as the user sets it: one name for every check that declares it."""

    name: str
    default: float
    doc: str
    """The docstring of the first check (in code order) that declares it."""
    codes: tuple[str, ...]
    """The checks that declare it."""
    kind: SettingKind
    """Which values it takes (every check that declares it declares the same kind)."""

    def line(self) -> str:
        """One line for help texts: what it is, its default and the checks that read it."""
        return f"{self.doc} ({self.kind.name}; default {self.default!r}; {', '.join(self.codes)})"


def settings(checks: tuple[Check, ...] | None = None) -> dict[str, SharedSetting]:
    """Every setting of `checks` (default: every check), by name, in name order."""
    by_name: dict[str, list[tuple[Check, Setting]]] = {}
    for check in discover() if checks is None else checks:
        for s in check.settings:
            by_name.setdefault(s.name, []).append((check, s))
    return {
        name: SharedSetting(
            name,
            pairs[0][1].default,
            pairs[0][1].doc,
            tuple(c.code for c, _ in pairs),
            pairs[0][1].kind,
        )
        for name, pairs in sorted(by_name.items())
    }


def _shared_settings(checks: list[Check]) -> None:
    """A name several checks declare is one setting: their defaults and kinds must agree."""
    seen: dict[str, tuple[str, Setting]] = {}
    for check in checks:
        for s in check.settings:
            code, first = seen.setdefault(s.name, (check.code, s))
            if first.default != s.default:
                raise CheckContractError(
                    f"setting {s.name} defaults to {first.default!r} in {code} but to "
                    f"{s.default!r} in {check.code}; a shared setting has one default"
                )
            if first.kind != s.kind:
                raise CheckContractError(
                    f"setting {s.name} is {first.kind.name} in {code} but {s.kind.name} in "
                    f"{check.code}; a shared setting has one kind"
                )


def markdown_table() -> str:
    """README's table of checks: code, name and what it flags, from each module's docstring."""
    rows = ["| code | check | what it means |", "|---|---|---|"]
    for c in discover():
        name, what = c.headline
        rows.append(f"| {c.code} | {name} | {what} |")
    rows.extend(f"| {code} | (retired) | {why} |" for code, why in sorted(RETIRED.items()))
    return "\n".join(rows) + "\n"


REGISTRY: tuple[Check, ...] = discover()
"""The checks in this package's own folder when it was first imported. Kept for callers that
list them once; `discover()` also sees checks added since."""

__all__ = [
    "REGISTRY",
    "RETIRED",
    "Check",
    "CheckContractError",
    "Setting",
    "SettingKind",
    "SharedSetting",
    "by_code",
    "clear_cache",
    "discover",
    "markdown_table",
    "settings",
]
