"""The snapshot model: the recorded raw answers of one collection plus its manifest."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import orjson

from gpuaudit.snapshot.answers import Answer
from gpuaudit.snapshot.format import FORMAT_NAME
from gpuaudit.snapshot.manifest import Manifest


@dataclass(frozen=True)
class Snapshot:
    """The raw answers of one collection plus its manifest.

    Each Prometheus entry holds `query`, `params` (and `chunk` when collected live) and its
    answer in one of three forms: `body` (the API answer as a JSON object), `raw` (its bytes as
    the server sent them) or `answer` (parsed into arrays, `gpuaudit.snapshot.answers`)."""

    manifest: Manifest
    prometheus: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """Query id -> one entry per chunk, in time order."""
    kubernetes: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """Resource -> the list response pages, as the API server returned them."""

    def with_manifest(self, **changes: Any) -> Snapshot:
        """A copy with these manifest fields changed (the answers shared, not copied)."""
        return replace(self, manifest=replace(self.manifest, **changes))

    def to_json(self) -> dict[str, Any]:
        """The snapshot as one version 1 document (answers held as arrays written back as
        answer bodies)."""
        prom = {qid: [with_body(e) for e in entries] for qid, entries in self.prometheus.items()}
        return {
            "format": FORMAT_NAME,
            "version": 1,
            "manifest": self.manifest.to_json(),
            "prometheus": prom,
            "kubernetes": self.kubernetes,
        }


def with_body(entry: dict[str, Any]) -> dict[str, Any]:
    """The entry with its answer as a `body` object (from its bytes or its arrays)."""
    if "body" in entry:
        return entry
    raw, answer = entry.get("raw"), entry.get("answer")
    out = {k: v for k, v in entry.items() if k not in ("raw", "answer")}
    if isinstance(raw, bytes):
        out["body"] = orjson.loads(raw)
    elif isinstance(answer, Answer):
        out["body"] = answer.to_body()
    else:
        return entry
    return out
