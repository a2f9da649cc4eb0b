"""A live collection: Prometheus first, then the Kubernetes API when it can be reached.

`collect` returns the raw answers of both sources with what the manifest records about them
(`LiveCollection`); `gpuaudit.snapshot.collect_live` turns that into a snapshot. Progress is
reported through the callable passed in, and each Prometheus answer is kept as the `keep`
passed in decides (as the API returned it, by default).

Kubernetes is read when a kubeconfig or the in-cluster service account is around (or asked for
with `--kubeconfig`/`--context`), unless `--no-kubernetes`. When it was not asked for and cannot
be read, the scan goes on without it and says why; when it was asked for, that is an error.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from gpuaudit.errors import ConfigError, GpuauditError
from gpuaudit.progress import SILENT, Progress
from gpuaudit.redact import url_for_display
from gpuaudit.sources.interface import Window, make_window
from gpuaudit.sources.kubernetes.connect import connect
from gpuaudit.sources.kubernetes.source import KubernetesSource
from gpuaudit.sources.prometheus.client import PromClient, PromConfig
from gpuaudit.sources.prometheus.planner import Keep, keep_body
from gpuaudit.sources.prometheus.source import PromCollection, PrometheusSource


@dataclass(frozen=True)
class LiveOptions:
    """Everything a live collection needs, from flags and the environment."""

    prometheus_url: str
    token: str | None = None
    token_file: Path | None = None
    user: str | None = None
    password: str | None = None
    headers: tuple[str, ...] = ()
    """Extra HTTP headers as `Name: value`."""
    ca_file: Path | None = None
    client_cert: Path | None = None
    client_key: Path | None = None
    insecure: bool = False
    cluster_label: str | None = None
    """`NAME=VALUE`: read only the series with this label (one cluster of a shared backend)."""
    timeout: float = 120.0
    kubeconfig: Path | None = None
    context: str | None = None
    namespaces: tuple[str, ...] = ()
    no_kubernetes: bool = False


@dataclass(frozen=True)
class LiveCollection:
    """The raw answers of one live collection and what the manifest records about them."""

    window: Window
    cluster: str
    """The `--cluster-label` value, else the Kubernetes context, else the Prometheus URL."""
    prometheus_url: str
    """The Prometheus URL as recorded: without credentials, query or fragment."""
    prometheus: PromCollection
    kubernetes: dict[str, list[dict[str, Any]]]
    """Resource key -> the list response pages, as the API server sent them."""
    objects: dict[str, str]
    """Resource key -> `"ok"` or why not (`not read: ...` when Kubernetes was not read)."""
    warnings: list[str]
    """The backend's warnings, then the Kubernetes ones."""
    incomplete_reasons: list[str]
    """Why the answers may be incomplete: partial Prometheus answers, then Kubernetes lists
    that were forbidden, failed or cut short."""


def collect(
    live: LiveOptions,
    window_s: int,
    step_s: int,
    end: float | None,
    *,
    progress: Progress = SILENT,
    keep: Keep = keep_body,
) -> LiveCollection:
    """Collect from Prometheus, then from the Kubernetes API when it is reachable. Raises
    `ConfigError` for unusable options and `SourceError` when a source that must be read
    cannot be. Both sources are checked before either is read (`preflight`), so that a wrong
    `--kubeconfig` is reported before a long Prometheus collection, not after it."""
    cluster_label = parse_cluster_label(live.cluster_label)
    cfg = PromConfig(
        url=live.prometheus_url,
        token=live.token,
        token_file=live.token_file,
        username=live.user,
        password=live.password,
        headers=parse_headers(live.headers),
        ca_file=live.ca_file,
        client_cert=live.client_cert,
        client_key=live.client_key,
        insecure_skip_tls_verify=live.insecure,
        timeout_s=live.timeout,
    )
    url = check_url(live.prometheus_url)
    w = make_window(window_s, step_s, end)
    preflight(live)
    with PromClient(cfg) as client, progress.stage("querying Prometheus", "queries") as tick:
        prom = PrometheusSource(client, cluster_label, tick, keep).collect(w)
    with progress.stage("listing Kubernetes objects") as stage:
        kube, objects, warnings, kube_cluster = _kubernetes(live, w, stage.note)
    reasons = list(prom.incomplete_reasons)
    for key, state in sorted(objects.items()):
        if state.startswith(("forbidden", "failed", "incomplete")):
            reasons.append(f"Kubernetes {key}: {state}")
    cluster = (cluster_label[1] if cluster_label else "") or kube_cluster
    return LiveCollection(
        window=w,
        cluster=cluster or url,
        prometheus_url=url,
        prometheus=prom,
        kubernetes=kube,
        objects=objects,
        warnings=prom.warnings + warnings,
        incomplete_reasons=reasons,
    )


def check_url(url: str) -> str:
    """The Prometheus URL as messages show it, once it is known to be usable: http or https,
    with a host. Raises `ConfigError` otherwise."""
    shown = display_url(url)
    if not shown.startswith(("http://", "https://")):
        raise ConfigError(f"--prometheus-url must start with http:// or https://, got {shown!r}")
    try:
        host = httpx.URL(url.strip()).host
    except Exception:  # noqa: BLE001 - httpx raises several types for a malformed URL
        host = ""
    if not host:
        raise ConfigError(f"--prometheus-url {shown!r} is not a well-formed URL with a host")
    return shown


def preflight(live: LiveOptions) -> None:
    """Check, without any request, what can be checked before the collection starts: the
    kubeconfig is readable and holds the context asked for. Raises `SourceError` when
    Kubernetes was asked for (`--kubeconfig`, `--context`) and cannot be used; when it was
    only found lying around, `collect` goes on without it and says why."""
    if not _use_kubernetes(live) or not (live.kubeconfig or live.context):
        return
    conn = connect(live.kubeconfig, live.context)
    conn.api.close()


def _kubernetes(
    live: LiveOptions, w: Window, note: Callable[[str], None]
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, str], list[str], str]:
    """The Kubernetes pages, the status per resource, the warnings and the context name;
    `note` gets a short line after every page."""
    if not _use_kubernetes(live):
        why = (
            "not read: --no-kubernetes"
            if live.no_kubernetes
            else "not read: no kubeconfig or in-cluster service account (use --kubeconfig)"
        )
        return {}, {"pods": why, "nodes": why}, [], ""
    explicit = bool(live.kubeconfig or live.context)
    try:
        source = KubernetesSource(live.kubeconfig, live.context, live.namespaces, on_progress=note)
        kc = source.collect(w)
    except ConfigError:
        raise
    except GpuauditError as exc:
        if explicit:
            raise
        why = f"not read: {exc}"
        return {}, {"pods": why, "nodes": why}, [f"the Kubernetes API was not read: {exc}"], ""
    return kc.kubernetes, kc.objects, list(kc.warnings), kc.cluster


def parse_cluster_label(text: str | None) -> tuple[str, str] | None:
    if not text:
        return None
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise ConfigError("--cluster-label must be NAME=VALUE")
    return name.strip(), value.strip()


def parse_headers(raw: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for h in raw:
        name, sep, value = h.partition(":")
        if not sep or not name.strip():
            raise ConfigError(f"--header {h.split(':')[0]!r}...: use 'Name: value'")
        out[name.strip()] = value.strip()
    return out


def _use_kubernetes(live: LiveOptions) -> bool:
    if live.no_kubernetes:
        return False
    if live.kubeconfig or live.context or os.environ.get("KUBERNETES_SERVICE_HOST"):
        return True
    if os.environ.get("KUBECONFIG"):
        return True
    return (Path.home() / ".kube" / "config").is_file()


def display_url(url: str) -> str:
    """The Prometheus URL as messages and the manifest show it: normalised as httpx reads it
    (scheme and host in lower case, a default port left out, non-ASCII encoded), then made safe
    by the one redactor (no credentials, query or fragment)."""
    try:
        normal = str(httpx.URL(url.strip()))
    except Exception:  # noqa: BLE001 - an unparsable URL is shown as given, made safe
        normal = url
    return url_for_display(normal)
