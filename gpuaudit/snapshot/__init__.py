"""Snapshots: the recorded raw answers of one collection, in one file (`docs/snapshot.md`).

Version 2 (what gpuaudit writes) is JSON Lines, gzip-compressed when the file name ends in `.gz`
(detected by magic bytes when read): the envelope first, then one line per Kubernetes list page
and per Prometheus answer, and an end line (a file cut short at a line boundary is refused):

    {"format": "gpuaudit-snapshot", "manifest": {...}, "version": 2}
    {"kubernetes": "<resource>", "page": <raw list response page>}
    {"body": <raw answer>, "params": {...}, "prometheus": "<query id>", "query": "..."}
    {"end": <number of lines between the first and this one>}

Version 1, still read, is one JSON document:

    {"format": "gpuaudit-snapshot", "version": 1,
     "manifest": {...},
     "prometheus": {"<query id>": [{"query": "...", "params": {...}, "body": <raw answer>}, ...]},
     "kubernetes": {"<resource>": [<raw list response page>, ...]}}

`body` is a Prometheus HTTP API answer exactly as the server returned it; each list page is a
Kubernetes list response as the API server returned it, its objects reduced to the fields
gpuaudit reads (`fields`: no `env`, no annotations beyond the gang ones). Live scans, replays,
the demo and test scenarios all go through the same parsing code (`answers`).

The modules: `model` (`Snapshot`), `manifest` (`Manifest`), `reader` (`read`, and `index`
for the columnar side-file of `sidefile`, sealed with this user's key, `sidekey`), `writer`
(`write`, and `write_records` for streaming), `answers` (answer parsing into arrays), `live`
(what a snapshot makes of a live collection; `collect_live` below composes the two), `fields`
(what is kept of the Kubernetes objects: the fields gpuaudit reads), `format` (name and
versions).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuaudit.core.progress import SILENT, Progress
from gpuaudit.snapshot.format import FORMAT_NAME, FORMAT_VERSION, READABLE_VERSIONS
from gpuaudit.snapshot.manifest import Manifest, ManifestWindow
from gpuaudit.snapshot.model import Snapshot
from gpuaudit.snapshot.reader import MAX_BYTES, from_json, index, read
from gpuaudit.snapshot.writer import write, write_records

if TYPE_CHECKING:
    from gpuaudit.sources.collect import LiveOptions

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "MAX_BYTES",
    "READABLE_VERSIONS",
    "Manifest",
    "ManifestWindow",
    "Snapshot",
    "collect_live",
    "from_json",
    "index",
    "read",
    "write",
    "write_records",
]


def collect_live(
    live: LiveOptions,
    window_s: int,
    step_s: int,
    end: float | None,
    *,
    as_arrays: bool = False,
    progress: Progress = SILENT,
) -> Snapshot:
    """Collect a snapshot from Prometheus (and the Kubernetes API when reachable).

    `as_arrays` (for a scan, which needs no raw text) parses each answer into arrays as it
    arrives; otherwise each is kept as the bytes the server sent, to be written into a snapshot
    file as they are. Of the Kubernetes objects, only the fields gpuaudit reads are kept
    (`fields`), and of the controllers only those GPU pods lead to and GPU Deployments and
    StatefulSets scaled to 0 (`fields.PageKeeper`), in a
    scan and in a saved snapshot alike. `progress` is told of the Prometheus
    queries and the Kubernetes lists as they go."""
    # Imported here, not above: the HTTP and Kubernetes clients take a quarter of a second to
    # import, which reading a snapshot file should not pay.
    from gpuaudit.snapshot import fields
    from gpuaudit.snapshot import from_live as from_live
    from gpuaudit.sources import collect as live_source

    keep = from_live.ArrayKeeper() if as_arrays else from_live.keep_bytes
    raw = live_source.collect(
        live, window_s, step_s, end, progress=progress, keep=keep, keep_page=fields.PageKeeper()
    )
    return from_live.from_collection(raw)
