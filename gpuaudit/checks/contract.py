"""What a check module is, checked when it is loaded.

A check is one module `gpuaudit/checks/gpuNNN_<name>.py` that defines:

- a module docstring whose first line is `GPUNNN <name>: <what it flags>.` and which has the
  sections *What it finds*, *Why it matters*, *How it decides* and *What to do*;
- `CODE = "GPUNNN"`, matching the file name;
- `TITLE`, a short title;
- `REQUIRES`, a tuple of `gpuaudit.inventory.Capability` members: the data it needs (the audit
  skips it, with the reason, when one is missing);
- `Thresholds`, a `@dataclass(frozen=True)` whose fields are its settings: each a `float` whose
  default declares its kind (`idle_activity: float = fraction(0.05)`, or `hours`, `minutes`,
  `days`, `count`, `switch`; see `SettingKind`) and a docstring (`--set NAME=VALUE`, `[checks]` in
  `gpuaudit.toml`; a name several checks declare is one setting, with one default and one
  kind). The kind says which values the setting takes, so `gpuaudit.app.config` validates every
  setting of every check the same way;
- optionally `VIEWS`, a tuple of the row-long shared views it reads, itself or through the
  helpers it calls (names of `Views.ROW_LONG`): the audit lets go of such a view once no check
  still to run may read it. A check without `VIEWS` may read every one. A view read after it
  was let go is made anew, the same, so a wrong list costs time, never a figure;
- `run(views: Views, cfg: Thresholds) -> list[Finding]`, a pure function of the shared views
  (`views.inv` is the inventory, `views.price(model)` the price of a GPU-hour) and its
  thresholds: no files, no network, no clock, no other check (shared helpers live in
  `gpuaudit.checks.base` and the inventory's views).
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from gpuaudit.checks.findings import Finding
from gpuaudit.inventory import Capability, Views

SECTIONS = ("What it finds", "Why it matters", "How it decides", "What to do")
"""The sections of a check's docstring, in this order."""
MODULE_NAME = re.compile(r"gpu(\d{3})_[a-z0-9_]+")
"""The name of a check module: its code in lower case, an underscore and a name."""

CheckFn = Callable[[Views, Any], Sequence[Finding]]


class CheckContractError(Exception):
    """A check module that does not keep the contract (see this module's docstring)."""


@dataclass(frozen=True)
class SettingKind:
    """What a check setting measures, and so which values it takes: a finite number in its
    range, a whole one where `whole`."""

    name: str
    """`fraction`, `hours`, `minutes`, `days`, `count`, `rate`, `gpus` or `switch`."""
    what: str
    """The values it takes, as a phrase: `a fraction between 0 and 1`."""
    low: float
    """The lowest value, allowed when `low_allowed`."""
    low_allowed: bool
    high: float = math.inf
    """The highest value allowed."""
    whole: bool = False
    """Whole numbers only."""

    def problem(self, value: float) -> str | None:
        """Why `value` cannot be a setting of this kind, as a clause (`is a fraction between 0
        and 1, got 5 (did you mean 0.05?)`); None when it can."""
        ok = (
            math.isfinite(value)
            and (value > self.low or (self.low_allowed and value == self.low))
            and value <= self.high
            and (not self.whole or value == int(value))
        )
        if ok:
            return None
        hint = ""
        if self.name == FRACTION.name and math.isfinite(value) and 1 < value <= 100:
            hint = f" (did you mean {value / 100:g}?)"
        return f"is {self.what}, got {value:g}{hint}"


FRACTION = SettingKind("fraction", "a fraction between 0 and 1", 0.0, True, 1.0)
HOURS = SettingKind("hours", "a positive number of hours", 0.0, False)
MINUTES = SettingKind("minutes", "a positive number of minutes", 0.0, False)
DAYS = SettingKind("days", "a positive number of days", 0.0, False)
COUNT = SettingKind("count", "a whole number of at least 1", 1.0, True, whole=True)
RATE = SettingKind("rate", "a rate in GB/s of at least 0", 0.0, True)
GPUS = SettingKind("gpus", "a number of GPUs of at least 0", 0.0, True)
SWITCH = SettingKind("switch", "0 for off or 1 for on", 0.0, True, 1.0, whole=True)
KINDS = (FRACTION, HOURS, MINUTES, DAYS, COUNT, RATE, GPUS, SWITCH)
"""Every kind a check setting can declare."""
_KIND = "gpuaudit.kind"
"""The key of a `Thresholds` field's metadata that holds its kind."""


def _declared(default: float, kind: SettingKind) -> float:
    value: float = dataclasses.field(default=default, metadata={_KIND: kind})
    return value


def fraction(default: float) -> float:
    """A `Thresholds` field holding a fraction between 0 and 1 (a ratio such as activity)."""
    return _declared(default, FRACTION)


def hours(default: float) -> float:
    """A `Thresholds` field holding a positive number of hours."""
    return _declared(default, HOURS)


def minutes(default: float) -> float:
    """A `Thresholds` field holding a positive number of minutes."""
    return _declared(default, MINUTES)


def days(default: float) -> float:
    """A `Thresholds` field holding a positive number of days."""
    return _declared(default, DAYS)


def count(default: float) -> float:
    """A `Thresholds` field holding a whole number of at least 1 (restarts, members)."""
    return _declared(default, COUNT)


def rate(default: float) -> float:
    """A `Thresholds` field holding a data rate in GB/s, at least 0 (link traffic)."""
    return _declared(default, RATE)


def gpus(default: float) -> float:
    """A `Thresholds` field holding a number of GPUs (a MIG slice a fraction of one), at least 0."""
    return _declared(default, GPUS)


def switch(default: float) -> float:
    """A `Thresholds` field that turns a behaviour off (0) or on (1)."""
    return _declared(default, SWITCH)


@dataclass(frozen=True)
class Setting:
    """One threshold of a check: a field of its `Thresholds`."""

    name: str
    default: float
    doc: str
    """The field's docstring, whitespace collapsed to single spaces."""
    kind: SettingKind
    """Which values it takes."""


@dataclass(frozen=True)
class Check:
    """A loaded check: its stable code, title, the data it needs, its settings and its rule."""

    code: str
    title: str
    requires: tuple[Capability, ...]
    thresholds: type[Any]
    """The module's `Thresholds` dataclass."""
    settings: tuple[Setting, ...]
    """Its fields, in declaration order."""
    run: CheckFn
    module: ModuleType
    views: frozenset[str] | None = None
    """The row-long shared views it reads (`VIEWS`); None: any."""

    @property
    def doc(self) -> str:
        """The module docstring: the check's documentation."""
        return (self.module.__doc__ or "").strip()

    @property
    def headline(self) -> tuple[str, str]:
        """(name, what it flags) from the docstring's first paragraph, `GPUNNN name: what.`"""
        first = " ".join(self.doc.split("\n\n", 1)[0].split())
        name, _, what = first[len(self.code) + 1 :].partition(": ")
        return name, what.rstrip(".")

    def configure(self, values: Mapping[str, float]) -> Any:
        """Its `Thresholds`, with the values of `values` that name its settings (the rest
        keep their defaults)."""
        given = {s.name: values[s.name] for s in self.settings if s.name in values}
        return self.thresholds(**given)

    def explain(self) -> str:
        """The docstring, then its settings with their defaults and documentation."""
        lines = [self.doc, ""]
        if not self.settings:
            lines.append("Settings: none.")
        else:
            lines.append("Settings (--set NAME=VALUE, or [checks] in gpuaudit.toml)")
            for s in self.settings:
                lines.append(f"    {s.name} = {s.default!r} ({s.kind.what})")
                lines.append(f"        {s.doc}")
        return "\n".join(lines)


def load(module: ModuleType) -> Check:
    """The `Check` a module defines; `CheckContractError` naming the module and what is wrong
    when it does not keep the contract."""
    where = module.__name__
    stem = where.rsplit(".", 1)[-1]
    m = MODULE_NAME.fullmatch(stem)
    if m is None:
        raise CheckContractError(f"{where}: a check module is named gpuNNN_<name>")
    code = getattr(module, "CODE", None)
    if code != f"GPU{m.group(1)}":
        raise CheckContractError(f"{where}: CODE is {code!r}; the file name says GPU{m.group(1)}")
    title = getattr(module, "TITLE", None)
    if not isinstance(title, str) or not title.strip():
        raise CheckContractError(f"{where}: TITLE must be a non-empty string")
    _check_doc(where, code, module.__doc__ or "")
    requires = getattr(module, "REQUIRES", None)
    if not isinstance(requires, tuple) or not all(isinstance(r, Capability) for r in requires):
        raise CheckContractError(
            f"{where}: REQUIRES must be a tuple of gpuaudit.inventory.Capability members, "
            f"got {requires!r}"
        )
    run = getattr(module, "run", None)
    if not callable(run) or len(inspect.signature(run).parameters) != 2:
        raise CheckContractError(f"{where}: run(views, cfg) is missing")
    thresholds = _check_thresholds(where, getattr(module, "Thresholds", None))
    views = getattr(module, "VIEWS", None)
    if views is not None and (
        not isinstance(views, tuple) or not set(views) <= set(Views.ROW_LONG)
    ):
        raise CheckContractError(
            f"{where}: VIEWS must be a tuple of names in {Views.ROW_LONG}, got {views!r}"
        )
    return Check(
        code=code,
        title=title,
        requires=requires,
        thresholds=thresholds,
        settings=_settings(where, module, thresholds),
        run=run,
        module=module,
        views=None if views is None else frozenset(views),
    )


def _check_doc(where: str, code: str, doc: str) -> None:
    text = doc.strip()
    first = text.split("\n", 1)[0]
    if not re.fullmatch(rf"{code} [^:]+: .+", first):
        raise CheckContractError(
            f"{where}: the docstring's first line must read '{code} <name>: <what it flags>'"
        )
    at = [re.search(rf"^{re.escape(s)}$", text, re.MULTILINE) for s in SECTIONS]
    lacking = [s for s, found in zip(SECTIONS, at, strict=True) if found is None]
    if lacking:
        raise CheckContractError(f"{where}: the docstring lacks the section(s) {lacking}")
    starts = [found.start() for found in at if found is not None]
    if starts != sorted(starts):
        raise CheckContractError(
            f"{where}: the docstring's sections must come in the order {SECTIONS}"
        )


def _check_thresholds(where: str, thresholds: object) -> type[Any]:
    if not isinstance(thresholds, type) or not dataclasses.is_dataclass(thresholds):
        raise CheckContractError(f"{where}: Thresholds must be a @dataclass(frozen=True) class")
    if not thresholds.__dataclass_params__.frozen:  # type: ignore[attr-defined]
        raise CheckContractError(f"{where}: Thresholds must be frozen")
    for f in dataclasses.fields(thresholds):
        if f.type not in (float, "float"):
            raise CheckContractError(f"{where}: Thresholds.{f.name} must be a float")
        if isinstance(f.default, bool) or not isinstance(f.default, float):
            raise CheckContractError(f"{where}: Thresholds.{f.name} needs a float default")
        kind = f.metadata.get(_KIND)
        if not isinstance(kind, SettingKind):
            raise CheckContractError(
                f"{where}: Thresholds.{f.name} must declare its kind: write "
                f"`{f.name}: float = hours({f.default!r})` (or "
                f"{', '.join(k.name for k in KINDS)} from gpuaudit.checks.contract)"
            )
        problem = kind.problem(f.default)
        if problem:
            raise CheckContractError(f"{where}: the default of Thresholds.{f.name} {problem}")
    return thresholds


def _settings(where: str, module: ModuleType, thresholds: type[Any]) -> tuple[Setting, ...]:
    docs = _field_docs(module)
    out = []
    for f in dataclasses.fields(thresholds):
        doc = docs.get(f.name, "")
        if not doc:
            raise CheckContractError(f"{where}: Thresholds.{f.name} needs a docstring")
        default, kind = f.default, f.metadata[_KIND]
        assert isinstance(default, float)  # `_check_thresholds` made sure
        out.append(Setting(f.name, default, doc, kind))
    return tuple(out)


def _thresholds_tree(source: str) -> ast.Module:
    """The syntax tree of `class Thresholds` alone where it can be cut out of the module's
    source (from its line to the next line at the margin), else of the whole module: every
    program start loads every check, and parsing whole modules cost a tenth of a second."""
    lines = source.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.startswith("class Thresholds")), None)
    if start is not None:
        end = start + 1
        while end < len(lines) and (not lines[end].strip() or lines[end][:1] in " \t#"):
            end += 1
        try:
            return ast.parse("".join(lines[start:end]))
        except SyntaxError:
            pass  # a string or bracket that reaches the margin: read the whole module
    return ast.parse(source)


def _field_docs(module: ModuleType) -> dict[str, str]:
    """Field name -> the string literal that follows its declaration in `class Thresholds`
    (attribute docstrings are not kept at run time, so the source is read)."""
    try:
        source = inspect.getsource(module)
    except (OSError, TypeError):
        return {}
    tree = _thresholds_tree(source)
    cls = next(
        (n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Thresholds"), None
    )
    if cls is None:
        return {}
    docs: dict[str, str] = {}
    for stmt, after in zip(cls.body, cls.body[1:], strict=False):
        if (
            isinstance(stmt, ast.AnnAssign)
            and isinstance(stmt.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            docs[stmt.target.id] = " ".join(after.value.value.split())
    return docs
