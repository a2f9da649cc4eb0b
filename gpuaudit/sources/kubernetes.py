"""Read pods, nodes and gang-scheduling objects from the Kubernetes API, exactly as it answers.

`collect` lists every resource gpuaudit knows (see `RESOURCES`) and returns the list responses
page by page, untouched, for a snapshot's `kubernetes` section, plus a status per resource for
the manifest's `objects`: `"ok"`, `"absent: ..."` (the API is not served), `"forbidden: ..."`
(RBAC said no), `"failed: ..."` (another error) or `"incomplete: ..."` (a list that could not
be finished; its pages so far are kept).

It talks to the API server through the official `kubernetes` client, configured from a
kubeconfig (`--kubeconfig`, else `$KUBECONFIG`, else `~/.kube/config`) or, inside a pod with no
kubeconfig, from the pod's service account. Only GET requests are made. Lists are paged with
`limit` and `continue`; a continue token that expired (410 Gone) restarts that list.

Credentials stay out of everything `collect` returns or raises: error messages are built from
status codes, the server's `Status` message and the kind of network failure, never from request
headers, and any known secret is blanked from them as a last guard. TLS is verified unless the
kubeconfig itself says `insecure-skip-tls-verify: true`.

Pods are required: when they cannot be listed at all, or the credentials are refused, `collect`
raises `SourceError` with one line. Nodes are required too, except that a 403 on nodes (common
for namespace-scoped accounts) is recorded and the scan goes on. Everything else is optional.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import urlsplit, urlunsplit

from gpuaudit.errors import ConfigError, SourceError

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
"""Where a pod's service-account token and cluster CA are mounted."""

DEFAULT_PAGE_SIZE = 500
DEFAULT_TIMEOUT_S = 60.0
MAX_RESTARTS = 3
"""How often one list is started again after its continue token expired (410 Gone)."""

_CONNECT_TIMEOUT_S = 10.0
_TOKEN_REREAD_S = 60.0
_MAX_MESSAGE = 240
_NAMESPACE_RE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


@dataclass(frozen=True)
class Resource:
    """One kind of object gpuaudit reads from the API server."""

    key: str
    """The key under a snapshot's `kubernetes` and the manifest's `objects`."""
    group: str
    """The API group; `""` for the core group (`/api/v1`)."""
    versions: tuple[str, ...]
    """The versions gpuaudit understands, most preferred first."""
    plural: str
    """The resource name in URLs."""
    namespaced: bool
    """Whether objects live in namespaces (discovery's answer wins when there is one)."""
    title: str
    """What to call the objects in messages."""
    crd: bool = True
    """Whether the resource comes from a CRD (as opposed to Kubernetes itself)."""

    @property
    def required(self) -> bool:
        """Pods and nodes: a scan without them is refused."""
        return self.key in ("pods", "nodes")


RESOURCES: tuple[Resource, ...] = (
    Resource("pods", "", ("v1",), "pods", True, "pods", crd=False),
    Resource("nodes", "", ("v1",), "nodes", False, "nodes", crd=False),
    Resource(
        "priorityclasses",
        "scheduling.k8s.io",
        ("v1",),
        "priorityclasses",
        False,
        "PriorityClasses",
        crd=False,
    ),
    Resource(
        "volcano_podgroups",
        "scheduling.volcano.sh",
        ("v1beta1",),
        "podgroups",
        True,
        "Volcano PodGroups",
    ),
    Resource(
        "coscheduling_podgroups",
        "scheduling.x-k8s.io",
        ("v1alpha1",),
        "podgroups",
        True,
        "coscheduling PodGroups",
    ),
    Resource(
        "kueue_workloads",
        "kueue.x-k8s.io",
        ("v1beta2", "v1beta1"),
        "workloads",
        True,
        "Kueue Workloads",
    ),
    Resource(
        "kueue_clusterqueues",
        "kueue.x-k8s.io",
        ("v1beta2", "v1beta1"),
        "clusterqueues",
        False,
        "Kueue ClusterQueues",
    ),
    Resource(
        "kueue_localqueues",
        "kueue.x-k8s.io",
        ("v1beta2", "v1beta1"),
        "localqueues",
        True,
        "Kueue LocalQueues",
    ),
    Resource("pytorchjobs", "kubeflow.org", ("v1",), "pytorchjobs", True, "PyTorchJobs"),
    Resource("mpijobs", "kubeflow.org", ("v2beta1", "v1"), "mpijobs", True, "MPIJobs"),
    Resource("jobsets", "jobset.x-k8s.io", ("v1alpha2",), "jobsets", True, "JobSets"),
    Resource(
        "leaderworkersets",
        "leaderworkerset.x-k8s.io",
        ("v1",),
        "leaderworkersets",
        True,
        "LeaderWorkerSets",
    ),
    Resource("rayclusters", "ray.io", ("v1",), "rayclusters", True, "RayClusters"),
    Resource(
        "resourceclaims",
        "resource.k8s.io",
        ("v1", "v1beta2", "v1beta1"),
        "resourceclaims",
        True,
        "DRA ResourceClaims",
        crd=False,
    ),
)
"""Everything `collect` reads, in the order it reads them."""


@dataclass
class KubeCollection:
    """What one pass over the Kubernetes API returned."""

    kubernetes: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """Resource key -> the list response pages, as the API server sent them. A key is present
    when its status is `ok` or `incomplete: ...`."""
    objects: dict[str, str] = field(default_factory=dict)
    """Resource key -> `"ok"` or why not (`absent: ...`, `forbidden: ...`, `failed: ...`,
    `incomplete: ...`), for every key in `RESOURCES`."""
    warnings: list[str] = field(default_factory=list)
    """Whole sentences worth showing the user (forbidden or failed lists, plain-HTTP servers)."""
    cluster: str = ""
    """The kubeconfig context, or `in-cluster`; never a credential."""
    server: str = ""
    """The API server URL without user info, query or fragment."""
    api_versions: dict[str, str] = field(default_factory=dict)
    """Resource key -> the `group/version` (or `v1`) it was listed at."""


def collect(
    kubeconfig: Path | None,
    context: str | None,
    namespaces: Sequence[str] = (),
    page_size: int = DEFAULT_PAGE_SIZE,
    on_progress: Callable[[str], None] | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> KubeCollection:
    """List every resource in `RESOURCES` and return the raw pages with a status per resource.

    `kubeconfig` and `context` pick the cluster (`None`: `$KUBECONFIG`, else `~/.kube/config`,
    else the pod's service account when running in a cluster). With `namespaces`, namespaced
    resources are listed in those namespaces only; cluster-scoped ones (nodes, PriorityClasses,
    ClusterQueues) are always listed whole. `on_progress` gets a short line after every page.
    `timeout_s` bounds each request.

    Raises `SourceError` (one line) when the kubeconfig cannot be used, the cluster cannot be
    reached, the credentials are refused (401), or pods or nodes cannot be listed; a 403 on
    nodes is the exception, recorded as `forbidden: ...` like any optional resource. Raises
    `ConfigError` for an invalid namespace name, page size or timeout.
    """
    scopes = _check_namespaces(namespaces)
    if isinstance(page_size, bool) or not isinstance(page_size, int) or page_size < 1:
        raise ConfigError(f"page size must be a positive whole number, got {page_size!r}")
    if not timeout_s > 0:
        raise ConfigError(f"timeout must be positive, got {timeout_s!r}")
    conn = _connect(kubeconfig, context)
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
            _Reader(conn, scopes, page_size, timeout_s, on_progress, out).run()
    finally:
        pool_log.removeFilter(quiet)
        conn.api.close()
    return out


class _NoRetryNoise(logging.Filter):
    """Drops urllib3's per-retry warnings: without logging set up they would land on stderr
    as raw lines, and the outcome of a failed request is reported by `collect` anyway."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Retrying")


# --- configuration -------------------------------------------------------------------------


@dataclass
class _Conn:
    api: Any
    """`kubernetes.client.ApiClient`."""
    cluster: str
    server: str
    hint: str
    """What to check when the cluster cannot be reached or refuses the credentials."""
    verify_tls: bool

    def secrets(self) -> list[str]:
        """Credential strings to blank out of any message, as a last guard."""
        conf = self.api.configuration
        found: list[str] = []
        for value in list(getattr(conf, "api_key", {}).values()) + [
            getattr(conf, "password", None),
        ]:
            if isinstance(value, str) and value:
                found.append(value)
                # "Bearer <token>": the token alone must go too.
                found.extend(part for part in value.split() if len(part) >= 8)
        return sorted(set(found), key=len, reverse=True)


def _k8s() -> tuple[Any, Any]:
    """The `kubernetes` client and config modules, imported on first use (they take about
    half a second to import, which `gpuaudit --help` should not pay)."""
    from kubernetes import client, config

    return client, config


def _connect(kubeconfig: Path | None, context: str | None) -> _Conn:
    if kubeconfig is None and context is None and _in_cluster():
        return _connect_in_cluster()
    return _connect_kubeconfig(kubeconfig, context)


def _in_cluster() -> bool:
    """Like `kubectl`: the service account is used only when no kubeconfig is around."""
    if os.environ.get("KUBECONFIG") or not os.environ.get("KUBERNETES_SERVICE_HOST"):
        return False
    return not (Path.home() / ".kube" / "config").is_file()


def _connect_in_cluster() -> _Conn:
    client, _ = _k8s()
    host = os.environ.get("KUBERNETES_SERVICE_HOST", "").strip()
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "443").strip() or "443"
    token_file = SERVICE_ACCOUNT_DIR / "token"
    ca_file = SERVICE_ACCOUNT_DIR / "ca.crt"
    hint = "check the pod's service account, or pass --kubeconfig"
    try:
        token = token_file.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise SourceError(
            f"KUBERNETES_SERVICE_HOST is set but the service-account token {token_file} "
            f"cannot be read ({exc.strerror or type(exc).__name__}); {hint}"
        ) from None
    if not token:
        raise SourceError(f"the service-account token {token_file} is empty; {hint}")
    if not ca_file.is_file():
        raise SourceError(f"the service-account CA {ca_file} does not exist; {hint}")
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    conf = client.Configuration()
    conf.host = f"https://{host}:{port}"
    conf.ssl_ca_cert = str(ca_file)
    conf.api_key = {"BearerToken": token}
    conf.api_key_prefix = {"BearerToken": "Bearer"}
    conf.retries = 2
    last_read = time.monotonic()

    def reread_token(c: Any) -> None:
        # Bound service-account tokens rotate (hourly by default); pick up the new one.
        nonlocal last_read
        if time.monotonic() - last_read < _TOKEN_REREAD_S:
            return
        last_read = time.monotonic()
        try:
            fresh = token_file.read_text(encoding="utf-8").strip()
        except OSError:
            return
        if fresh:
            c.api_key = {"BearerToken": fresh}

    conf.refresh_api_key_hook = reread_token
    return _Conn(
        api=client.ApiClient(configuration=conf),
        cluster="in-cluster",
        server=_redact_url(conf.host),
        hint=hint,
        verify_tls=True,
    )


def _kubeconfig_source(kubeconfig: Path | None) -> tuple[str, str, str]:
    """The `config_file` argument for the client, how to name it, and which option to blame."""
    if kubeconfig is not None:
        path = kubeconfig.expanduser()
        if not path.exists():
            raise SourceError(f"kubeconfig {path} does not exist; check --kubeconfig")
        if not path.is_file():
            raise SourceError(f"kubeconfig {path} is not a file; check --kubeconfig")
        return str(path), str(path), "--kubeconfig"
    env = os.environ.get("KUBECONFIG", "")
    if env:
        paths = [os.path.expanduser(p) for p in env.split(os.pathsep) if p]
        if not any(os.path.isfile(p) for p in paths):
            raise SourceError(
                f"no kubeconfig file named in KUBECONFIG ({env}) exists; "
                "check KUBECONFIG or pass --kubeconfig"
            )
        return env, f"KUBECONFIG ({env})", "KUBECONFIG or --kubeconfig"
    default = Path.home() / ".kube" / "config"
    if not default.is_file():
        raise SourceError(
            f"no kubeconfig: {default} does not exist and KUBECONFIG is not set; "
            "pass --kubeconfig, or run gpuaudit in the cluster with a service account"
        )
    return str(default), str(default), "--kubeconfig"


def _contexts(config_file: str) -> tuple[list[str], str | None]:
    """Context names and the current context, read leniently (for messages and the name)."""
    import yaml  # type: ignore[import-untyped,unused-ignore]

    names: list[str] = []
    current: str | None = None
    for raw in config_file.split(os.pathsep):
        path = os.path.expanduser(raw)
        if not raw or not os.path.isfile(path):
            continue
        try:
            with open(path, encoding="utf-8") as fh:
                doc = yaml.safe_load(fh)
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            continue
        if not isinstance(doc, dict):
            continue
        for ctx in doc.get("contexts") or []:
            if isinstance(ctx, dict) and isinstance(ctx.get("name"), str):
                if ctx["name"] not in names:
                    names.append(ctx["name"])
        cur = doc.get("current-context")
        # The client lets a later file's current-context win; mirror it.
        if isinstance(cur, str) and cur:
            current = cur
    return names, current


def _connect_kubeconfig(kubeconfig: Path | None, context: str | None) -> _Conn:
    import yaml  # type: ignore[import-untyped,unused-ignore]

    client, config = _k8s()
    config_file, shown, option = _kubeconfig_source(kubeconfig)
    names, current = _contexts(config_file)
    listing = f" (it has: {', '.join(names)})" if names else ""
    if context is not None and names and context not in names:
        raise SourceError(f"context {context!r} is not in kubeconfig {shown}{listing}")
    conf = client.Configuration()
    try:
        # persist_config=False: a refreshed token must never be written back by gpuaudit.
        api = config.new_client_from_config(
            config_file=config_file,
            context=context,
            persist_config=False,
            client_configuration=conf,
        )
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        raise SourceError(f"kubeconfig {shown} is not valid YAML{where}; check {option}") from None
    except config.ConfigException as exc:
        first = (str(exc).strip().splitlines() or [""])[0]
        if "current-context" in first:
            raise SourceError(
                f"kubeconfig {shown} sets no current-context; pass --context{listing}"
            ) from None
        if "contexts" in first and context is not None:
            raise SourceError(
                f"context {context!r} is not in kubeconfig {shown}{listing}"
            ) from None
        raise SourceError(
            f"kubeconfig {shown} cannot be used: {_clip(first)}; check {option}"
            + (" and --context" if context else "")
        ) from None
    except OSError as exc:
        raise SourceError(
            f"kubeconfig {shown} cannot be used: {exc.strerror or type(exc).__name__}"
            f"{' (' + exc.filename + ')' if isinstance(exc.filename, str) else ''}; "
            f"check {option}"
        ) from None
    except Exception as exc:
        # The message may quote kubeconfig content; name only the kind of failure.
        raise SourceError(
            f"kubeconfig {shown} is malformed ({type(exc).__name__}); check {option} "
            "(`kubectl config view` shows what is wrong)"
        ) from None
    api.configuration.retries = 2
    name = context or current or "kubeconfig"
    return _Conn(
        api=api,
        cluster=name,
        server=_redact_url(str(api.configuration.host)),
        hint=f"check {option}" + (" and --context" if context else "/--context"),
        verify_tls=bool(api.configuration.verify_ssl),
    )


def _check_namespaces(namespaces: Sequence[str]) -> list[str | None]:
    """`[None]` (all namespaces) or the distinct namespaces asked for, in order."""
    if isinstance(namespaces, str):
        namespaces = [namespaces]
    chosen: list[str | None] = []
    for raw in namespaces:
        ns = raw.strip()
        if not _NAMESPACE_RE.match(ns):
            raise ConfigError(
                f"namespace {raw!r} is not a valid Kubernetes namespace name "
                "(lower-case letters, digits and '-', at most 63 characters)"
            )
        if ns not in chosen:
            chosen.append(ns)
    return chosen or [None]


# --- reading -------------------------------------------------------------------------------


class _BadAnswer(Exception):
    """The server answered 2xx with something that is not a Kubernetes list or document."""


@dataclass
class _Discovery:
    groups: dict[str, tuple[list[str], str]]
    """Group -> (served versions, preferred version)."""
    resources: dict[str, dict[str, bool] | None] = field(default_factory=dict)
    """`group/version` -> plural -> namespaced; None where the list could not be read."""


class _Reader:
    def __init__(
        self,
        conn: _Conn,
        scopes: list[str | None],
        page_size: int,
        timeout_s: float,
        on_progress: Callable[[str], None] | None,
        out: KubeCollection,
    ) -> None:
        client, _ = _k8s()
        self.conn = conn
        self.scopes = scopes
        self.page_size = page_size
        self.timeout = (min(_CONNECT_TIMEOUT_S, timeout_s), timeout_s)
        self.progress = on_progress or (lambda _line: None)
        self.out = out
        self.core = client.CoreV1Api(conn.api)
        self.custom = client.CustomObjectsApi(conn.api)
        self.apis = client.ApisApi(conn.api)
        self.api_exception: type[Exception] = client.ApiException

    # -- driving

    def run(self) -> None:
        discovery: _Discovery | None = None
        discovered = False
        for res in RESOURCES:
            if res.group and not discovered:
                discovery = self._discover()
                discovered = True
            if not res.group:
                candidates: list[tuple[str, bool]] = [(v, res.namespaced) for v in res.versions]
            else:
                picked = self._candidates(res, discovery)
                if isinstance(picked, str):
                    self._absent(res, picked)
                    continue
                candidates = picked
            self._read(res, candidates)

    def _read(self, res: Resource, candidates: list[tuple[str, bool]]) -> None:
        not_found: list[str] = []
        for version, namespaced in candidates:
            try:
                pages, complete = self._list_scopes(res, version, namespaced)
            except self.api_exception as exc:
                if getattr(exc, "status", 0) == 404:
                    not_found.append(self._path(res, version, None))
                    continue
                self._api_error(res, exc)
                return
            except _BadAnswer as exc:
                self._failed(res, f"the answer was not a Kubernetes list ({exc})")
                return
            except Exception as exc:
                self._network_error(res, exc)
                return
            self._store(res, version, pages)
            if complete:
                self.out.objects[res.key] = "ok"
                return
            read = sum(len(p.get("items") or []) for p in pages)
            why = (
                f"a continue token expired {MAX_RESTARTS + 1} times in a row, so only "
                f"{read} {res.title} were read; try again, or with a larger page size"
            )
            self.out.objects[res.key] = f"incomplete: {why}"
            self.out.warnings.append(f"The list of {res.title} is incomplete: {why}.")
            return
        where = ", ".join(not_found)
        if res.required:
            raise SourceError(
                f"the server at {self.conn.server} answered 404 Not Found for {where}; "
                f"is it a Kubernetes API server? {self.conn.hint}"
            ) from None
        self._absent(res, f"the API server answered 404 Not Found for {where}")

    def _store(self, res: Resource, version: str, pages: list[dict[str, Any]]) -> None:
        self.out.kubernetes[res.key] = pages
        self.out.api_versions[res.key] = f"{res.group}/{version}" if res.group else version

    def _absent(self, res: Resource, why: str) -> None:
        self.out.objects[res.key] = f"absent: {why}"
        self.progress(f"{res.title}: absent")

    def _failed(self, res: Resource, why: str) -> None:
        why = self._scrub(why)
        if res.required:
            raise SourceError(
                f"cannot list {res.title} from the Kubernetes API at {self.conn.server}: "
                f"{why}; {self.conn.hint}"
            ) from None
        self.out.objects[res.key] = f"failed: {why}"
        self.out.warnings.append(f"{res.title} could not be listed: {why}.")
        self.progress(f"{res.title}: failed")

    def _api_error(self, res: Resource, exc: Any) -> None:
        status = int(getattr(exc, "status", 0) or 0)
        said = self._scrub(_status_message(exc))
        if status == 0:
            self._network_error(res, exc)
            return
        if status == 401:
            self._unauthorized(said)
        if status == 403:
            if res.key == "pods":
                raise SourceError(
                    f"the Kubernetes API at {self.conn.server} does not allow listing pods "
                    f"({said}); grant the read-only role in docs/rbac.yaml, "
                    "or narrow the scan to namespaces you may read with --namespace"
                ) from None
            self.out.objects[res.key] = f"forbidden: {said}"
            self.out.warnings.append(
                f"{res.title} were not read: the API server said {said!r} "
                "(docs/rbac.yaml lists the read-only permissions gpuaudit needs)."
            )
            self.progress(f"{res.title}: forbidden")
            return
        self._failed(res, f"HTTP {status} {said}")

    def _unauthorized(self, said: str) -> NoReturn:
        raise SourceError(
            f"the Kubernetes API at {self.conn.server} refused the credentials "
            f"(401 Unauthorized: {said}); {self.conn.hint}, or log in again"
        ) from None

    def _network_error(self, res: Resource, exc: BaseException) -> None:
        why = self._scrub(_network_reason(exc))
        if res.required:
            raise SourceError(
                f"cannot reach the Kubernetes API at {self.conn.server}: {why}; {self.conn.hint}"
            ) from None
        self._failed(res, why)

    def _scrub(self, text: str) -> str:
        for secret in self.conn.secrets():
            text = text.replace(secret, "***")
        return text

    # -- discovery

    def _discover(self) -> _Discovery | None:
        """The API groups the server serves, or None when discovery is not readable (then each
        resource is tried directly and a 404 means absent)."""
        try:
            doc = self._get(self.apis.get_api_versions)
        except self.api_exception as exc:
            if getattr(exc, "status", 0) == 401:
                self._unauthorized(self._scrub(_status_message(exc)))
            self.out.warnings.append(
                "API discovery (GET /apis) failed "
                f"({self._scrub(_status_message(exc))}); each API was tried directly instead."
            )
            return None
        except _BadAnswer as exc:
            self.out.warnings.append(f"API discovery (GET /apis) gave a bad answer ({exc}).")
            return None
        except Exception as exc:
            self.out.warnings.append(
                f"API discovery (GET /apis) failed ({self._scrub(_network_reason(exc))})."
            )
            return None
        groups: dict[str, tuple[list[str], str]] = {}
        for g in doc.get("groups") or []:
            if not isinstance(g, dict) or not isinstance(g.get("name"), str):
                continue
            versions = [
                str(v.get("version"))
                for v in g.get("versions") or []
                if isinstance(v, dict) and v.get("version")
            ]
            pref = g.get("preferredVersion")
            preferred = str(pref.get("version", "")) if isinstance(pref, dict) else ""
            groups[g["name"]] = (versions, preferred)
        return _Discovery(groups=groups)

    def _resources(self, disc: _Discovery, group: str, version: str) -> dict[str, bool] | None:
        gv = f"{group}/{version}"
        if gv not in disc.resources:
            found: dict[str, bool] | None = None
            try:
                doc = self._get(
                    partial(self.custom.get_api_resources, group=group, version=version)
                )
            except Exception:
                found = None
            else:
                found = {
                    str(r["name"]): bool(r.get("namespaced"))
                    for r in doc.get("resources") or []
                    if isinstance(r, dict)
                    and isinstance(r.get("name"), str)
                    and "/" not in r["name"]
                }
            disc.resources[gv] = found
        return disc.resources[gv]

    def _candidates(self, res: Resource, disc: _Discovery | None) -> list[tuple[str, bool]] | str:
        """(version, namespaced) pairs to try in order, or why the resource is absent."""
        if disc is None:
            return [(v, res.namespaced) for v in res.versions]
        name = f"{res.plural}.{res.group}"
        served = disc.groups.get(res.group)
        if served is None:
            if res.crd:
                return f"the CRD {name} is not installed (API group {res.group} is not served)"
            return f"the API group {res.group} is not served by this cluster"
        versions, preferred = served
        known = [v for v in res.versions if v in versions]
        # The server's preferred version first, then gpuaudit's own order.
        known.sort(key=lambda v: (v != preferred, res.versions.index(v)))
        if not known:
            return (
                f"{res.group} is served at {', '.join(versions) or 'no version'}, "
                f"but gpuaudit reads {name} only at {', '.join(res.versions)}"
            )
        picked: list[tuple[str, bool]] = []
        for v in known:
            listed = self._resources(disc, res.group, v)
            if listed is None:
                picked.append((v, res.namespaced))
            elif res.plural in listed:
                picked.append((v, listed[res.plural]))
        if not picked:
            what = f"the CRD {name} is not installed" if res.crd else f"{name} is not served"
            return f"{what} ({res.group}/{', '.join(known)} has no {res.plural})"
        return picked

    # -- listing

    def _path(self, res: Resource, version: str, namespace: str | None) -> str:
        base = f"/apis/{res.group}/{version}" if res.group else f"/api/{version}"
        if namespace:
            base += f"/namespaces/{namespace}"
        return f"{base}/{res.plural}"

    def _list_scopes(
        self, res: Resource, version: str, namespaced: bool
    ) -> tuple[list[dict[str, Any]], bool]:
        """All pages over the namespaces asked for, and whether every list was finished."""
        pages: list[dict[str, Any]] = []
        complete = True
        for ns in self.scopes if namespaced else [None]:
            got, done = self._list(res, version, ns)
            pages.extend(got)
            complete = complete and done
        return pages, complete

    def _list(
        self, res: Resource, version: str, namespace: str | None
    ) -> tuple[list[dict[str, Any]], bool]:
        """Every page of one list, and whether it was finished. A list whose continue token
        expired (410 Gone) is started again, at most `MAX_RESTARTS` times; after that the pages
        of the last try are returned as unfinished."""
        where = f" in {namespace}" if namespace else ""
        restarts = 0
        while True:
            pages: list[dict[str, Any]] = []
            seen: set[str] = set()
            token: str | None = None
            count = 0
            try:
                while True:
                    page = self._page(res, version, namespace, token)
                    pages.append(page)
                    count += len(page["items"])
                    self.progress(f"{res.title}{where}: {count} read ({len(pages)} pages)")
                    meta = page.get("metadata")
                    nxt = meta.get("continue") if isinstance(meta, dict) else None
                    if not nxt:
                        return pages, True
                    if not isinstance(nxt, str) or nxt in seen:
                        raise _BadAnswer("the server repeated a continue token")
                    seen.add(nxt)
                    token = nxt
            except self.api_exception as exc:
                if getattr(exc, "status", 0) != 410 or token is None:
                    raise
                restarts += 1
                if restarts > MAX_RESTARTS:
                    return pages, False
                self.progress(f"{res.title}{where}: the list expired; starting it again")

    def _page(
        self, res: Resource, version: str, namespace: str | None, token: str | None
    ) -> dict[str, Any]:
        kw: dict[str, Any] = {"limit": self.page_size}
        if token is not None:
            kw["_continue"] = token
        call: Callable[..., Any]
        if res.key == "pods":
            if namespace:
                call = partial(self.core.list_namespaced_pod, namespace, **kw)
            else:
                call = partial(self.core.list_pod_for_all_namespaces, **kw)
        elif res.key == "nodes":
            call = partial(self.core.list_node, **kw)
        elif namespace:
            call = partial(
                self.custom.list_namespaced_custom_object,
                group=res.group,
                version=version,
                namespace=namespace,
                plural=res.plural,
                **kw,
            )
        else:
            # For a namespaced resource this is the all-namespaces list.
            call = partial(
                self.custom.list_cluster_custom_object,
                group=res.group,
                version=version,
                plural=res.plural,
                **kw,
            )
        page = self._get(call)
        items = page.get("items")
        if items is None and isinstance(page.get("metadata"), dict):
            # Some servers leave "items" out of an empty list.
            page["items"] = []
        elif not isinstance(items, list):
            path = self._path(res, version, namespace)
            raise _BadAnswer(f"no items in the answer for {path}")
        return page

    def _get(self, call: Callable[..., Any]) -> dict[str, Any]:
        """Make one GET through the client and parse the raw JSON body."""
        resp = call(_preload_content=False, _request_timeout=self.timeout)
        try:
            data = resp.data
        finally:
            resp.release_conn()
        return _parse(data)


def _parse(data: bytes) -> dict[str, Any]:
    import orjson

    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError:
        try:
            # orjson refuses integers beyond 64 bits; the json module does not.
            doc = json.loads(data)
        except (ValueError, UnicodeDecodeError):
            raise _BadAnswer("not JSON") from None
    if not isinstance(doc, dict):
        raise _BadAnswer("not a JSON object")
    return doc


# --- messages ------------------------------------------------------------------------------


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MAX_MESSAGE else text[: _MAX_MESSAGE - 3] + "..."


def _status_message(exc: Any) -> str:
    """The `message` of the server's `Status` answer, else the HTTP reason; one short line."""
    body = getattr(exc, "body", None)
    message = ""
    if isinstance(body, (str, bytes)) and body:
        try:
            doc = json.loads(body)
        except ValueError:
            doc = None
        if isinstance(doc, dict):
            message = str(doc.get("message") or doc.get("reason") or "")
    if not message:
        message = str(getattr(exc, "reason", "") or "")
        if getattr(exc, "status", None) == 0:
            message = _network_reason(exc)
    return _clip(message or f"HTTP {getattr(exc, 'status', '?')}")


def _network_reason(exc: BaseException) -> str:
    """Say what went wrong on the wire, without URLs' queries or any header."""
    import ssl

    from urllib3 import exceptions as u3

    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, u3.MaxRetryError) and cur.reason is not None:
            cur = cur.reason
            continue
        if isinstance(cur, ssl.SSLCertVerificationError):
            return f"TLS certificate verification failed ({_clip(cur.verify_message or str(cur))})"
        if isinstance(cur, u3.SSLError):
            inner = cur.__cause__ or (cur.args[0] if cur.args else None)
            if isinstance(inner, BaseException):
                cur = inner
                continue
            return f"TLS failed ({_clip(_strip_ssl(str(cur)))})"
        if isinstance(cur, ssl.SSLError):
            return f"TLS failed ({_clip(_strip_ssl(cur.reason or str(cur)))})"
        # NameResolutionError < NewConnectionError < ConnectTimeoutError: most specific first.
        if isinstance(cur, u3.NameResolutionError):
            return "the host name does not resolve"
        if isinstance(cur, u3.NewConnectionError):
            if isinstance(cur.__cause__, OSError) and cur.__cause__.strerror:
                return cur.__cause__.strerror.lower()
            m = re.search(r"\[Errno -?\d+\] ([^)\]]+)", str(cur))
            return m.group(1).lower() if m else "the connection failed"
        if isinstance(cur, u3.ConnectTimeoutError):
            return "the connection timed out"
        if isinstance(cur, u3.ReadTimeoutError):
            return "no answer before the timeout"
        if isinstance(cur, u3.ProxyError):
            return "the proxy failed"
        if isinstance(cur, u3.ProtocolError):
            return "the connection broke off"
        if type(cur).__name__ == "ApiException" and getattr(cur, "status", None) == 0:
            # The client turns some TLS failures into status-0 ApiExceptions.
            reason = str(getattr(cur, "reason", "") or "")
            return f"TLS failed ({_clip(_strip_ssl(reason.splitlines()[-1] if reason else ''))})"
        if isinstance(cur, OSError) and cur.strerror:
            return cur.strerror.lower()
        nxt = cur.__cause__ or cur.__context__
        if nxt is None:
            break
        cur = nxt
    return type(exc).__name__


def _strip_ssl(text: str) -> str:
    return re.sub(r"\s*\(_ssl\.c:\d+\)", "", text).strip()


def _redact_url(url: str) -> str:
    """A URL without user info, query or fragment, safe to print and record."""
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return url.split("?")[0].split("@")[-1]
    netloc = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))
