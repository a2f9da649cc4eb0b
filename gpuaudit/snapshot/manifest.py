"""A snapshot's manifest: what was collected, when, over which window, from which backend with
which capabilities, what was read of Kubernetes, how the queries were cut, and whether every
source answered in full (`docs/snapshot.md` lists the keys).

`Manifest` is built here and only here: by a live collection (`gpuaudit.snapshot.from_live`), by the
scenario generator, or from a file (`Manifest.from_json`). It is also a read-only mapping of its
JSON object, as written to the file, for code that reads the manifest by key.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import cached_property
from typing import Any

from gpuaudit import __version__
from gpuaudit.core import limits
from gpuaudit.core.errors import SnapshotError
from gpuaudit.core.numbers import json_number
from gpuaudit.snapshot.format import FORMAT_VERSION
from gpuaudit.sources.prometheus.stats import SamplesRead


def utc_timestamp(t: float | None = None) -> str:
    """A unix time (None: now) as the manifest writes it: `2026-11-23T00:00:00Z`."""
    at = datetime.now(timezone.utc) if t is None else datetime.fromtimestamp(t, timezone.utc)
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class ManifestWindow:
    """The audit window as recorded, in unix seconds (whole numbers when gpuaudit wrote it)."""

    start: float
    end: float
    step: float
    """The length of one bucket of the hourly series."""

    @property
    def seconds(self) -> float:
        return self.end - self.start

    def to_json(self) -> dict[str, float]:
        return {"start": self.start, "end": self.end, "step": self.step, "seconds": self.seconds}

    @classmethod
    def from_json(cls, window: Any, name: str) -> ManifestWindow:
        """The window of a manifest read from `name`; `SnapshotError` when it is unusable: not
        finite numbers, a time before 1970 or after the year 9999 (an end in milliseconds), a
        step that is not a whole number of seconds, or more buckets than `limits.WINDOW_BUCKETS`
        allows. Checked here, before anything is allocated per bucket."""
        if not isinstance(window, dict):
            raise SnapshotError(f"{name}: manifest has no window")
        read: dict[str, float] = {}
        for key in ("start", "end", "step"):
            val = json_number(window.get(key))
            if val is None:
                raise SnapshotError(f"{name}: manifest window.{key} must be a finite number")
            read[key] = val
        start, end, step = read["start"], read["end"], read["step"]
        for key in ("start", "end"):
            if not 0 <= read[key] <= LAST_TIME:
                raise SnapshotError(
                    f"{name}: manifest window.{key} {read[key]:.6g} is not a unix time in "
                    "seconds between 1970 and the year 9999 (milliseconds?)"
                )
        if not start < end:
            raise SnapshotError(f"{name}: manifest window must have start < end")
        if step < 1 or not step.is_integer() or step > end - start:
            raise SnapshotError(
                f"{name}: manifest window.step {step:.6g} must be a whole number of seconds, "
                "at least 1 and at most the window's length"
            )
        buckets = math.ceil((end - start) / step)
        limit = limits.WINDOW_BUCKETS.value()
        if buckets > limit:
            raise SnapshotError(
                f"{name}: manifest window holds {buckets:,} buckets of {step:.0f} s, more than "
                f"the {limit:,} allowed; refusing it (raise {limits.WINDOW_BUCKETS.env} if it "
                "is genuine)"
            )
        # As the file wrote them: an int stays an int, and is written back the same.
        return cls(start=window["start"], end=window["end"], step=window["step"])


LAST_TIME = 253402300799
"""9999-12-31T23:59:59Z, the last time a snapshot's window may hold."""


@dataclass(frozen=True, kw_only=True)
class Manifest(Mapping[str, Any]):
    """What a snapshot says about its answers. Optional keys are None when not recorded (a
    generated snapshot has no `prometheus_url`; a live one has no `generated_by`)."""

    window: ManifestWindow
    cluster: str = ""
    """The `--cluster-label` value, the Kubernetes context or the Prometheus URL;
    `scenario-<seed>` for a generated snapshot."""
    source: str = ""
    """`prometheus` for a live collection, `scenario` for a generated one."""
    prometheus_url: str | None = None
    """The Prometheus URL without credentials, query or fragment."""
    generated_by: str | None = None
    """The command that generated the snapshot."""
    collected_at: str = ""
    """When the answers were collected (`utc_timestamp`)."""
    capabilities: Mapping[str, Any] = field(default_factory=dict)
    """What discovery found: backend, version, DCGM metrics, pod label spelling, MIG,
    profiling, recording rules, notes."""
    objects: Mapping[str, str] = field(default_factory=dict)
    """Kubernetes resource -> `ok` or why it was not read in full."""
    kubernetes_version: str | None = None
    """The API server's version (`GET /version`'s `gitVersion`, `v1.31.4`), where it said."""
    queries: tuple[Mapping[str, Any], ...] = ()
    """Each query run: `id`, `kind`, `metric`, `query`."""
    missing_metrics: tuple[str, ...] | None = None
    """Catalogue metrics the backend lacks."""
    plan: Mapping[str, Any] = field(default_factory=dict)
    """How the window was cut into chunks, per query."""
    http_requests: int | None = None
    backend_timings: Mapping[str, Any] = field(default_factory=dict)
    """Per query kind (`window`, `hourly`): queries, the seconds gpuaudit waited for their
    answers, and the backend's own statistics (Prometheus `stats`: `evalTotalTime` ...) where
    it gave them."""
    samples_read: SamplesRead | None = None
    """(Live collections) per query id and in total, the samples the backend read to answer
    the queries: as Prometheus said (`stats=all`), or estimated where the backend said nothing
    (`gpuaudit.sources.prometheus.stats.SamplesCounter`), each figure saying which."""
    complete: bool = True
    """Whether every source answered in full."""
    incomplete_reasons: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    format_version: int = FORMAT_VERSION
    gpuaudit_version: str = __version__
    unread: Mapping[str, Any] = field(default_factory=dict)
    """Keys of a manifest read from a file that the fields above do not hold (unknown keys, or
    values of another type than the field's), kept as they were: they are written back, and
    reading by key sees them."""

    def to_json(self) -> dict[str, Any]:
        """The manifest's JSON object, as written to a snapshot file."""
        doc: dict[str, Any] = {
            "format_version": self.format_version,
            "gpuaudit_version": self.gpuaudit_version,
            "cluster": self.cluster,
            "source": self.source,
        }
        if self.prometheus_url is not None:
            doc["prometheus_url"] = self.prometheus_url
        if self.generated_by is not None:
            doc["generated_by"] = self.generated_by
        doc["collected_at"] = self.collected_at
        doc["window"] = self.window.to_json()
        doc["capabilities"] = dict(self.capabilities)
        doc["objects"] = dict(self.objects)
        if self.kubernetes_version is not None:
            doc["kubernetes_version"] = self.kubernetes_version
        doc["queries"] = [dict(q) for q in self.queries]
        if self.missing_metrics is not None:
            doc["missing_metrics"] = list(self.missing_metrics)
        doc["plan"] = dict(self.plan)
        if self.http_requests is not None:
            doc["http_requests"] = self.http_requests
        if self.backend_timings:
            doc["backend_timings"] = dict(self.backend_timings)
        if self.samples_read is not None:
            doc["samples_read"] = self.samples_read.to_json()
        doc["complete"] = self.complete
        doc["incomplete_reasons"] = list(self.incomplete_reasons)
        doc["warnings"] = list(self.warnings)
        doc.update(self.unread)
        return doc

    @classmethod
    def from_json(cls, doc: Mapping[str, Any], name: str) -> Manifest:
        """The manifest of a file named `name`. Only the window must be usable (`SnapshotError`
        otherwise); any other key whose value does not fit its field is kept in `unread`."""
        window = ManifestWindow.from_json(doc.get("window"), name)
        fields: dict[str, Any] = {}
        unread: dict[str, Any] = {}
        for key, value in doc.items():
            if key in ("window", *_STATE):
                continue
            read = _READERS.get(key)
            if read is not None and read[0](value):
                fields[key] = read[1](value)
            else:
                unread[key] = value
        return cls(window=window, unread=unread, **fields, **_state(doc))

    # -- reading by key: the JSON object

    @cached_property
    def _document(self) -> dict[str, Any]:
        return self.to_json()

    def __getitem__(self, key: str) -> Any:
        return self._document[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._document)

    def __len__(self) -> int:
        return len(self._document)


_STATE = ("complete", "incomplete_reasons", "warnings")
"""Keys that say how far the answers can be trusted: never kept as they were when malformed,
since code reading them by key would take a string for a bool or a list."""


def _texts(value: Any) -> tuple[str, ...]:
    """Texts from a list (other items written as JSON-ish text), or one text."""
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list):
        return tuple(v if isinstance(v, str) else repr(v)[:500] for v in value)
    return (repr(value)[:500],)


def _state(doc: Mapping[str, Any]) -> dict[str, Any]:
    """`complete`, `incomplete_reasons` and `warnings` of a manifest read from a file. A
    `complete` that is not true or false makes the snapshot incomplete (a string `"false"` is
    not taken for true); a text where a list of texts belongs is one text, not its letters."""
    out: dict[str, Any] = {}
    reasons: list[str] = []
    if "incomplete_reasons" in doc:
        reasons.extend(_texts(doc["incomplete_reasons"]))
    if "warnings" in doc:
        out["warnings"] = _texts(doc["warnings"])
    complete = doc.get("complete", True)
    if not isinstance(complete, bool):
        reasons.append(
            f'the snapshot\'s manifest says "complete": {repr(complete)[:40]}, which is not true '
            "or false; it is read as incomplete"
        )
    out["complete"] = complete is True
    out["incomplete_reasons"] = tuple(reasons)
    return out


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_texts(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _same(v: Any) -> Any:
    return v


_TEXT = (lambda v: isinstance(v, str), _same)
_READERS: dict[str, tuple[Callable[[Any], bool], Callable[[Any], Any]]] = {
    "cluster": _TEXT,
    "source": _TEXT,
    "prometheus_url": _TEXT,
    "generated_by": _TEXT,
    "collected_at": _TEXT,
    "kubernetes_version": _TEXT,
    "gpuaudit_version": _TEXT,
    "capabilities": (lambda v: isinstance(v, dict), _same),
    "plan": (lambda v: isinstance(v, dict), _same),
    "objects": (
        lambda v: isinstance(v, dict) and all(isinstance(x, str) for x in v.values()),
        _same,
    ),
    "queries": (lambda v: isinstance(v, list) and all(isinstance(q, dict) for q in v), tuple),
    "missing_metrics": (_is_texts, tuple),
    "http_requests": (_is_int, _same),
    "backend_timings": (lambda v: isinstance(v, dict), _same),
    "samples_read": (
        lambda v: SamplesRead.from_json(v) is not None,
        SamplesRead.from_json,
    ),
    "format_version": (_is_int, _same),
}
"""Per manifest key: whether a value read fits the field, and how it becomes the field's."""
