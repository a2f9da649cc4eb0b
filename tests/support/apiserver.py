"""A small Kubernetes API server for tests: serves recorded list responses at the real paths.

It answers what `gpuaudit.sources.kubernetes` and the official client need, the way a real API
server does: discovery (`/api`, `/api/v1`, `/apis`, `/apis/<group>`, `/apis/<group>/<version>`),
`/version`, and list requests for every served resource, cluster-wide and per namespace
(`/api/v1/pods`, `/api/v1/namespaces/<ns>/pods`, `/apis/kubeflow.org/v1/pytorchjobs`, ...),
paged with `limit` and `continue` (`metadata.continue`, `metadata.remainingItemCount`).
Errors come as `Status` objects with the real codes and reasons.

Faults a test can ask for: 403 (`forbidden`) or 404 (`not_found`, while discovery still lists
the resource) for chosen resources, 403 on `/apis` (`forbid_discovery`), 410 Gone with
reason `Expired` for the first N uses of a continue token of chosen resources
(`expire_continue`), a fresh continue token on every page, for ever (`endless_continue`), list
answers sent one byte at a time (`drip`: seconds between bytes), and a list answer replaced by
raw bytes with headers of the test's choosing (`raw_answer`, e.g. a gzip bomb). Requests need
`Authorization: Bearer <token>` (401 otherwise), or a client
certificate signed by the test CA when serving HTTPS with `tls`.

Every request's method, path and query are recorded in `requests`. The server listens on a
free port of 127.0.0.1 only, in a background thread:

    with KubeAPIServer(k8s_lists(generate(60, 1, 3))) as srv:
        kubeconfig = srv.write_kubeconfig(tmp_path / "kubeconfig")

`make_tls(dir)` creates a CA, a server certificate for 127.0.0.1 and a client certificate with
the `openssl` command-line tool.
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
import shutil
import socket
import ssl
import subprocess
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.support.servers import require

DEFAULT_TOKEN = "gpuaudit-test-token-5f0c1e9a7b3d"
"""The bearer token the server accepts unless told otherwise."""

# key -> (group, version, plural, namespaced, kind): where each resource lives by default.
# A list whose apiVersion says otherwise (e.g. kueue.x-k8s.io/v1beta1) is served there instead.
KNOWN: dict[str, tuple[str, str, str, bool, str]] = {
    "pods": ("", "v1", "pods", True, "Pod"),
    "nodes": ("", "v1", "nodes", False, "Node"),
    "namespaces": ("", "v1", "namespaces", False, "Namespace"),
    "priorityclasses": ("scheduling.k8s.io", "v1", "priorityclasses", False, "PriorityClass"),
    "volcano_podgroups": ("scheduling.volcano.sh", "v1beta1", "podgroups", True, "PodGroup"),
    "coscheduling_podgroups": ("scheduling.x-k8s.io", "v1alpha1", "podgroups", True, "PodGroup"),
    "kueue_workloads": ("kueue.x-k8s.io", "v1beta2", "workloads", True, "Workload"),
    "kueue_clusterqueues": ("kueue.x-k8s.io", "v1beta2", "clusterqueues", False, "ClusterQueue"),
    "kueue_localqueues": ("kueue.x-k8s.io", "v1beta2", "localqueues", True, "LocalQueue"),
    "kueue_resourceflavors": (
        "kueue.x-k8s.io",
        "v1beta2",
        "resourceflavors",
        False,
        "ResourceFlavor",
    ),
    "kueue_cohorts": ("kueue.x-k8s.io", "v1beta2", "cohorts", False, "Cohort"),
    "volcano_queues": ("scheduling.volcano.sh", "v1beta1", "queues", False, "Queue"),
    "kai_queues": ("scheduling.run.ai", "v2", "queues", False, "Queue"),
    "kai_podgroups": ("scheduling.run.ai", "v2alpha2", "podgroups", True, "PodGroup"),
    "pytorchjobs": ("kubeflow.org", "v1", "pytorchjobs", True, "PyTorchJob"),
    "mpijobs": ("kubeflow.org", "v2beta1", "mpijobs", True, "MPIJob"),
    "jobsets": ("jobset.x-k8s.io", "v1alpha2", "jobsets", True, "JobSet"),
    "leaderworkersets": (
        "leaderworkerset.x-k8s.io",
        "v1",
        "leaderworkersets",
        True,
        "LeaderWorkerSet",
    ),
    "rayclusters": ("ray.io", "v1", "rayclusters", True, "RayCluster"),
    "resourceclaims": ("resource.k8s.io", "v1", "resourceclaims", True, "ResourceClaim"),
    "resourceslices": ("resource.k8s.io", "v1", "resourceslices", False, "ResourceSlice"),
    "karpenter_nodepools": ("karpenter.sh", "v1", "nodepools", False, "NodePool"),
    "replicasets": ("apps", "v1", "replicasets", True, "ReplicaSet"),
    "deployments": ("apps", "v1", "deployments", True, "Deployment"),
    "statefulsets": ("apps", "v1", "statefulsets", True, "StatefulSet"),
    "jobs": ("batch", "v1", "jobs", True, "Job"),
    "cronjobs": ("batch", "v1", "cronjobs", True, "CronJob"),
    "notebooks": ("kubeflow.org", "v1", "notebooks", True, "Notebook"),
    "inferenceservices": (
        "serving.kserve.io",
        "v1beta1",
        "inferenceservices",
        True,
        "InferenceService",
    ),
    "tfjobs": ("kubeflow.org", "v1", "tfjobs", True, "TFJob"),
    "xgboostjobs": ("kubeflow.org", "v1", "xgboostjobs", True, "XGBoostJob"),
    "paddlejobs": ("kubeflow.org", "v1", "paddlejobs", True, "PaddleJob"),
    "jaxjobs": ("kubeflow.org", "v1", "jaxjobs", True, "JAXJob"),
}


@dataclass
class Served:
    """One resource the server serves."""

    key: str
    group: str
    version: str
    plural: str
    namespaced: bool
    kind: str
    items: list[dict[str, Any]]
    resource_version: str = "999999"

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


@dataclass(frozen=True)
class Request:
    """One request the server saw."""

    method: str
    path: str
    query: dict[str, list[str]]
    status: int
    client_cert_cn: str | None = None


@dataclass(frozen=True)
class TLSFiles:
    """PEM files made by `make_tls`."""

    ca_cert: Path
    ca_key: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def _served_from(key: str, lst: Mapping[str, Any]) -> Served:
    items = [dict(o) for o in lst.get("items") or []]
    api_version = str(lst.get("apiVersion") or "")
    group, _, version = api_version.rpartition("/")
    meta = lst.get("metadata") if isinstance(lst.get("metadata"), Mapping) else {}
    rv = str(meta.get("resourceVersion") or "999999") if isinstance(meta, Mapping) else "999999"
    if key in KNOWN:
        k_group, k_version, plural, namespaced, kind = KNOWN[key]
        if not api_version or group != k_group:
            group, version = k_group, k_version
    else:
        # Unknown keys: derive the place from the list itself (FooList -> foos).
        kind = str(lst.get("kind") or key).removesuffix("List")
        plural = kind.lower() + "s"
        namespaced = any(
            isinstance(o.get("metadata"), Mapping) and o["metadata"].get("namespace") for o in items
        )
        if not version:
            raise ValueError(f"list {key!r} has no apiVersion and is not a known resource")
    return Served(key, group, version, plural, namespaced, kind, items, rv)


def _version_priority(version: str) -> tuple[int, int, int]:
    """Kubernetes' version order: GA before beta before alpha, higher numbers first."""
    m = re.fullmatch(r"v(\d+)(?:(alpha|beta)(\d+))?", version)
    if not m:
        return (3, 0, 0)
    stage = {None: 0, "beta": 1, "alpha": 2}[m.group(2)]
    return (stage, -int(m.group(1)), -int(m.group(3) or 0))


class KubeAPIServer:
    """A threaded HTTP(S) server on 127.0.0.1 answering like a Kubernetes API server.

    `lists` maps resource keys (`pods`, `nodes`, `pytorchjobs`, ... see `KNOWN`) to list
    responses such as `gpuaudit.scenario.k8s_lists` returns. `token` is the accepted bearer
    token (None: no authentication). `tls` serves HTTPS with `make_tls` files; then a client
    certificate signed by the test CA also authenticates. `forbidden` and `not_found` name
    resources that answer 403 or 404 to list requests (both stay in discovery).
    `expire_continue` maps a resource to how many times a continue token for it is answered
    with 410 Gone before tokens work again. `forbid_discovery` answers 403 to `/apis`.
    `endless_continue` names resources whose every page carries a fresh continue token (the
    items served from the start again once they run out). `drip` maps a resource to the
    seconds between two bytes of its list answers. `raw_answer` maps a resource to the headers
    and bytes sent instead of its list answers. The fault settings are plain attributes and
    may be changed while the server runs.
    """

    def __init__(
        self,
        lists: Mapping[str, Mapping[str, Any]],
        *,
        token: str | None = DEFAULT_TOKEN,
        tls: TLSFiles | None = None,
        forbidden: Iterable[str] = (),
        not_found: Iterable[str] = (),
        expire_continue: Mapping[str, int] | None = None,
        forbid_discovery: bool = False,
        endless_continue: Iterable[str] = (),
        drip: Mapping[str, float] | None = None,
        raw_answer: Mapping[str, tuple[dict[str, str], bytes]] | None = None,
    ) -> None:
        self.resources: dict[str, Served] = {k: _served_from(k, v) for k, v in lists.items()}
        self.token = token
        self.tls = tls
        self.forbidden: set[str] = set(forbidden)
        self.not_found: set[str] = set(not_found)
        self.expire_continue: dict[str, int] = dict(expire_continue or {})
        self.forbid_discovery = forbid_discovery
        self.endless_continue: set[str] = set(endless_continue)
        self.drip: dict[str, float] = dict(drip or {})
        self.raw_answer: dict[str, tuple[dict[str, str], bytes]] = dict(raw_answer or {})
        self.stopping = threading.Event()
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._port: int | None = None

    @classmethod
    def from_dir(cls, directory: Path, **kwargs: Any) -> KubeAPIServer:
        """Serve the `<key>.json` list files that `gpuaudit scenario --k8s-dir DIR` writes."""
        lists = {
            p.stem: json.loads(p.read_text(encoding="utf-8"))
            for p in sorted(Path(directory).glob("*.json"))
        }
        if not lists:
            raise ValueError(f"no *.json list files in {directory}")
        return cls(lists, **kwargs)

    # -- lifecycle

    def start(self) -> KubeAPIServer:
        if self._httpd is not None:
            return self
        httpd = _HTTPServer(("127.0.0.1", 0), _Handler)
        httpd.api = self
        if self.tls is not None:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(self.tls.server_cert, self.tls.server_key)
            ctx.load_verify_locations(self.tls.ca_cert)
            # Like kube-apiserver: a client certificate is optional, a bearer token also works.
            ctx.verify_mode = ssl.CERT_OPTIONAL
            httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True)
        self._httpd = httpd
        self._port = int(httpd.server_address[1])
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        self.stopping.set()
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        httpd.shutdown()
        httpd.close_connections()
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def __enter__(self) -> KubeAPIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def port(self) -> int:
        """The port; still known after `close`, so a test can aim at a closed port."""
        if self._port is None:
            raise RuntimeError("the server was never started")
        return self._port

    @property
    def url(self) -> str:
        scheme = "https" if self.tls is not None else "http"
        return f"{scheme}://127.0.0.1:{self.port}"

    # -- what happened

    def methods(self) -> set[str]:
        with self._lock:
            return {r.method for r in self.requests}

    def list_requests(self, key: str) -> list[Request]:
        """The list requests for one resource (any namespace), in order."""
        res = self.resources[key]
        with self._lock:
            return [r for r in self.requests if _matches(res, r.path)]

    def pages_served(self, key: str) -> int:
        """How many list pages of one resource were answered with 200."""
        return sum(1 for r in self.list_requests(key) if r.status == 200)

    def _record(self, req: Request) -> None:
        with self._lock:
            self.requests.append(req)

    # -- kubeconfig

    def write_kubeconfig(
        self,
        path: Path,
        *,
        token: str | None = "default",
        ca: str = "data",
        client_cert: bool = False,
        context: str = "gpuaudit-test",
        server: str | None = None,
    ) -> Path:
        """Write a kubeconfig for this server and return its path.

        `token` "default" uses the server's token; None leaves it out. `ca` is "data"
        (certificate-authority-data), "file" (certificate-authority) or "none". With
        `client_cert`, the test client certificate and key go in as data.
        """
        return write_kubeconfig(
            path,
            server or self.url,
            token=self.token if token == "default" else token,
            ca_file=self.tls.ca_cert if self.tls and ca != "none" else None,
            ca_inline=ca == "data",
            client_cert=self.tls.client_cert if self.tls and client_cert else None,
            client_key=self.tls.client_key if self.tls and client_cert else None,
            context=context,
        )


def _matches(res: Served, path: str) -> bool:
    base = f"/apis/{res.group}/{res.version}" if res.group else f"/api/{res.version}"
    if path == f"{base}/{res.plural}":
        return True
    if res.namespaced and path.startswith(f"{base}/namespaces/"):
        rest = path[len(base) + len("/namespaces/") :].split("/")
        return len(rest) == 2 and rest[1] == res.plural
    return False


class _HTTPServer(ThreadingHTTPServer):
    # Joined on close (after `close_connections`), so no thread or socket outlives a test.
    daemon_threads = False
    api: KubeAPIServer

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.open_sockets: set[socket.socket] = set()
        self.sockets_lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.sockets_lock:
            self.open_sockets.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self.sockets_lock:
            self.open_sockets.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        """End kept-alive connections so that their handler threads finish."""
        with self.sockets_lock:
            socks = list(self.open_sockets)
        for s in socks:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hangs up mid-answer is not a test failure; stay quiet.
        pass


def _status(code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> Any:
    doc: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        doc["details"] = details
    return doc


_EXPIRED_MESSAGE = (
    "The provided continue parameter is too old to display a consistent list result. You can "
    "start a new list without the continue parameter, or use the continue token in this "
    "response to retrieve the remainder of the results. Continuing with the provided token "
    "results in an inconsistent list - objects that were created, modified, or deleted "
    "between the time the first chunk was returned and now may show up in the list."
)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in separate writes; without this, delayed ACKs add 40 ms each.
    disable_nagle_algorithm = True
    server: _HTTPServer
    timeout = 30

    def log_message(self, format: str, *args: Any) -> None:
        pass

    # Anything but GET is recorded and refused, so a test can see a write attempt.
    def do_GET(self) -> None:
        self._serve("GET")

    def do_HEAD(self) -> None:
        self._serve("HEAD")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_PATCH(self) -> None:
        self._serve("PATCH")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def _client_cn(self) -> str | None:
        getpeercert = getattr(self.connection, "getpeercert", None)
        if getpeercert is None:
            return None
        cert = getpeercert()
        if not cert:
            return None
        for rdn in cert.get("subject", ()):
            for name, value in rdn:
                if name == "commonName":
                    return str(value)
        return None

    def _serve(self, method: str) -> None:
        api = self.server.api
        parts = urlsplit(self.path)
        path = parts.path.rstrip("/") or "/"
        query = parse_qs(parts.query)
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        cn = self._client_cn()
        code, body = self._answer(api, method, path, query, cn)
        api._record(Request(method, path, query, code, cn))
        data = json.dumps(body).encode()
        headers = {"Content-Type": "application/json"}
        listed = next((r for r in api.resources.values() if _matches(r, path)), None)
        if listed is not None and code == 200 and listed.key in api.raw_answer:
            extra, data = api.raw_answer[listed.key]
            headers.update(extra)
        self.send_response(code)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if method == "HEAD":
            return
        every = api.drip.get(listed.key, 0.0) if listed is not None else 0.0
        if every <= 0:
            self.wfile.write(data)
            return
        for i in range(len(data)):
            if api.stopping.wait(every):
                self.close_connection = True
                return
            self.wfile.write(data[i : i + 1])
            self.wfile.flush()

    def _answer(
        self,
        api: KubeAPIServer,
        method: str,
        path: str,
        query: dict[str, list[str]],
        cn: str | None,
    ) -> tuple[int, Any]:
        if api.token is not None and cn is None:
            if self.headers.get("Authorization") != f"Bearer {api.token}":
                return 401, _status(401, "Unauthorized", "Unauthorized")
        if method not in ("GET", "HEAD"):
            return 405, _status(405, "MethodNotAllowed", f"{method} is not allowed here")
        if path == "/version":
            return 200, {"major": "1", "minor": "34", "gitVersion": "v1.34.0-gpuaudit-test"}
        if path == "/api":
            return 200, {
                "kind": "APIVersions",
                "versions": ["v1"],
                "serverAddressByClientCIDRs": [
                    {"clientCIDR": "0.0.0.0/0", "serverAddress": f"127.0.0.1:{api.port}"}
                ],
            }
        if path == "/apis" and api.forbid_discovery:
            return 403, _status(
                403,
                "Forbidden",
                'forbidden: User "system:serviceaccount:gpuaudit:gpuaudit" cannot get path "/apis"',
            )
        groups = self._groups(api)
        if path == "/apis":
            return 200, {
                "kind": "APIGroupList",
                "apiVersion": "v1",
                "groups": [self._group_doc(g, vs) for g, vs in sorted(groups.items())],
            }
        if path == "/api/v1":
            return 200, self._resource_list(api, "", "v1")
        segs = path.strip("/").split("/")
        if segs[0] == "apis" and len(segs) == 2 and segs[1] in groups:
            doc = self._group_doc(segs[1], groups[segs[1]])
            return 200, {"kind": "APIGroup", "apiVersion": "v1", **doc}
        if segs[0] == "apis" and len(segs) == 3 and segs[2] in groups.get(segs[1], ()):
            return 200, self._resource_list(api, segs[1], segs[2])
        for res in api.resources.values():
            if _matches(res, path):
                return self._list(api, res, path, query)
        return 404, _status(404, "NotFound", "the server could not find the requested resource")

    @staticmethod
    def _groups(api: KubeAPIServer) -> dict[str, list[str]]:
        groups: dict[str, list[str]] = {}
        for res in api.resources.values():
            if res.group:
                versions = groups.setdefault(res.group, [])
                if res.version not in versions:
                    versions.append(res.version)
        for versions in groups.values():
            versions.sort(key=_version_priority)
        return groups

    @staticmethod
    def _group_doc(group: str, versions: list[str]) -> dict[str, Any]:
        return {
            "name": group,
            "versions": [{"groupVersion": f"{group}/{v}", "version": v} for v in versions],
            "preferredVersion": {"groupVersion": f"{group}/{versions[0]}", "version": versions[0]},
        }

    @staticmethod
    def _resource_list(api: KubeAPIServer, group: str, version: str) -> dict[str, Any]:
        resources = [
            {
                "name": r.plural,
                "singularName": r.kind.lower(),
                "namespaced": r.namespaced,
                "kind": r.kind,
                "verbs": ["get", "list", "watch"],
            }
            for r in api.resources.values()
            if r.group == group and r.version == version
        ]
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": f"{group}/{version}" if group else version,
            "resources": resources,
        }

    @staticmethod
    def _list(
        api: KubeAPIServer, res: Served, path: str, query: dict[str, list[str]]
    ) -> tuple[int, Any]:
        group_res = f"{res.plural}.{res.group}" if res.group else res.plural
        namespace = None
        if "/namespaces/" in path:
            namespace = path.split("/namespaces/", 1)[1].split("/", 1)[0]
        if res.key in api.not_found:
            return 404, _status(404, "NotFound", "the server could not find the requested resource")
        if res.key in api.forbidden:
            scope = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
            return 403, _status(
                403,
                "Forbidden",
                f'{group_res} is forbidden: User "system:serviceaccount:gpuaudit:gpuaudit" '
                f'cannot list resource "{res.plural}" in API group "{res.group}" {scope}',
                {"group": res.group, "kind": res.plural},
            )
        items = res.items
        if namespace is not None:
            items = [o for o in items if o.get("metadata", {}).get("namespace") == namespace]
        offset = 0
        token = (query.get("continue") or [""])[0]
        if token:
            with api._lock:
                left = api.expire_continue.get(res.key, 0)
                if left > 0:
                    api.expire_continue[res.key] = left - 1
            if left > 0:
                return 410, _status(410, "Expired", _EXPIRED_MESSAGE)
            try:
                state = json.loads(base64.urlsafe_b64decode(token.encode()))
                offset = int(state["offset"])
                if state["path"] != path:
                    raise ValueError(path)
            except (ValueError, KeyError, TypeError):
                return 400, _status(400, "BadRequest", "continue key is not valid")
        limit_raw = (query.get("limit") or ["0"])[0]
        try:
            limit = int(limit_raw)
        except ValueError:
            return 400, _status(400, "BadRequest", f"invalid limit {limit_raw!r}")
        if res.key in api.endless_continue and items:
            offset %= len(items)
        end = len(items) if limit <= 0 else min(len(items), offset + limit)
        meta: dict[str, Any] = {"resourceVersion": res.resource_version}
        if res.key in api.endless_continue:
            # A fresh token for ever: the offset grows, the items come round again.
            nxt = int(state["offset"]) + max(1, end - offset) if token else end
            state = {"path": path, "offset": nxt, "rv": res.resource_version, "n": nxt}
            meta["continue"] = base64.urlsafe_b64encode(json.dumps(state).encode()).decode()
        elif end < len(items):
            state = {"path": path, "offset": end, "rv": res.resource_version}
            meta["continue"] = base64.urlsafe_b64encode(json.dumps(state).encode()).decode()
            meta["remainingItemCount"] = len(items) - end
        return 200, {
            "kind": f"{res.kind}List",
            "apiVersion": res.group_version,
            "metadata": meta,
            "items": items[offset:end],
        }


# --- certificates and kubeconfigs ----------------------------------------------------------


def have_openssl() -> bool:
    return shutil.which("openssl") is not None


def make_tls(directory: Path) -> TLSFiles:
    """Create a CA, a server certificate for 127.0.0.1/localhost and a client certificate,
    with the `openssl` command-line tool (EC P-256 keys, valid for two days)."""
    directory.mkdir(parents=True, exist_ok=True)
    d = directory
    openssl = require("openssl")

    def run(*args: str) -> None:
        subprocess.run([openssl, *args], check=True, capture_output=True, cwd=d)

    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    run(
        "req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
        "-subj", "/CN=gpuaudit-test-ca",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        "-addext", "subjectKeyIdentifier=hash",
    )  # fmt: skip
    leaves = {
        "server": (
            "/CN=127.0.0.1",
            "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n",
        ),
        "client": ("/CN=gpuaudit-tester/O=gpuaudit", "extendedKeyUsage=clientAuth\n"),
    }
    for name, (subject, extra) in leaves.items():
        (d / f"{name}.ext").write_text(
            "basicConstraints=critical,CA:FALSE\n"
            "keyUsage=critical,digitalSignature,keyEncipherment\n"
            "subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid,issuer\n" + extra
        )
        run("req", *ec, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", subject)
        run(
            "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", f"{name}.crt", "-days", "2",
            "-extfile", f"{name}.ext",
        )  # fmt: skip
    return TLSFiles(
        ca_cert=d / "ca.crt",
        ca_key=d / "ca.key",
        server_cert=d / "server.crt",
        server_key=d / "server.key",
        client_cert=d / "client.crt",
        client_key=d / "client.key",
    )


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def write_kubeconfig(
    path: Path,
    server: str,
    *,
    token: str | None = None,
    ca_file: Path | None = None,
    ca_inline: bool = True,
    client_cert: Path | None = None,
    client_key: Path | None = None,
    context: str = "gpuaudit-test",
    insecure: bool = False,
    current: bool = True,
) -> Path:
    """Write a one-cluster kubeconfig (JSON, which is YAML) and return `path`.

    The CA and client certificate go in as `*-data` when `ca_inline`, else as file paths.
    """
    cluster: dict[str, Any] = {"server": server}
    if ca_file is not None:
        if ca_inline:
            cluster["certificate-authority-data"] = _b64(ca_file)
        else:
            cluster["certificate-authority"] = str(ca_file)
    if insecure:
        cluster["insecure-skip-tls-verify"] = True
    user: dict[str, Any] = {}
    if token is not None:
        user["token"] = token
    if client_cert is not None and client_key is not None:
        if ca_inline:
            user["client-certificate-data"] = _b64(client_cert)
            user["client-key-data"] = _b64(client_key)
        else:
            user["client-certificate"] = str(client_cert)
            user["client-key"] = str(client_key)
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "test-cluster", "cluster": cluster}],
        "users": [{"name": "test-user", "user": user}],
        "contexts": [
            {"name": context, "context": {"cluster": "test-cluster", "user": "test-user"}}
        ],
        "preferences": {},
    }
    if current:
        doc["current-context"] = context
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1), encoding="utf-8")
    return path
