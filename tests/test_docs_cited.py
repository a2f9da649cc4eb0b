"""The package cites only documents a user has: the files under `docs/` it names exist, and
no developers' notes are cited."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CITED = re.compile(r"docs/[A-Za-z0-9_.-]+\.(?:md|json|yaml)")


def _sources() -> list[Path]:
    return sorted((ROOT / "gpuaudit").rglob("*.py"))


def test_every_cited_doc_exists() -> None:
    missing = {
        f"{path.relative_to(ROOT)}: {doc}"
        for path in _sources()
        for doc in CITED.findall(path.read_text(encoding="utf-8"))
        if not (ROOT / doc).is_file()
    }
    assert not missing, sorted(missing)


def test_no_developers_notes_are_cited() -> None:
    citing = [
        str(path.relative_to(ROOT))
        for path in _sources()
        if "REFERENCE.md" in path.read_text(encoding="utf-8")
    ]
    assert not citing
