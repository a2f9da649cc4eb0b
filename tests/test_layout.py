"""The package's layout is its architecture: every folder is a stage or a role, each imports only
the folders before it in `STAGES` (function-local imports included), no module name is used
twice, and the root holds only the package's face and entry point."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "gpuaudit"

STAGES = (
    "core",  # errors, bounds, readers of outside numbers, redaction, progress events
    "domain",  # domain tables: topology, XID, MIG, power, prices
    "sources",  # live APIs, raw answers
    "snapshot",  # the recorded raw answers of one collection
    "scenario",  # generated clusters, written as snapshots
    "inventory",  # joined tables
    "checks",  # one module per check, and the findings they return
    "fix",  # the change that answers each finding, validated (the audit result carries them)
    "audit",  # checks run, findings ranked, the result assembled
    "report",  # renderers of an audit result
    "app",  # the option resolver and the pipeline
    "console",  # how the commands look on a terminal
    "cli",  # the commands and the console script
)
ROOT_MODULES = {"__init__.py", "__main__.py"}


def _imported_folders(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "gpuaudit":
                names = [f"gpuaudit.{alias.name}" for alias in node.names]
            else:
                names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        found.update(n.split(".")[1] for n in names if n.startswith("gpuaudit."))
    return found - {"__version__"}


def test_every_folder_is_a_stage_and_the_root_holds_only_the_face() -> None:
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert folders == set(STAGES)
    loose = {p.name for p in PACKAGE.glob("*.py")}
    assert loose == ROOT_MODULES


def test_each_stage_imports_only_the_stages_before_it() -> None:
    wrong = []
    for i, stage in enumerate(STAGES):
        allowed = set(STAGES[: i + 1])
        for path in sorted((PACKAGE / stage).rglob("*.py")):
            bad = sorted(_imported_folders(path) - allowed)
            wrong.extend(f"{path.relative_to(PACKAGE)} imports gpuaudit.{f}" for f in bad)
    assert wrong == []


def test_no_module_name_is_used_twice() -> None:
    where: dict[str, list[str]] = defaultdict(list)
    for path in PACKAGE.rglob("*.py"):
        if path.name not in ROOT_MODULES:
            where[path.stem].append(str(path.relative_to(PACKAGE)))
    assert {name: paths for name, paths in where.items() if len(paths) > 1} == {}
