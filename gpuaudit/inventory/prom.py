"""Parse recorded Prometheus answers into per-series rows with normalised DCGM identities.

Label spellings accepted (REFERENCE.md §0-1): `exported_pod`/`exported_namespace`/
`exported_container` (Helm default, where `pod` names the exporter itself), `pod`/`namespace`/
`container`, the old `pod_name`/`pod_namespace`/`container_name`; `UUID` or `uuid`; `Hostname`,
`hostname` or a relabelled `node`. An absent or empty pod label means "not held".
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from gpuaudit.errors import SnapshotError

_EXPORTER_RE = re.compile(r"dcgm-exporter|dcgm_exporter", re.IGNORECASE)


@dataclass(frozen=True)
class Identity:
    """Who a series is about: one GPU or MIG instance, and its holder if any."""

    slot: str
    uuid: str
    gpu_index: str
    mig_id: str
    mig_profile: str
    model: str
    host: str
    instance: str
    namespace: str
    pod: str
    container: str

    @property
    def held(self) -> bool:
        return bool(self.pod)


def detect_spelling(answers: Iterable[Mapping[str, Any]]) -> str:
    """`exported` when any series carries `exported_pod`, else `pod`."""
    for body in answers:
        data = body.get("data") if isinstance(body, Mapping) else None
        result = data.get("result") if isinstance(data, Mapping) else None
        if not isinstance(result, list):
            continue
        for item in result:
            metric = item.get("metric") if isinstance(item, Mapping) else None
            if isinstance(metric, Mapping) and "exported_pod" in metric:
                return "exported"
    return "pod"


def _s(labels: Mapping[str, Any], *names: str) -> str:
    for n in names:
        v = labels.get(n)
        if isinstance(v, str) and v:
            return v
    return ""


def identity(labels: Mapping[str, Any], spelling: str) -> Identity:
    """Normalise one series' labels."""
    uuid = _s(labels, "UUID", "uuid")
    gpu = _s(labels, "gpu")
    mig_id = _s(labels, "GPU_I_ID")
    host = _s(labels, "node", "Hostname", "hostname", "kubernetes_node")
    if spelling == "exported":
        pod = _s(labels, "exported_pod")
        ns = _s(labels, "exported_namespace")
        container = _s(labels, "exported_container")
    else:
        pod = _s(labels, "pod", "pod_name")
        ns = _s(labels, "namespace", "pod_namespace")
        container = _s(labels, "container", "container_name")
        # An unallocated GPU scraped with target labels attached shows the exporter as `pod`.
        if _EXPORTER_RE.search(pod) or _EXPORTER_RE.search(container):
            pod = ns = container = ""
    base = uuid or f"{host}:gpu{gpu}"
    slot = f"{base}/{mig_id}" if mig_id else base
    return Identity(
        slot=slot,
        uuid=uuid,
        gpu_index=gpu,
        mig_id=mig_id,
        mig_profile=_s(labels, "GPU_I_PROFILE"),
        model=_s(labels, "modelName", "model_name"),
        host=host,
        instance=_s(labels, "instance"),
        namespace=ns if pod else "",
        pod=pod,
        container=container if pod else "",
    )


def _result(body: Any, expected: str, where: str) -> list[Any]:
    if not isinstance(body, Mapping):
        raise SnapshotError(f"{where}: answer is not a JSON object")
    if body.get("status") != "success":
        err = body.get("error", "no error text")
        raise SnapshotError(f"{where}: Prometheus answered status {body.get('status')!r}: {err}")
    data = body.get("data")
    if not isinstance(data, Mapping):
        raise SnapshotError(f"{where}: answer has no data object")
    rtype = data.get("resultType")
    if rtype != expected:
        raise SnapshotError(f"{where}: expected resultType {expected!r}, got {rtype!r}")
    result = data.get("result")
    if not isinstance(result, list):
        raise SnapshotError(f"{where}: data.result is not a list")
    return result


def _value(raw: Any) -> float | None:
    """A sample value as Prometheus encodes it ([ts, "str"]); None for unusable values."""
    if not isinstance(raw, (list, tuple)) or len(raw) != 2:
        return None
    try:
        v = float(raw[1])
    except (TypeError, ValueError):
        return None
    if math.isnan(v) or math.isinf(v):
        return None
    return v


@dataclass
class ParseStats:
    """Bad data left out while parsing, counted so it can be reported."""

    dropped_values: int = 0
    malformed_series: int = 0


def vector(body: Any, where: str, stats: ParseStats) -> list[tuple[Mapping[str, Any], float]]:
    """Rows of an instant-vector answer; unusable values are left out and counted."""
    out: list[tuple[Mapping[str, Any], float]] = []
    for item in _result(body, "vector", where):
        metric = item.get("metric") if isinstance(item, Mapping) else None
        if not isinstance(metric, Mapping):
            stats.malformed_series += 1
            continue
        v = _value(item.get("value"))
        if v is None:
            stats.dropped_values += 1
            continue
        out.append((metric, v))
    return out


def matrix(
    body: Any, where: str, stats: ParseStats
) -> list[tuple[Mapping[str, Any], list[tuple[float, float]]]]:
    """Rows of a range-vector answer; unusable points are left out and counted."""
    out: list[tuple[Mapping[str, Any], list[tuple[float, float]]]] = []
    for item in _result(body, "matrix", where):
        metric = item.get("metric") if isinstance(item, Mapping) else None
        values = item.get("values") if isinstance(item, Mapping) else None
        if not isinstance(metric, Mapping) or not isinstance(values, list):
            stats.malformed_series += 1
            continue
        pts: list[tuple[float, float]] = []
        for raw in values:
            v = _value(raw)
            if v is None:
                stats.dropped_values += 1
                continue
            try:
                ts = float(raw[0])
            except (TypeError, ValueError):
                stats.dropped_values += 1
                continue
            pts.append((ts, v))
        out.append((metric, pts))
    return out


def matrix_arrays(
    body: Any, where: str, stats: ParseStats
) -> list[tuple[Mapping[str, Any], Any, Any]]:
    """Like `matrix`, but each series' points as two float64 numpy arrays (timestamps, values);
    unusable points are left out and counted. Vectorised: large answers parse in C."""
    import numpy as np

    out: list[tuple[Mapping[str, Any], Any, Any]] = []
    for item in _result(body, "matrix", where):
        metric = item.get("metric") if isinstance(item, Mapping) else None
        values = item.get("values") if isinstance(item, Mapping) else None
        if not isinstance(metric, Mapping) or not isinstance(values, list):
            stats.malformed_series += 1
            continue
        try:
            ts = np.array([p[0] for p in values], dtype=np.float64)
            vs = np.array([p[1] for p in values], dtype=np.float64)
        except (TypeError, ValueError, IndexError, KeyError):
            pts = matrix(
                {"status": "success", "data": {"resultType": "matrix", "result": [item]}},
                where,
                stats,
            )
            if not pts:
                continue
            ts = np.array([t for t, _ in pts[0][1]], dtype=np.float64)
            vs = np.array([v for _, v in pts[0][1]], dtype=np.float64)
            out.append((metric, ts, vs))
            continue
        ok = np.isfinite(vs) & np.isfinite(ts)
        bad = int((~ok).sum())
        if bad:
            stats.dropped_values += bad
            ts, vs = ts[ok], vs[ok]
        out.append((metric, ts, vs))
    return out
