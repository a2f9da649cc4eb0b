"""Write the reports per owner (`--per-owner DIR`): one Markdown and one HTML page per owner
and an `index.md`, each file created exclusively (a file already there is never replaced, and
a link planted in its place is never followed), so that a folder shared with others cannot be
made to overwrite what it should not."""

from __future__ import annotations

import os
from pathlib import Path

from gpuaudit.audit.assemble import AuditResult
from gpuaudit.report import owner_pages

INDEX = "index.md"


def write(result: AuditResult, folder: Path) -> list[str]:
    """Write every owner's pages and the index into `folder` (created if missing); why each
    file that could not be written failed, one sentence each."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return [f"cannot write --per-owner {folder}: {exc.strerror or exc}"]
    failures: list[str] = []
    stems = []
    for section in result.by_owner:
        stem = owner_pages.file_stem(section.name)
        stems.append((section, stem))
        page = owner_pages.page(result, section)
        failures += _create(folder / f"{stem}.md", owner_pages.markdown(page))
        failures += _create(folder / f"{stem}.html", owner_pages.html(page))
    failures += _create(folder / INDEX, owner_pages.index_markdown(result, stems))
    return failures


def _create(path: Path, text: str) -> list[str]:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags, 0o644)
    except FileExistsError:
        return [
            f"cannot write {path}: it exists already (--per-owner writes each file anew; "
            "use a new or empty folder, such as one per week)"
        ]
    except OSError as exc:
        return [f"cannot write {path}: {exc.strerror or exc}"]
    with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
        fh.write(text)
    return []
