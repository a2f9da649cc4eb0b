"""What the reference commands print: the table of checks (`gpuaudit checks`) and a check's
documentation (`gpuaudit explain CODE`), both read from the check modules."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from gpuaudit.audit.coherence import EXPLAIN
from gpuaudit.checks import RETIRED, by_code, discover
from gpuaudit.core.errors import ConfigError


def print_checks() -> None:
    """Print every check with its stable code, then the retired codes, as a table."""
    t = Table(title="gpuaudit checks")
    t.add_column("Code")
    t.add_column("Title")
    t.add_column("Needs")
    for c in discover():
        t.add_row(c.code, c.title, ", ".join(r.value for r in c.requires))
    for code, why in sorted(RETIRED.items()):
        t.add_row(code, f"(retired) {why}", "")
    Console().print(t)


def explain(code: str) -> str:
    """The documentation of the check `code` (its module docstring and how the figures fit
    together), or why a retired code was retired; an unknown code is a `ConfigError` naming
    the known ones."""
    c = by_code(code)
    if c is not None:
        return f"{c.explain()}\n\n{EXPLAIN}"
    if code.strip().upper() in RETIRED:
        return f"{code.upper()} is retired: {RETIRED[code.strip().upper()]}"
    known = ", ".join(k.code for k in discover())
    raise ConfigError(f"unknown check code {code!r}; known codes: {known}")
