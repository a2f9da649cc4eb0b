"""A live collection: Prometheus first, then the Kubernetes API when it can be reached.

`collect` returns the raw answers of both sources with what the manifest records about them
(`LiveCollection`); `gpuaudit.snapshot.collect_live` turns that into a snapshot. Progress is
reported through the callable passed in, and each Prometheus answer is kept as the `keep`
passed in decides (as the API returned it, by default).

Kubernetes is read when anything asks for it (`--kubeconfig` by flag, variable or config file,
`--context`, the `KUBECONFIG` variable, a `~/.kube/config`, or a pod's service account: see
`connect.asked`), unless `--no-kubernetes`; then a kubeconfig that cannot be used, or an API
server that cannot be read, is an error (checked before Prometheus is read, where it can be: see
`preflight`), never a scan without it. Only when nothing asks for it does the scan go on without
it, and the manifest says why (`NOT_ASKED`).

A scan of every cluster of a central backend (`--cluster-label NAME`, no value) never reads
Kubernetes: one kubeconfig context is one cluster, and its objects cannot be joined to the
series of the others. Asking for it there (`--kubeconfig`, `--context`, `--namespace`) is
refused by the resolver (`gpuaudit.app.config`); a kubeconfig merely lying around is left
unread, and the manifest says why. To join one cluster's API server, name that cluster
(`NAME=VALUE`).

The options arrive checked (`LiveOptions`, made by `gpuaudit.app.config`, the one place an option
is checked): a collection takes them as they are. What it checks is what only the sources can
tell (a kubeconfig that cannot be read, a step shorter than the scrape interval).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuaudit.core.errors import ConfigError
from gpuaudit.core.progress import SILENT, Progress
from gpuaudit.core.redact import url_for_display
from gpuaudit.sources.bounds import Limits
from gpuaudit.sources.interface import Window, make_window
from gpuaudit.sources.kubernetes.connect import asked, connect
from gpuaudit.sources.kubernetes.kubesource import KubernetesSource
from gpuaudit.sources.prometheus.catalogue import ClusterLabel
from gpuaudit.sources.prometheus.http import PromClient, PromConfig, check_headers
from gpuaudit.sources.prometheus.planner import Keep, keep_body
from gpuaudit.sources.prometheus.promsource import PromCollection, PrometheusSource


@dataclass(frozen=True)
class LiveOptions:
    """Everything a live collection needs, from flags, the environment and `gpuaudit.toml`,
    each value checked and typed by `gpuaudit.app.config`."""

    prometheus_url: str
    """An http or https URL with a host (`check_url`)."""
    token: str | None = None
    token_file: Path | None = None
    user: str | None = None
    password: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    """Extra HTTP headers, name -> value, as `parse_headers` read and checked them."""
    ca_file: Path | None = None
    client_cert: Path | None = None
    client_key: Path | None = None
    insecure: bool = False
    cluster_label: ClusterLabel | None = None
    """`NAME=VALUE`: read only the series with this label (one cluster of a shared backend);
    `NAME`: read every cluster at once, kept apart by the label."""
    limits: Limits = field(default_factory=Limits)
    """The bounds of the collection: time of a request, size of an answer, objects of a list,
    queries and queries in flight."""
    kubeconfig: Path | None = None
    kubeconfig_origin: str | None = None
    """Who set `kubeconfig`, as messages name it: `--kubeconfig`, `GPUAUDIT_KUBECONFIG
    (--kubeconfig)` or the config file's key (None: `--kubeconfig`)."""
    context: str | None = None
    namespaces: tuple[str, ...] = ()
    """Namespace names, each once: the Kubernetes objects of these namespaces only."""
    no_kubernetes: bool = False


@dataclass(frozen=True)
class LiveCollection:
    """The raw answers of one live collection and what the manifest records about them."""

    window: Window
    cluster: str
    """The `--cluster-label` value, else the Kubernetes context, else the Prometheus URL; for a
    scan of every cluster, `N clusters by <label>`."""
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
    kubernetes_version: str = ""
    """The API server's version (`v1.31.4`); empty when it was not read or did not say."""


def collect(
    live: LiveOptions,
    window_s: int,
    step_s: int,
    end: float | None,
    *,
    progress: Progress = SILENT,
    keep: Keep = keep_body,
    keep_page: KeepPage | None = None,
) -> LiveCollection:
    """Collect from Prometheus, then from the Kubernetes API when it is reachable. Raises
    `SourceError` when a source that must be read cannot be, and `ConfigError` for a step
    shorter than the scrape interval the backend shows. `keep_page(resource key, page)` is
    what is kept of each Kubernetes list page (the page as the API sent it, by default). Both
    sources are checked before either is read (`preflight`), so that a wrong `--kubeconfig` is
    reported before a long Prometheus collection, not after it."""
    cluster_label, limits = live.cluster_label, live.limits
    cfg = PromConfig(
        url=live.prometheus_url,
        token=live.token,
        token_file=live.token_file,
        username=live.user,
        password=live.password,
        headers=live.headers,
        ca_file=live.ca_file,
        client_cert=live.client_cert,
        client_key=live.client_key,
        insecure_skip_tls_verify=live.insecure,
        timeout_s=limits.timeout_s,
        max_answer_bytes=limits.answer_bytes,
    )
    url = display_url(live.prometheus_url)
    w = make_window(window_s, step_s, end)
    preflight(live)
    with PromClient(cfg) as client, progress.stage("querying Prometheus", "queries") as tick:
        prom = PrometheusSource(
            client, cluster_label, tick, keep, limits.queries, limits.parallel
        ).collect(w)
    # Moved to end on the hourly rules' last evaluation, where they cover the window.
    w = prom.window or w
    with progress.stage("listing Kubernetes objects") as stage:
        kube, objects, warnings, kube_cluster, version = _kubernetes(
            live, w, limits, keep_page, stage.note
        )
    reasons = list(prom.incomplete_reasons)
    for key, state in sorted(objects.items()):
        if state.startswith(("forbidden", "failed", "incomplete")):
            reasons.append(f"Kubernetes {key}: {state}")
    if cluster_label and cluster_label.grouped:
        n = len(prom.capabilities.clusters)
        many = f"{n} cluster{'' if n == 1 else 's'}" if n else "every cluster"
        cluster = f"{many} by {cluster_label.name}"
    else:
        cluster = (cluster_label.value if cluster_label else "") or kube_cluster
    return LiveCollection(
        window=w,
        cluster=cluster or url,
        prometheus_url=url,
        prometheus=prom,
        kubernetes=kube,
        objects=objects,
        warnings=prom.warnings + warnings,
        incomplete_reasons=reasons,
        kubernetes_version=version,
    )


KeepPage = Callable[[str, dict[str, Any]], dict[str, Any]]
"""What is kept of one Kubernetes list page, given its resource key and the page."""


def check_url(url: str) -> str:
    """`--prometheus-url` checked (`gpuaudit.app.config` calls it, once): http or https, with a
    host; `ConfigError` otherwise. Returns the URL as messages show it."""
    import httpx

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
    kubeconfig (or the service account) that asks for Kubernetes can be used and holds the
    context asked for. Raises `SourceError` when it cannot."""
    if not _use_kubernetes(live):
        return
    conn = connect(live.kubeconfig, live.context, live.kubeconfig_origin)
    conn.api.close()


NOT_ASKED = "not read: no kubeconfig or in-cluster service account (use --kubeconfig)"
"""The state of the Kubernetes lists when nothing asked for the API."""
_UNREAD = re.compile(
    r"(?:^|; |: |\()(?:forbidden: |failed: |not read: "
    r"(?!--no-kubernetes|--cluster-label |no kubeconfig or in-cluster service account))"
)


def unread(text: str) -> bool:
    """Whether `text`, a Kubernetes list's state (the manifest's `objects`) or a skipped
    check's reason that quotes such states, says that a source that was asked for could not be
    read: a list the API server refused (`forbidden: ...`) or failed to give (`failed: ...`),
    or the API not read for an error (as a collection before this rule recorded it: `not read:
    <error>`). Not a list the cluster does not serve (`absent: ...`), nor the API left unread by
    choice (`--no-kubernetes`, a scan of every cluster) or because nothing asked for it
    (`NOT_ASKED`)."""
    return _UNREAD.search(text) is not None


def _kubernetes(
    live: LiveOptions,
    w: Window,
    limits: Limits,
    keep_page: KeepPage | None,
    note: Callable[[str], None],
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, str], list[str], str, str]:
    """The Kubernetes pages, the status per resource, the warnings, the context name and the
    server's version; `note` gets a short line after every page."""
    if not _use_kubernetes(live):
        if live.no_kubernetes:
            why = "not read: --no-kubernetes"
        elif _every_cluster(live):
            label = live.cluster_label.name if live.cluster_label else ""
            why = (
                f"not read: --cluster-label {label} audits every cluster, and one "
                "kubeconfig context is one cluster"
            )
        else:
            why = NOT_ASKED
        return {}, {"pods": why, "nodes": why}, [], "", ""
    source = KubernetesSource(
        live.kubeconfig,
        live.context,
        live.namespaces,
        on_progress=note,
        limits=limits,
        keep_page=keep_page,
        origin=live.kubeconfig_origin,
    )
    kc = source.collect(w)
    return kc.kubernetes, kc.objects, list(kc.warnings), kc.cluster, kc.server_version


def _every_cluster(live: LiveOptions) -> bool:
    return live.cluster_label is not None and live.cluster_label.grouped


def parse_headers(raw: tuple[str, ...]) -> dict[str, str]:
    """`--header 'Name: value'` entries (in `GPUAUDIT_HEADER`, one per line) checked and read
    into a mapping (`gpuaudit.app.config` calls it, once). An entry that cannot be read is one
    `ConfigError` that names the entry by its place and the header by its name, never by its
    value, which may be a credential."""
    out: dict[str, str] = {}
    for i, h in enumerate(raw, 1):
        if not h.strip():
            continue
        name, sep, value = h.partition(":")
        if not sep or not name.strip():
            raise ConfigError(
                f"--header number {i} has no ':' between name and value (its text is not "
                "shown, it may hold a secret); write 'Name: value', and in GPUAUDIT_HEADER "
                "one header per line"
            )
        out[name.strip()] = value
    return check_headers(out)


def _use_kubernetes(live: LiveOptions) -> bool:
    if live.no_kubernetes or _every_cluster(live):
        return False
    return asked(live.kubeconfig, live.context)


def display_url(url: str) -> str:
    """The Prometheus URL as messages and the manifest show it: normalised as httpx reads it
    (scheme and host in lower case, a default port left out, non-ASCII encoded), then made safe
    by the one redactor (no credentials, query or fragment)."""
    import httpx

    try:
        normal = str(httpx.URL(url.strip()))
    except Exception:  # noqa: BLE001 - an unparsable URL is shown as given, made safe
        normal = url
    return url_for_display(normal)
