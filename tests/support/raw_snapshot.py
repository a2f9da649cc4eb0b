"""A snapshot file read with plain Python, independent of gpuaudit's reader, so that tests can
compare what gpuaudit parsed with what the file holds."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any


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
