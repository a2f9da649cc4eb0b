"""Sources return raw answers and know nothing of what is built from them: they import only the
foundation modules and each other; the snapshot imports only those and itself."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "gpuaudit"
FOUNDATION = {
    "gpuaudit.__version__",
    "gpuaudit.core",  # `from gpuaudit.core import numbers`: every module of core/ is foundation
    "gpuaudit.domain.xid",  # a domain table of the foundation (the XID alert rules read it)
}


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `from gpuaudit.domain import xid` and `from gpuaudit.domain.xid import X` alike
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name.startswith("gpuaudit.")}


@pytest.mark.parametrize(
    ("folder", "allowed"),
    [("sources", ("gpuaudit.sources",)), ("snapshot", ("gpuaudit.sources", "gpuaudit.snapshot"))],
)
def test_layers_import_only_layers_before_them(folder: str, allowed: tuple[str, ...]) -> None:
    for path in sorted((PACKAGE / folder).rglob("*.py")):
        for name in _imports(path):
            ok = any(name == a or name.startswith(a + ".") for a in (*FOUNDATION, *allowed))
            assert ok, f"{path.relative_to(PACKAGE)} imports {name}"
