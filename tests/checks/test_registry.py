from __future__ import annotations

import re
from pathlib import Path

from gpuaudit.checks import REGISTRY, RETIRED

SECTIONS = ("What it finds", "Why it matters", "How it decides", "What to do")


def test_code_file_and_registry_agree() -> None:
    codes = [c.code for c in REGISTRY]
    assert len(codes) == len(set(codes))
    assert not set(codes) & set(RETIRED)
    for c in REGISTRY:
        assert re.fullmatch(r"GPU\d{3}", c.code)
        stem = Path(c.module.__file__ or "").stem
        assert stem.startswith(c.code.lower() + "_"), (c.code, stem)
        assert c.doc.startswith(c.code), c.code
        for s in SECTIONS:
            assert s in c.doc, (c.code, s)


def test_every_check_module_is_registered() -> None:
    folder = Path(REGISTRY[0].module.__file__ or "").parent
    files = {p.stem.split("_")[0].upper() for p in folder.glob("gpu[0-9][0-9][0-9]_*.py")}
    assert files == {c.code for c in REGISTRY}
