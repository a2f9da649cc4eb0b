from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gpuaudit import checks


@pytest.fixture
def add_check(tmp_path: Path) -> Iterator[Callable[[str, str], Path]]:
    """Write a check module into a temporary folder on `gpuaudit.checks.__path__` (as a
    plugin folder would be); removed, with the modules loaded from it, afterwards."""
    folder = tmp_path / "more_checks"
    folder.mkdir()
    checks.__path__.append(str(folder))
    written: list[str] = []

    def add(name: str, source: str) -> Path:
        path = folder / f"{name}.py"
        path.write_text(source)
        written.append(f"gpuaudit.checks.{name}")
        sys.modules.pop(f"gpuaudit.checks.{name}", None)
        return path

    try:
        yield add
    finally:
        checks.__path__.remove(str(folder))
        for name in written:
            sys.modules.pop(name, None)
        checks.clear_cache()
