"""Compare an audit with an earlier JSON report: what is new, worse, improved or resolved.

Findings are matched by fingerprint (code, kind, namespace and owning workload, see
`Finding.fingerprint`). A finding is worse when its severity rose or its wasted GPU-hours grew
by more than 10 % (and at least one GPU-hour); improved in the opposite case.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuaudit.checks.findings import Finding, Severity
from gpuaudit.core import limits
from gpuaudit.core.errors import ConfigError
from gpuaudit.core.numbers import json_number as _num

NEW, WORSE, IMPROVED, UNCHANGED = "new", "worse", "improved", "unchanged"
SUMMARY_KEYS = (
    "gpus_total",
    "allocation_rate",
    "mean_activity",
    "idle_gpu_hours",
    "wasted_cost",
    "allocated_gpu_hours",
)


@dataclass(frozen=True)
class Comparison:
    source: str
    previous_generated_at: str
    status: Mapping[str, str]
    """Fingerprint of each current finding -> new, worse, improved or unchanged."""
    previous_gpu_hours: Mapping[str, float]
    resolved: tuple[Mapping[str, Any], ...]
    """Previous findings (as the earlier report had them) that are gone."""
    summary_delta: Mapping[str, Mapping[str, float | None]]

    def count(self, status: str) -> int:
        return sum(1 for s in self.status.values() if s == status)


def load_report(path: Path, flag: str = "--baseline") -> dict[str, Any]:
    """Read an earlier gpuaudit JSON report (given by `flag`, `--baseline` or `--previous`),
    with one clear error when it is not one: larger than `limits.REPORT_BYTES`, a gpuaudit
    snapshot, not strict JSON (`NaN`, `Infinity`, numbers that overflow, nesting deeper than
    1024 levels), or not a report."""
    import orjson

    limit = limits.REPORT_BYTES.value()
    try:
        with open(path, "rb") as fh:
            data = fh.read(limit + 1)
    except FileNotFoundError:
        raise ConfigError(f"{flag} {path}: the earlier report does not exist") from None
    except OSError as exc:
        raise ConfigError(
            f"{flag} {path}: the earlier report cannot be read: {exc.strerror or exc}"
        ) from None
    if _is_snapshot(data):
        raise ConfigError(
            f"{flag} {path} is a gpuaudit snapshot, not a JSON report; {flag} takes an earlier "
            "`scan --format json` report (write one with `gpuaudit scan --snapshot "
            f"{path.name} --format json -o report.json`)"
        )
    if len(data) > limit:
        raise ConfigError(
            f"{flag} {path}: the earlier report is larger than {limit} bytes; refusing it (raise "
            f"{limits.REPORT_BYTES.env} if it is genuine)"
        )
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise ConfigError(
            f"{flag} {path}: the earlier report is not valid JSON ({exc}); {flag} takes an "
            "earlier `scan --format json` report"
        ) from None
    if (
        not isinstance(doc, dict)
        or not str(doc.get("schema_version", "")).startswith("1.")
        or not isinstance(doc.get("findings"), list)
    ):
        raise ConfigError(
            f"{flag} {path} is not a gpuaudit JSON report (schema_version 1.x); {flag} takes "
            "an earlier `scan --format json` report"
        )
    return doc


_SNAPSHOT_HEAD = b'{"format":"gpuaudit-snapshot"'
"""How a snapshot's first line starts (`gpuaudit.snapshot.writer`)."""


def _is_snapshot(data: bytes) -> bool:
    """Whether `data` (a file's start) is a gpuaudit snapshot: its first line, once
    decompressed when it is gzip, names the snapshot format."""
    head = data[:4096]
    if head[:2] == b"\x1f\x8b":
        try:
            head = zlib.decompressobj(31).decompress(data[:65536], 256)
        except zlib.error:
            return False
    return head.lstrip().replace(b" ", b"").startswith(_SNAPSHOT_HEAD)


def _fp(f: Mapping[str, Any]) -> str:
    if isinstance(f.get("fingerprint"), str):
        return str(f["fingerprint"])
    r = f.get("resource") if isinstance(f.get("resource"), Mapping) else {}
    assert isinstance(r, Mapping)
    return f"{f.get('code')}|{r.get('kind')}|{r.get('namespace')}|{r.get('name')}"


def _resolved(f: Mapping[str, Any]) -> dict[str, Any]:
    """What a resolved finding of an earlier report is shown with: its texts, its resource's
    texts and its impact's numbers, nothing else (the file may hold anything, nested as deep
    as JSON allows, and goes into this report)."""
    out: dict[str, Any] = {
        k: f[k][:_TEXT]
        for k in ("code", "fingerprint", "severity", "message")
        if isinstance(f.get(k), str)
    }
    for key, keep in (("resource", _text), ("impact", _num)):
        part = f.get(key)
        if isinstance(part, Mapping):
            kept = {str(k)[:_TEXT]: keep(v) for k, v in part.items()}
            out[key] = {k: v for k, v in kept.items() if v is not None}
    return out


_TEXT = 2000
"""Characters kept of each text of an earlier report's resolved finding."""


def _text(value: Any) -> str | None:
    return value[:_TEXT] if isinstance(value, str) else None


def compare(
    findings: Sequence[Finding],
    summary: Mapping[str, Any],
    previous: Mapping[str, Any],
    source: str,
) -> Comparison:
    prev: dict[str, Mapping[str, Any]] = {}
    for f in previous.get("findings", []):
        if isinstance(f, Mapping):
            prev.setdefault(_fp(f), f)
    status: dict[str, str] = {}
    prev_hours: dict[str, float] = {}
    for f in findings:
        fp = f.fingerprint()
        old = prev.get(fp)
        if old is None:
            status[fp] = NEW
            continue
        impact = old.get("impact") if isinstance(old.get("impact"), Mapping) else {}
        assert isinstance(impact, Mapping)
        oh = _num(impact.get("gpu_hours")) or 0.0
        prev_hours[fp] = oh
        try:
            old_rank = Severity.parse(str(old.get("severity", "info"))).rank
        except ValueError:
            old_rank = 0
        gh = f.impact.gpu_hours
        if f.severity.rank > old_rank or gh > oh * 1.1 and gh - oh >= 1:
            status[fp] = WORSE
        elif f.severity.rank < old_rank or gh < oh * 0.9 and oh - gh >= 1:
            status[fp] = IMPROVED
        else:
            status[fp] = UNCHANGED
    current = set(status)
    resolved = tuple(_resolved(f) for fp, f in sorted(prev.items()) if fp not in current)
    psum = previous.get("summary") if isinstance(previous.get("summary"), Mapping) else {}
    assert isinstance(psum, Mapping)
    delta: dict[str, dict[str, float | None]] = {}
    for key in SUMMARY_KEYS:
        now, before = _num(summary.get(key)), _num(psum.get(key))
        delta[key] = {
            "now": now,
            "before": before,
            "change": None if now is None or before is None else round(now - before, 4),
        }
    return Comparison(
        source, str(previous.get("generated_at", "")), status, prev_hours, resolved, delta
    )
