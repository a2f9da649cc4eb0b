"""Snapshot format v1: the recorded raw answers of one collection, in one file.

A snapshot is a JSON document (gzip-compressed when the file name ends in `.gz`, detected by
magic bytes when read):

    {"format": "gpuaudit-snapshot", "version": 1,
     "manifest": {...},
     "prometheus": {"<query id>": [{"query": "...", "params": {...}, "body": <raw answer>}, ...]},
     "kubernetes": {"<resource>": [<raw list response page>, ...]}}

`body` is a Prometheus HTTP API answer exactly as the server returned it; each list page is a
Kubernetes list response exactly as the API server returned it. Live scans, replays, the demo
and test scenarios all go through the same parsing code (`gpuaudit.inventory`). See
`docs/snapshot.md`.
"""

from __future__ import annotations

import gzip
import io
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuaudit.errors import SnapshotError
from gpuaudit.gcpause import without_gc

FORMAT_NAME = "gpuaudit-snapshot"
FORMAT_VERSION = 1
MAX_BYTES = int(os.environ.get("GPUAUDIT_SNAPSHOT_MAX_BYTES", str(4 * 1024**3)))
"""Largest decompressed snapshot accepted; a bigger one (or a gzip bomb) is refused."""

_GZIP_MAGIC = b"\x1f\x8b"


@dataclass
class Snapshot:
    """The raw answers of one collection plus its manifest."""

    manifest: dict[str, Any]
    prometheus: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    kubernetes: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
            "manifest": self.manifest,
            "prometheus": self.prometheus,
            "kubernetes": self.kubernetes,
        }


def write(snapshot: Snapshot, path: Path) -> None:
    """Write a snapshot; gzip-compressed when the name ends in `.gz`."""
    data = json.dumps(snapshot.to_json(), separators=(",", ":"), sort_keys=True).encode()
    if path.name.endswith(".gz"):
        # mtime=0 keeps the file byte-identical for identical content.
        with (
            open(path, "wb") as raw,
            gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=6) as gz,
        ):
            gz.write(data)
    else:
        path.write_bytes(data)


def _read_bounded(stream: io.BufferedIOBase | gzip.GzipFile, limit: int, name: str) -> bytes:
    chunks: list[bytes] = []
    total = 0
    while True:
        chunk = stream.read(1 << 20)
        if not chunk:
            break
        total += len(chunk)
        if total > limit:
            raise SnapshotError(
                f"snapshot {name} decompresses to more than {limit} bytes; refusing it "
                "(raise GPUAUDIT_SNAPSHOT_MAX_BYTES if it is genuine)"
            )
        chunks.append(chunk)
    return b"".join(chunks)


def _loads(data: bytes) -> Any:
    import orjson

    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise ValueError(str(exc)) from None


@without_gc
def read(path: Path, limit: int = MAX_BYTES) -> Snapshot:
    """Read and validate a snapshot file. Raises `SnapshotError` with one clear line."""
    name = str(path)
    try:
        with open(path, "rb") as fh:
            head = fh.read(2)
            fh.seek(0)
            if head == _GZIP_MAGIC:
                with gzip.GzipFile(fileobj=fh, mode="rb") as gz:
                    data = _read_bounded(gz, limit, name)
            else:
                data = _read_bounded(fh, limit, name)
    except FileNotFoundError:
        raise SnapshotError(f"snapshot {name} does not exist") from None
    except IsADirectoryError:
        raise SnapshotError(f"snapshot {name} is a directory, not a file") from None
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise SnapshotError(f"snapshot {name} could not be read: {exc}") from None
    try:
        doc = _loads(data)
    except ValueError as exc:
        raise SnapshotError(f"snapshot {name} is not valid JSON: {exc}") from None
    return from_json(doc, name)


def from_json(doc: Any, name: str = "<snapshot>") -> Snapshot:
    """Validate the envelope of a parsed snapshot document."""
    if not isinstance(doc, dict) or doc.get("format") != FORMAT_NAME:
        raise SnapshotError(f'{name} is not a gpuaudit snapshot (no "format": "{FORMAT_NAME}")')
    version = doc.get("version")
    if version != FORMAT_VERSION:
        raise SnapshotError(
            f"{name} is snapshot format version {version!r}; this gpuaudit reads version "
            f"{FORMAT_VERSION}"
        )
    manifest = doc.get("manifest")
    prom = doc.get("prometheus", {})
    kube = doc.get("kubernetes", {})
    if not isinstance(manifest, dict):
        raise SnapshotError(f"{name} has no manifest object")
    if not isinstance(prom, dict) or not all(isinstance(v, list) for v in prom.values()):
        raise SnapshotError(f'{name}: "prometheus" must map query ids to lists of answers')
    if not isinstance(kube, dict) or not all(isinstance(v, list) for v in kube.values()):
        raise SnapshotError(f'{name}: "kubernetes" must map resources to lists of pages')
    window = manifest.get("window")
    if not isinstance(window, dict):
        raise SnapshotError(f"{name}: manifest has no window")
    for key in ("start", "end", "step"):
        val = window.get(key)
        if not isinstance(val, (int, float)) or isinstance(val, bool) or val != val:
            raise SnapshotError(f"{name}: manifest window.{key} must be a number")
    if not window["start"] < window["end"] or window["step"] <= 0:
        raise SnapshotError(f"{name}: manifest window must have start < end and step > 0")
    return Snapshot(manifest=manifest, prometheus=prom, kubernetes=kube)
