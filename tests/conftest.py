from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "fixtures" / "demo.snapshot.json.gz"
DEMO_TRUTH = ROOT / "fixtures" / "demo.truth.json"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-goldens",
        action="store_true",
        help="Rewrite golden files under tests/goldens from current output.",
    )


@pytest.fixture
def update_goldens(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-goldens"))


def raw_snapshot(path: Path) -> dict[str, Any]:
    """A snapshot file read with plain Python (no gpuaudit code), as one version 1 document:
    `{"manifest": ..., "prometheus": {id: [entry, ...]}, "kubernetes": {res: [page, ...]}}`."""
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    lines = [json.loads(line) for line in data.decode().splitlines() if line.strip()]
    if lines[0].get("version") == 1:
        return dict(lines[0])
    doc: dict[str, Any] = {"manifest": lines[0]["manifest"], "prometheus": {}, "kubernetes": {}}
    for rec in lines[1:]:
        if "prometheus" in rec:
            qid = rec.pop("prometheus")
            doc["prometheus"].setdefault(qid, []).append(rec)
        elif "kubernetes" in rec:
            doc["kubernetes"].setdefault(rec["kubernetes"], []).append(rec["page"])
    return doc
