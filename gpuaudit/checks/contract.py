"""What a check module is, checked when it is loaded.

A check is one module `gpuaudit/checks/gpuNNN_<name>.py` that defines:

- a module docstring whose first line is `GPUNNN <name>: <what it flags>.` and which has the
  sections *What it finds*, *Why it matters*, *How it decides* and *What to do*;
- `CODE = "GPUNNN"`, matching the file name;
- `TITLE`, a short title;
- `REQUIRES`, a tuple of `gpuaudit.inventory.Capability` members: the data it needs (the audit
  skips it, with the reason, when one is missing);
- `Thresholds`, a `@dataclass(frozen=True)` whose fields are its settings: each a `float` with
  a default and a docstring (`--set NAME=VALUE`, `[checks]` in `gpuaudit.toml`; a name several
  checks declare is one setting, with one default);
- `run(views: Views, cfg: Thresholds) -> list[Finding]`, a pure function of the shared views
  (`views.inv` is the inventory, `views.price(model)` the price of a GPU-hour) and its
  thresholds: no files, no network, no clock, no other check (shared helpers live in
  `gpuaudit.checks.base` and the inventory's views).
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from gpuaudit.findings import Finding
from gpuaudit.inventory import Capability, Views

SECTIONS = ("What it finds", "Why it matters", "How it decides", "What to do")
"""The sections of a check's docstring, in this order."""
MODULE_NAME = re.compile(r"gpu(\d{3})_[a-z0-9_]+")
"""The name of a check module: its code in lower case, an underscore and a name."""

CheckFn = Callable[[Views, Any], Sequence[Finding]]


class CheckContractError(Exception):
    """A check module that does not keep the contract (see this module's docstring)."""


@dataclass(frozen=True)
class Setting:
    """One threshold of a check: a field of its `Thresholds`."""

    name: str
    default: float
    doc: str
    """The field's docstring, whitespace collapsed to single spaces."""


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
                lines.append(f"    {s.name} = {s.default!r}")
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
    return Check(
        code=code,
        title=title,
        requires=requires,
        thresholds=thresholds,
        settings=_settings(where, module, thresholds),
        run=run,
        module=module,
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
    return thresholds


def _settings(where: str, module: ModuleType, thresholds: type[Any]) -> tuple[Setting, ...]:
    docs = _field_docs(module)
    out = []
    for f in dataclasses.fields(thresholds):
        doc = docs.get(f.name, "")
        if not doc:
            raise CheckContractError(f"{where}: Thresholds.{f.name} needs a docstring")
        default = f.default
        assert isinstance(default, float)  # `_check_thresholds` made sure
        out.append(Setting(f.name, default, doc))
    return tuple(out)


def _field_docs(module: ModuleType) -> dict[str, str]:
    """Field name -> the string literal that follows its declaration in `class Thresholds`
    (attribute docstrings are not kept at run time, so the source is read)."""
    try:
        tree = ast.parse(inspect.getsource(module))
    except (OSError, TypeError):
        return {}
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
