"""CSV text as spreadsheets read it safely: the one writer of the CSV reports (`showback`,
`focus`), through the standard `csv` module.

Names from the cluster are data. A text cell that begins with `=`, `+`, `-` or `@` (or a tab or
carriage return) would be read by a spreadsheet as a formula (CSV formula injection, OWASP), so
it gets a leading `'`, which spreadsheets show as text. Numbers are written as the exact decimals
the audit computed (`Decimal`), never guarded: a negative figure stays a number. `None` is an
empty cell (null).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from decimal import Decimal

Cell = str | Decimal | int | None
"""A cell: text (guarded), an exact number, or None (an empty cell)."""

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
"""What a text cell may not begin with unguarded."""


def guard(text: str) -> str:
    """`text` as a cell a spreadsheet does not evaluate: a leading `'` when it starts like a
    formula."""
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def _cell(value: Cell) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return guard(value)
    return str(value)


def csv_text(header: Sequence[str], rows: Iterable[Sequence[Cell]]) -> str:
    """The CSV document (RFC 4180: `\\r\\n` line ends, quoted where needed) of `header` and
    `rows`."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(header)
    writer.writerows([_cell(v) for v in row] for row in rows)
    return out.getvalue()
