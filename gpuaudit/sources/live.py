"""A live collection: Prometheus (and the Kubernetes API when reachable) into one snapshot.

Moved out of the command line as it was; the caller passes progress in as a callable.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from gpuaudit.collect import build_snapshot, collect_prometheus, make_window
from gpuaudit.errors import ConfigError, GpuauditError
from gpuaudit.snapshot import Snapshot
from gpuaudit.sources.kubernetes import collect as kube_collect
from gpuaudit.sources.prometheus import PromClient, PromConfig


@dataclass(frozen=True)
class LiveOptions:
    """Everything a live collection needs, from flags and the environment."""

    prometheus_url: str
    token: str | None = None
    token_file: Path | None = None
    user: str | None = None
    password: str | None = None
    headers: tuple[str, ...] = ()
    ca_file: Path | None = None
    client_cert: Path | None = None
    client_key: Path | None = None
    insecure: bool = False
    cluster_label: str | None = None
    timeout: float = 120.0
    kubeconfig: Path | None = None
    context: str | None = None
    namespaces: tuple[str, ...] = ()
    no_kubernetes: bool = False


def parse_headers(raw: tuple[str, ...]) -> dict[str, str]:
    """`--header 'Name: value'` entries as a mapping."""
    out: dict[str, str] = {}
    for h in raw:
        name, sep, value = h.partition(":")
        if not sep or not name.strip():
            raise ConfigError(f"--header {h.split(':')[0]!r}...: use 'Name: value'")
        out[name.strip()] = value.strip()
    return out


def parse_cluster_label(text: str | None) -> tuple[str, str] | None:
    """`--cluster-label NAME=VALUE` as a pair; None when not given."""
    if not text:
        return None
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise ConfigError("--cluster-label must be NAME=VALUE")
    return (name.strip(), value.strip())


def _use_kubernetes(live: LiveOptions) -> bool:
    if live.no_kubernetes:
        return False
    if live.kubeconfig or live.context or os.environ.get("KUBERNETES_SERVICE_HOST"):
        return True
    if os.environ.get("KUBECONFIG"):
        return True
    return (Path.home() / ".kube" / "config").is_file()


def collect_live(
    live: LiveOptions,
    window_s: int,
    step_s: int,
    end: float | None,
    *,
    as_arrays: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> Snapshot:
    """Collect a snapshot from Prometheus (and the Kubernetes API when reachable); `as_arrays`
    for a scan: answers parsed as they arrive, no raw text kept. `progress(done, total)` is
    called as queries complete."""
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
    url = httpx_url_for_display(live.prometheus_url)
    if not url.startswith(("http://", "https://")):
        raise ConfigError(f"--prometheus-url must start with http:// or https://, got {url!r}")
    w = make_window(window_s, step_s, end)
    with PromClient(cfg) as client:
        answers, fields = collect_prometheus(
            client, w, cluster_label, progress=progress, as_arrays=as_arrays
        )
    kube: dict[str, list[dict[str, Any]]] = {}
    objects: dict[str, str] = {}
    warnings: list[str] = []
    cluster = cluster_label[1] if cluster_label else ""
    if _use_kubernetes(live):
        explicit = bool(live.kubeconfig or live.context)
        try:
            kc = kube_collect(live.kubeconfig, live.context, live.namespaces)
            kube, objects, warnings = kc.kubernetes, kc.objects, list(kc.warnings)
            cluster = cluster or kc.cluster
        except ConfigError:
            raise
        except GpuauditError as exc:
            if explicit:
                raise
            warnings.append(f"the Kubernetes API was not read: {exc}")
            objects = {"pods": f"not read: {exc}", "nodes": f"not read: {exc}"}
    else:
        why = (
            "not read: --no-kubernetes"
            if live.no_kubernetes
            else "not read: no kubeconfig or in-cluster service account (use --kubeconfig)"
        )
        objects = {"pods": why, "nodes": why}
    for key, state in sorted(objects.items()):
        if state.startswith(("forbidden", "failed", "incomplete")):
            fields.setdefault("incomplete_reasons", []).append(f"Kubernetes {key}: {state}")
    return build_snapshot(answers, fields, w, cluster or url, url, kube, objects, warnings)


def httpx_url_for_display(url: str) -> str:
    """A URL without credentials or query string, safe to print and record."""
    try:
        u = httpx.URL(url.strip())
    except Exception:  # noqa: BLE001 - any unparsable URL is a usage error below
        return url.split("?")[0].split("@")[-1]
    return str(u.copy_with(username=None, password=None, query=None, fragment=None))
