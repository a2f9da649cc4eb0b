"""The Kubernetes source: pods, nodes and gang-scheduling objects, exactly as the API answers.

`collect` lists every resource gpuaudit knows (`resources.RESOURCES`) and returns the list
responses page by page, untouched, for a snapshot's `kubernetes` section, plus a status per
resource for the manifest's `objects` (see `reader`). It connects as `connect` describes.

Credentials stay out of everything `collect` returns or raises (see `redact`).

Pods are required: when they cannot be listed at all, or the credentials are refused, `collect`
raises `SourceError` with one line. Nodes are required too, except that a 403 on nodes (common
for namespace-scoped accounts) is recorded and the scan goes on. Everything else is optional.
"""

from __future__ import annotations

import dataclasses
import logging
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

from gpuaudit.core.errors import ConfigError
from gpuaudit.sources.bounds import Limits
from gpuaudit.sources.interface import Source, Window
from gpuaudit.sources.kubernetes.connect import connect
from gpuaudit.sources.kubernetes.pager import KeepPage, KubeCollection, Reader

DEFAULT_PAGE_SIZE = 500
DEFAULT_TIMEOUT_S = 60.0
"""Seconds one request may take when `collect` is called without `timeout_s` or `limits`
(a live scan passes `--timeout`)."""


class KubernetesSource(Source[KubeCollection]):
    """The Kubernetes API of one cluster, read as `collect` reads it."""

    name = "kubernetes"

    def __init__(
        self,
        kubeconfig: Path | None,
        context: str | None,
        namespaces: Sequence[str] = (),
        on_progress: Callable[[str], None] | None = None,
        *,
        limits: Limits | None = None,
        keep_page: KeepPage | None = None,
        origin: str | None = None,
    ) -> None:
        self.kubeconfig, self.context, self.namespaces = kubeconfig, context, namespaces
        self.limits, self.keep_page = limits, keep_page
        self.on_progress = on_progress
        self.origin = origin
        """Who named `kubeconfig` (`--kubeconfig`, its variable, the config file's key)."""

    def collect(self, window: Window) -> KubeCollection:
        """The objects as they are now (the API keeps no history, so `window` does not narrow
        them)."""
        return collect(
            self.kubeconfig,
            self.context,
            self.namespaces,
            on_progress=self.on_progress,
            limits=self.limits,
            keep_page=self.keep_page,
            origin=self.origin,
        )


def collect(
    kubeconfig: Path | None,
    context: str | None,
    namespaces: Sequence[str] = (),
    page_size: int = DEFAULT_PAGE_SIZE,
    on_progress: Callable[[str], None] | None = None,
    timeout_s: float | None = None,
    *,
    limits: Limits | None = None,
    keep_page: KeepPage | None = None,
    origin: str | None = None,
) -> KubeCollection:
    """List every resource in `RESOURCES` and return the raw pages with a status per resource.

    `kubeconfig` and `context` pick the cluster (`None`: `$KUBECONFIG`, else `~/.kube/config`,
    else the pod's service account when running in a cluster). With `namespaces`, namespaced
    resources are listed in those namespaces only; cluster-scoped ones (nodes, PriorityClasses,
    ClusterQueues) are always listed whole. `on_progress` gets a short line after every page.
    `limits` bound each request's time (`timeout_s`, when given, overrides it; else
    `DEFAULT_TIMEOUT_S` without `limits`) and answer size, and the objects of each resource.
    `keep_page(key, page)` is what is kept of each page (the page itself by default).
    `origin` is who named `kubeconfig`, as messages name it (`--kubeconfig` when not given).

    Raises `SourceError` (one line) when the kubeconfig cannot be used, the cluster cannot be
    reached, the credentials are refused (401), or pods or nodes cannot be listed; a 403 on
    nodes is the exception, recorded as `forbidden: ...` like any optional resource. Raises
    `ConfigError` for a page size that is not a positive whole number. `namespaces` and the
    timeout are taken as given: `gpuaudit.app.config` checks `--namespace` and `--timeout`.
    """
    scopes = _scopes(namespaces)
    if isinstance(page_size, bool) or not isinstance(page_size, int) or page_size < 1:
        raise ConfigError(f"page size must be a positive whole number, got {page_size!r}")
    bounds = limits or Limits(timeout_s=DEFAULT_TIMEOUT_S)
    if timeout_s is not None:
        bounds = dataclasses.replace(bounds, timeout_s=timeout_s)
    conn = connect(kubeconfig, context, origin)
    out = KubeCollection(cluster=conn.cluster, server=conn.server)
    if conn.server.startswith("http://"):
        out.warnings.append(
            f"The Kubernetes API at {conn.server} is plain HTTP: "
            "credentials and objects travel unencrypted."
        )
    pool_log = logging.getLogger("urllib3.connectionpool")
    quiet = _NoRetryNoise()
    pool_log.addFilter(quiet)
    try:
        from urllib3.exceptions import InsecureRequestWarning

        with warnings.catch_warnings():
            if not conn.verify_tls:
                out.warnings.append(
                    f"TLS certificates of {conn.server} are not verified "
                    "(insecure-skip-tls-verify is set in the kubeconfig)."
                )
                # Said once above instead of once per request.
                warnings.simplefilter("ignore", InsecureRequestWarning)
            Reader(conn, scopes, page_size, bounds, on_progress, out, keep_page).run()
    finally:
        pool_log.removeFilter(quiet)
        conn.api.close()
    return out


class _NoRetryNoise(logging.Filter):
    """Drops urllib3's per-retry warnings: without logging set up they would land on stderr
    as raw lines, and the outcome of a failed request is reported by `collect` anyway."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Retrying")


def _scopes(namespaces: Sequence[str]) -> list[str | None]:
    """`[None]` (all namespaces) or the distinct namespaces asked for, in order."""
    if isinstance(namespaces, str):
        namespaces = [namespaces]
    chosen: list[str | None] = []
    for ns in namespaces:
        if ns not in chosen:
            chosen.append(ns)
    return chosen or [None]
