"""The history a weekly cron job keeps (`--history DIR`): each JSON report, named by the end of
its window, the last `--history-keep` of them; the newest earlier one is last week's report.

- **Names** sort by time: `gpuaudit-20261123T000000Z.json` for a window that ends 2026-11-23
  00:00 UTC. Only files of exactly that shape, regular files and not links, are gpuaudit's:
  they alone are read and pruned, and nothing else in the folder is touched.
- **Writing** never goes through a link and never replaces a report: the text is written to a
  new file of its own in the folder (created exclusively), then hard-linked to its name, which
  fails if the name exists (a report of the same window end is kept, and the run says so).
- **Reading** is bounded: the newest `keep` reports at most, each at most
  `limits.REPORT_BYTES` (`gpuaudit.audit.compare.load_report`); a file that is too large, not
  JSON or not a report is one warning, and the others are read.
- **The previous report** is the newest kept report whose window ends before this audit's
  (a report of this very window, written by an earlier run, is not last week's).
"""

from __future__ import annotations

import dataclasses
import os
import re
import stat
import tempfile
from contextlib import suppress
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from gpuaudit.audit.assemble import AuditResult
from gpuaudit.audit.compare import load_report
from gpuaudit.audit.weeks import point_now, point_of
from gpuaudit.core.errors import ConfigError

FLAG = "--history"
NAME = re.compile(r"gpuaudit-(\d{8}T\d{6}Z)\.json")
"""The name of a report the history keeps; the group is its window's end."""
_STAMP = "%Y%m%dT%H%M%SZ"


def name_of(end: float) -> str:
    """The history's name of a report whose window ends at `end` (seconds)."""
    return f"gpuaudit-{datetime.fromtimestamp(end, timezone.utc).strftime(_STAMP)}.json"


def end_of(name: str) -> float | None:
    """The window end a history name says; None for a name not the history's."""
    m = NAME.fullmatch(name)
    if m is None:
        return None
    try:
        return datetime.strptime(m.group(1), _STAMP).replace(tzinfo=timezone.utc).timestamp()
    except ValueError:
        return None


@dataclass(frozen=True)
class Kept:
    """The reports a history keeps, oldest first, as read."""

    reports: tuple[tuple[str, dict[str, Any]], ...]
    """(file name, the report) of each readable one."""
    warnings: tuple[str, ...]
    """One sentence per kept file that could not be read."""

    def before(self, end: float) -> tuple[str, dict[str, Any]] | None:
        """The newest report whose window (by its name) ends before `end`."""
        earlier = [r for r in self.reports if (end_of(r[0]) or end) < end]
        return earlier[-1] if earlier else None


_HEAD = b'{\n  "schema_version": "1.'
"""How a JSON report of gpuaudit's starts (`gpuaudit.report.json_report`)."""


def _ours(folder: Path) -> list[str]:
    """The names of the history's files in `folder`, oldest first: regular files (not links)
    of the history's name."""
    try:
        entries = list(os.scandir(folder))
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise ConfigError(f"{FLAG} {folder}: cannot be read: {exc.strerror or exc}") from None
    names = [
        e.name for e in entries if end_of(e.name) is not None and e.is_file(follow_symlinks=False)
    ]
    return sorted(names)


def read(folder: Path, keep: int) -> Kept:
    """The newest `keep` reports of the history in `folder` (none when it does not exist yet);
    refused when `folder` is not a folder."""
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"{FLAG} {folder} is not a folder; name a folder for the history")
    reports: list[tuple[str, dict[str, Any]]] = []
    warnings: list[str] = []
    for name in _ours(folder)[-keep:]:
        doc, why = _load(folder / name)
        if doc is None:
            warnings.append(why)
        else:
            reports.append((name, doc))
    return Kept(tuple(reports), tuple(warnings))


def _load(path: Path) -> tuple[dict[str, Any] | None, str]:
    try:
        return load_report(path, FLAG), ""
    except ConfigError as exc:
        return None, f"{exc}; it was left out of the trend"


def keep(folder: Path, text: str, end: float, most: int) -> list[str]:
    """Keep the JSON report `text` of a window ending at `end` in `folder` (created if
    missing), then remove the history's oldest reports beyond `most`; why anything failed."""
    name = name_of(end)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if folder.is_symlink() or not stat.S_ISDIR(os.lstat(folder).st_mode):
            return [f"cannot keep the report in {FLAG} {folder}: it is not a folder (or a link)"]
        fd, part = tempfile.mkstemp(prefix=".gpuaudit-", suffix=".part", dir=folder)
        try:
            with os.fdopen(fd, "wb") as fh:
                os.fchmod(fh.fileno(), 0o666 & ~_umask())
                fh.write(text.encode("utf-8"))
            os.link(part, folder / name, follow_symlinks=False)
        finally:
            with suppress(OSError):
                os.unlink(part)
    except FileExistsError:
        return [
            f"{FLAG} {folder} already holds {name}, a report of the same window; it was kept "
            "and this one was not (remove it to keep this one)"
        ]
    except OSError as exc:
        return [f"cannot keep the report in {FLAG} {folder}: {exc.strerror or exc}"]
    said = (_remove(folder, old) for old in _ours(folder)[:-most])
    return [why for why in said if why]


def _remove(folder: Path, name: str) -> str:
    """Remove one old report, only when it is gpuaudit's: a regular file, opened without
    following a link, that starts as gpuaudit's JSON reports do; anything else is left."""
    try:
        fd = os.open(folder / name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode) or fh.read(len(_HEAD)) != _HEAD:
                return ""
        os.unlink(folder / name)
    except OSError as exc:
        return f"cannot remove {name} from {FLAG} {folder}: {exc.strerror or exc}"
    return ""


def with_weeks(result: AuditResult, kept: Kept, most: int) -> AuditResult:
    """`result` with the trend over the kept weeks (the newest `most - 1` earlier reports and
    this audit, oldest first) and a warning for each kept file that could not be read."""
    earlier = [
        point
        for name, doc in kept.reports
        if (end_of(name) or result.window_end) < result.window_end
        and (point := point_of(doc)) is not None
    ]
    now = point_now(result.window_end, result.summary, len(result.findings), result.outcomes)
    weeks = (*earlier[len(earlier) - (most - 1) :], now) if most > 1 else (now,)
    return dataclasses.replace(result, weeks=weeks, warnings=result.warnings + kept.warnings)


def _umask() -> int:
    """The process's umask (a new report gets the mode any new file would)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
