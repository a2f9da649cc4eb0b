"""What a snapshot makes of a live collection (`gpuaudit.sources.collect.collect`, composed by
`gpuaudit.snapshot.collect_live`): each Prometheus answer kept as the snapshot needs it, as it
arrives, and the manifest built from what the sources recorded."""

from __future__ import annotations

from typing import Any

from gpuaudit.snapshot.answers import Interner, from_bytes, one_line, parse
from gpuaudit.snapshot.manifest import Manifest, ManifestWindow, utc_timestamp
from gpuaudit.snapshot.model import Snapshot
from gpuaudit.sources.collect import LiveCollection
from gpuaudit.sources.prometheus.http import Response


def from_collection(raw: LiveCollection) -> Snapshot:
    """The snapshot of a live collection, its manifest stamped now."""
    prom, w = raw.prometheus, raw.window
    manifest = Manifest(
        cluster=raw.cluster,
        source="prometheus",
        prometheus_url=raw.prometheus_url,
        collected_at=utc_timestamp(),
        window=ManifestWindow(start=w.start, end=w.end, step=w.step),
        capabilities=prom.capabilities.to_dict(),
        objects=raw.objects,
        queries=tuple(prom.queries),
        missing_metrics=tuple(prom.missing_metrics),
        plan=prom.plan,
        http_requests=prom.http_requests,
        backend_timings=prom.backend_timings,
        samples_read=prom.samples_read,
        complete=not raw.incomplete_reasons,
        incomplete_reasons=tuple(raw.incomplete_reasons),
        warnings=tuple(raw.warnings),
        kubernetes_version=raw.kubernetes_version or None,
    )
    return Snapshot(manifest=manifest, prometheus=prom.answers, kubernetes=raw.kubernetes)


def keep_bytes(qid: str, response: Response) -> dict[str, Any]:
    """Keep an answer as the bytes the server sent (a tenth of their size as Python objects),
    to be written into the snapshot as they are; as its JSON object when they do not fit on
    one line. Bytes whose series were not parsed on arrival (`Response.whole`) are read once
    here (the fast reader, `from_bytes`), so that no answer that is not valid JSON is written."""
    if one_line(response.raw):
        if not response.whole:
            from_bytes(response.raw, f"prometheus.{qid}")
        return {"raw": response.raw.strip()}
    return {"body": response.body}


class ArrayKeeper:
    """Keeps each answer parsed into arrays as it arrives (straight from its bytes where they
    are in the usual compact form): no answer is held as Python lists and strings. One label
    object per distinct label set across the collection."""

    def __init__(self) -> None:
        self.intern = Interner()

    def __call__(self, qid: str, response: Response) -> dict[str, Any]:
        where = f"prometheus.{qid}"
        if response.raw:
            return {"answer": from_bytes(response.raw, where, self.intern)}
        return {"answer": parse(response.body, where, self.intern)}
