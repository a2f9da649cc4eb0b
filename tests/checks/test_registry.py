"""The check contract: discovery, what each module declares, and the docs made from them."""

from __future__ import annotations

import ast
import inspect
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from gpuaudit import checks
from gpuaudit.audit.settings import known_check_settings
from gpuaudit.checks import RETIRED, CheckContractError, contract, discover
from gpuaudit.inventory import Capability
from tests.support.paths import ROOT


def test_code_file_and_module_agree() -> None:
    found = discover()
    codes = [c.code for c in found]
    assert codes == sorted(set(codes))
    assert not set(codes) & set(RETIRED)
    for c in found:
        assert re.fullmatch(r"GPU\d{3}", c.code)
        stem = Path(c.module.__file__ or "").stem
        assert stem.startswith(c.code.lower() + "_"), (c.code, stem)
        assert c.doc.startswith(c.code), c.code
        for s in contract.SECTIONS:
            assert s in c.doc, (c.code, s)
        assert all(isinstance(r, Capability) for r in c.requires)


def test_every_check_module_is_discovered() -> None:
    folder = Path(checks.__file__).parent
    files = {p.stem.split("_")[0].upper() for p in folder.glob("gpu[0-9][0-9][0-9]_*.py")}
    assert files == {c.code for c in discover()}


def test_the_docstring_names_exactly_the_checks_settings() -> None:
    """`How it decides` states the thresholds: every `checks.NAME` it mentions is a setting
    of that check, and every setting is mentioned."""
    for c in discover():
        mentioned = set(re.findall(r"`checks\.([a-z_]+)`", c.doc))
        assert mentioned == {s.name for s in c.settings}, c.code


def test_known_settings_are_the_union_of_the_checks_thresholds() -> None:
    known = known_check_settings()
    assert list(known) == sorted(known)
    assert set(known) == {s.name for c in discover() for s in c.settings}
    line = known["idle_activity"]
    assert "GPU001, GPU002, GPU003, GPU060" in line and "0.05" in line and "\n" not in line


def test_readme_table_is_generated_from_the_modules() -> None:
    text = (ROOT / "README.md").read_text()
    table = checks.markdown_table()
    assert table in text, "README.md's table of checks is out of date; paste:\n" + table


def test_explain_lists_settings_from_thresholds() -> None:
    check = checks.by_code("gpu001")
    assert check is not None
    text = check.explain()
    assert text.startswith(check.doc)
    assert "    idle_min_hours = 4.0 (a positive number of hours)\n        Shortest holding" in text


GOOD = '''"""GPU998 example: a test check.

What it finds
    x
Why it matters
    x
How it decides
    x
What to do
    x
"""
from dataclasses import dataclass
from gpuaudit.checks.contract import count, hours
from gpuaudit.inventory import Capability

CODE = "GPU998"
TITLE = "Example"
REQUIRES = (Capability.ACTIVITY,)


@dataclass(frozen=True)
class Thresholds:
    level: float = count(1.0)
    """A level."""


def run(views, cfg):
    return []
'''


@pytest.mark.parametrize(
    ("change", "complaint"),
    [
        (('CODE = "GPU998"', 'CODE = "GPU997"'), "file name says GPU998"),
        (("(Capability.ACTIVITY,)", '("activity",)'), "Capability members"),
        (("Capability.ACTIVITY,", "Capability.ACTIVTY,"), "ACTIVTY"),
        (("@dataclass(frozen=True)", "@dataclass"), "must be frozen"),
        (("level: float = count(1.0)", "level: int = 1"), "must be a float"),
        (("level: float = count(1.0)", "level: float = 1.0"), "must declare its kind"),
        (("level: float = count(1.0)", "level: float = count(0.5)"), "whole number"),
        (("level: float = count(1.0)", "idle_activity: float = hours(0.05)"), "one kind"),
        (('    """A level."""\n', ""), "needs a docstring"),
        (("What to do\n", "What next\n"), "lacks the section"),
        (("GPU998 example: a test check.", "An example."), "first line"),
        (('CODE = "GPU998"', 'CODE = "GPU001"'), "GPU001"),
        (("level: float = count(1.0)", "idle_activity: float = count(5.0)"), "one default"),
        (("REQUIRES = (Capability.ACTIVITY,)\n", 'REQUIRES = ()\nVIEWS = ("rows",)\n'), "VIEWS"),
        (("REQUIRES = (Capability.ACTIVITY,)\n", 'REQUIRES = ()\nVIEWS = "per_pod"\n'), "VIEWS"),
    ],
)
def test_a_module_that_breaks_the_contract_is_refused_when_discovered(
    add_check: Callable[[str, str], Path], change: tuple[str, str], complaint: str
) -> None:
    name = "gpu001_example" if change[1] == 'CODE = "GPU001"' else "gpu998_example"
    add_check(name, GOOD.replace(*change))
    with pytest.raises((CheckContractError, AttributeError), match=complaint):
        discover()


def test_a_module_that_keeps_the_contract_is_discovered(
    add_check: Callable[[str, str], Path],
) -> None:
    add_check("gpu998_example", GOOD)
    (c,) = [c for c in discover() if c.code == "GPU998"]
    assert c.settings == (contract.Setting("level", 1.0, "A level.", contract.COUNT),)
    assert c.configure({"level": 2.0, "idle_activity": 0.1}) == c.thresholds(level=2.0)


FORBIDDEN = (
    "os",
    "pathlib",
    "io",
    "socket",
    "subprocess",
    "shutil",
    "tempfile",
    "glob",
    "time",
    "urllib",
    "httpx",
    "requests",
    "gpuaudit.sources",
    "gpuaudit.snapshot",
    "gpuaudit.audit.settings",
    "gpuaudit.app.config",
    "gpuaudit.app.pipeline",
    "gpuaudit.cli",
    "gpuaudit.console",
    "gpuaudit.report",
)
"""Modules a check must not import: files, network, clock, or the layers after the checks."""


def _imports(tree: ast.AST) -> list[str]:
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
            names.extend(f"{node.module}.{a.name}" for a in node.names)
    return names


def test_checks_are_pure_functions_of_views_and_thresholds() -> None:
    """No check imports another check, reads files, talks to the network or reads the clock."""
    for c in discover():
        tree = ast.parse(inspect.getsource(c.module))
        for name in _imports(tree):
            assert not re.match(r"gpuaudit\.checks\.gpu\d{3}", name), (c.code, name)
            assert not any(name == f or name.startswith(f + ".") for f in FORBIDDEN), (
                c.code,
                name,
            )
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                f = node.func
                called = f.id if isinstance(f, ast.Name) else getattr(f, "attr", "")
                assert called not in ("open", "now", "today", "utcnow"), (c.code, called)
