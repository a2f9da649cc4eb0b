"""Every package gpuaudit imports is declared in pyproject.toml, with an upper bound, so an
install pulls in what the code needs and a new major of a dependency cannot break it unseen."""

from __future__ import annotations

import ast
import re
import sys
from importlib.metadata import packages_distributions
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent


def _name(requirement: str) -> str:
    """The normalised distribution name of a requirement (PEP 503)."""
    head = re.match(r"[A-Za-z0-9._-]+", requirement)
    assert head, requirement
    return re.sub(r"[-_.]+", "-", head.group()).lower()


def _declared() -> dict[str, str]:
    doc = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return {_name(r): r for r in doc["project"]["dependencies"]}


def _imported() -> set[str]:
    """Top-level modules outside the standard library that the package imports anywhere,
    function bodies included."""
    found: set[str] = set()
    for path in (ROOT / "gpuaudit").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    return {m for m in found if m not in sys.stdlib_module_names and m != "gpuaudit"}


def test_every_imported_package_is_declared() -> None:
    dists = packages_distributions()
    declared = _declared()
    missing = {
        m: dists.get(m)
        for m in _imported()
        if not any(_name(d) in declared for d in dists.get(m, [m]))
    }
    assert not missing, f"imported but not in [project] dependencies: {missing}"


def test_every_dependency_has_an_upper_bound() -> None:
    unbounded = [r for r in _declared().values() if "<" not in r.split(";")[0]]
    assert not unbounded
