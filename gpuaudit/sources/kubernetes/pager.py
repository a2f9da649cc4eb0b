"""The paged reader: lists every resource of the catalogue (`resources.RESOURCES`) through the
official `kubernetes` client and keeps the list responses page by page (each as `keep_page`
keeps it: untouched by default).

Only GET requests are made. Lists are paged with `limit` and `continue`; a continue token that
expired (410 Gone) restarts that list. API discovery (`GET /apis`) picks the version of each
optional resource; a resource the server does not serve is recorded as absent. What happened to
each resource is recorded in the collection's `objects`: `"ok"`, `"absent: ..."`,
`"forbidden: ..."`, `"failed: ..."` or `"incomplete: ..."`.

Every request is bounded (`limits.Limits`): done within the timeout, last byte included, and
its answer no larger than the cap once decompressed (the client's connection pool is wrapped so
that every body, error answers too, is read that way). A resource whose pages or objects go
past their bound (a server handing out fresh continue tokens forever) is cut off there and
marked incomplete.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, NoReturn

from gpuaudit.core.errors import SourceError
from gpuaudit.sources import transfer
from gpuaudit.sources.bounds import Limits
from gpuaudit.sources.kubernetes.connect import Connection, k8s_modules
from gpuaudit.sources.kubernetes.messages import network_reason, scrub, status_message
from gpuaudit.sources.kubernetes.resources import RESOURCES, Resource

MAX_RESTARTS = 3
"""How often one list is started again after its continue token expired (410 Gone)."""

_CONNECT_TIMEOUT_S = 10.0
_CHUNK = 1 << 16

KeepPage = Callable[[str, dict[str, Any]], dict[str, Any]]
"""What is kept of one list page, given its resource key and the page as the API sent it."""


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
    server_version: str = ""
    """The API server's `gitVersion` (`GET /version`, `v1.31.4`); empty when it did not say."""


class _BadAnswer(Exception):
    """The server answered 2xx with something that is not a Kubernetes list or document."""


class _OverLimit(Exception):
    """A request went past a bound: its time or its size. The message says which."""


class _Answer:
    """An HTTP answer whose body was read within the bounds: what the `kubernetes` client and
    its `ApiException` use of a `urllib3.HTTPResponse`."""

    def __init__(self, resp: Any, data: bytes) -> None:
        self.status = resp.status
        self.reason = resp.reason
        self.headers = resp.headers
        self.data = data

    def getheaders(self) -> Any:
        return self.headers

    def getheader(self, name: str, default: Any = None) -> Any:
        return self.headers.get(name, default)

    def read(self, *args: Any, **kwargs: Any) -> bytes:
        return self.data

    def release_conn(self) -> None:
        pass

    def close(self) -> None:
        pass


class _BoundedPool:
    """The client's connection pool, with every answer's body read within the size cap and
    the deadline of the request running on this thread (`transfer.within`)."""

    def __init__(self, pool: Any, limit: int) -> None:
        self._pool = pool
        self._limit = limit

    def request(self, method: str, url: str, *args: Any, **kwargs: Any) -> _Answer:
        kwargs["preload_content"] = False
        resp = self._pool.request(method, url, *args, **kwargs)
        try:
            encoding = str(resp.headers.get("Content-Encoding", "") or "")
            chunks = resp.stream(_CHUNK, decode_content=False)
            data = transfer.read_body(chunks, encoding, self._limit, transfer.current())
        except BaseException:
            resp.close()
            raise
        resp.release_conn()
        return _Answer(resp, data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pool, name)


@dataclass
class _Discovery:
    groups: dict[str, tuple[list[str], str]]
    """Group -> (served versions, preferred version)."""
    resources: dict[str, dict[str, bool] | None] = field(default_factory=dict)
    """`group/version` -> plural -> namespaced; None where the list could not be read."""


class Reader:
    """One pass over the catalogue, filling `out`; raises `SourceError` where pods or nodes
    cannot be read (see `source.collect`)."""

    def __init__(
        self,
        conn: Connection,
        scopes: list[str | None],
        page_size: int,
        limits: Limits,
        on_progress: Callable[[str], None] | None,
        out: KubeCollection,
        keep_page: KeepPage | None = None,
    ) -> None:
        client, _ = k8s_modules()
        self.conn = conn
        self.scopes = scopes
        self.page_size = page_size
        self.limits = limits
        self.keep_page = keep_page
        timeout_s = limits.timeout_s
        self.timeout = (min(_CONNECT_TIMEOUT_S, timeout_s), timeout_s)
        rest = conn.api.rest_client
        if not isinstance(rest.pool_manager, _BoundedPool):
            rest.pool_manager = _BoundedPool(rest.pool_manager, limits.answer_bytes)
        self.progress = on_progress or (lambda _line: None)
        self.out = out
        self.core = client.CoreV1Api(conn.api)
        self.custom = client.CustomObjectsApi(conn.api)
        self.apis = client.ApisApi(conn.api)
        self.api_exception: type[Exception] = client.ApiException

    # -- driving

    def run(self) -> None:
        self._version()
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
                pages, why = self._list_scopes(res, version, namespaced)
            except self.api_exception as exc:
                if getattr(exc, "status", 0) == 404:
                    not_found.append(self._path(res, version, None))
                    continue
                self._api_error(res, exc)
                return
            except _BadAnswer as exc:
                self._failed(res, f"the answer was not a Kubernetes list ({exc})")
                return
            except _OverLimit as exc:
                self._failed(res, str(exc))
                return
            except Exception as exc:
                self._network_error(res, exc)
                return
            self._store(res, version, pages)
            if why is None:
                self.out.objects[res.key] = "ok"
                return
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
        said = self._scrub(status_message(exc))
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
        why = self._scrub(network_reason(exc))
        if res.required:
            raise SourceError(
                f"cannot reach the Kubernetes API at {self.conn.server}: {why}; {self.conn.hint}"
            ) from None
        self._failed(res, why)

    def _scrub(self, text: str) -> str:
        return scrub(text, self.conn.secrets())

    # -- discovery

    def _version(self) -> None:
        """The server's version (`GET /version`), for validating changes against its schema
        (`gpuaudit fix`): a server that does not say is no error (the lists still tell)."""
        client, _ = k8s_modules()
        try:
            doc = self._get(client.VersionApi(self.conn.api).get_code)
        except Exception:  # noqa: BLE001 - optional: every failure leaves it unknown
            return
        version = doc.get("gitVersion")
        if isinstance(version, str) and 0 < len(version) <= 64 and version.isprintable():
            self.out.server_version = version

    def _discover(self) -> _Discovery | None:
        """The API groups the server serves, or None when discovery is not readable (then each
        resource is tried directly and a 404 means absent)."""
        try:
            doc = self._get(self.apis.get_api_versions)
        except self.api_exception as exc:
            if getattr(exc, "status", 0) == 401:
                self._unauthorized(self._scrub(status_message(exc)))
            self.out.warnings.append(
                "API discovery (GET /apis) failed "
                f"({self._scrub(status_message(exc))}); each API was tried directly instead."
            )
            return None
        except (_BadAnswer, _OverLimit) as exc:
            self.out.warnings.append(f"API discovery (GET /apis) gave no usable answer ({exc}).")
            return None
        except Exception as exc:
            self.out.warnings.append(
                f"API discovery (GET /apis) failed ({self._scrub(network_reason(exc))})."
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
    ) -> tuple[list[dict[str, Any]], str | None]:
        """All pages over the namespaces asked for, and why they are incomplete (None when
        every list was finished)."""
        pages: list[dict[str, Any]] = []
        budget = _Budget(self.limits.pages(self.page_size), self.limits.objects)
        for ns in self.scopes if namespaced else [None]:
            got, why = self._list(res, version, ns, budget)
            pages.extend(got)
            if why is not None:
                return pages, why
        return pages, None

    def _list(
        self, res: Resource, version: str, namespace: str | None, budget: _Budget
    ) -> tuple[list[dict[str, Any]], str | None]:
        """Every page of one list, and why it is unfinished (None when it was finished). A
        list whose continue token expired (410 Gone) is started again, at most `MAX_RESTARTS`
        times; after that, or when `budget` runs out, the pages so far are returned."""
        where = f" in {namespace}" if namespace else ""
        restarts = 0
        while True:
            pages: list[dict[str, Any]] = []
            seen: set[str] = set()
            token: str | None = None
            count = 0
            try:
                while True:
                    if budget.pages <= 0 or budget.objects <= 0:
                        return pages, self._cut_off(res, budget)
                    page = self._page(res, version, namespace, token)
                    budget.pages -= 1
                    items = page["items"]
                    if len(items) > budget.objects:
                        page["items"] = items = items[: budget.objects]
                        budget.over = True
                    budget.objects -= len(items)
                    count += len(items)
                    meta = page.get("metadata")
                    nxt = meta.get("continue") if isinstance(meta, dict) else None
                    pages.append(self._kept(res, page))
                    self.progress(f"{res.title}{where}: {count} read ({len(pages)} pages)")
                    if budget.over:
                        return pages, self._cut_off(res, budget)
                    if not nxt:
                        return pages, None
                    if not isinstance(nxt, str) or nxt in seen:
                        raise _BadAnswer("the server repeated a continue token")
                    seen.add(nxt)
                    token = nxt
            except self.api_exception as exc:
                if getattr(exc, "status", 0) != 410 or token is None:
                    raise
                budget.objects += count  # the pages of this try are dropped
                restarts += 1
                if restarts > MAX_RESTARTS:
                    read = sum(len(p.get("items") or []) for p in pages)
                    return pages, (
                        f"a continue token expired {MAX_RESTARTS + 1} times in a row, so only "
                        f"{read} {res.title} were read; try again, or with a larger page size"
                    )
                self.progress(f"{res.title}{where}: the list expired; starting it again")

    def _kept(self, res: Resource, page: dict[str, Any]) -> dict[str, Any]:
        return self.keep_page(res.key, page) if self.keep_page is not None else page

    def _cut_off(self, res: Resource, budget: _Budget) -> str:
        """Why a list was cut off at its budget, in words."""
        got = self.limits.objects - budget.objects
        if budget.over or budget.objects <= 0:
            return (
                f"there are more than {self.limits.objects:,} {res.title} (--max-objects); "
                f"only the first {got:,} were read"
            )
        return (
            f"the server was still handing out continue tokens after "
            f"{self.limits.pages(self.page_size):,} pages ({got:,} {res.title}); the list was "
            "cut off there (--max-objects bounds the pages too)"
        )

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
        elif res.key == "namespaces":
            call = partial(self.core.list_namespace, **kw)
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
        """Make one GET through the client, within the bounds, and parse the raw JSON body."""
        seconds = self.limits.timeout_s
        try:
            resp = transfer.within(
                seconds, lambda _: call(_preload_content=False, _request_timeout=self.timeout)
            )
        except transfer.DeadlineExceeded:
            raise _OverLimit(f"no complete answer within {seconds:g} s (--timeout)") from None
        except transfer.AnswerTooLarge as exc:
            raise _OverLimit(f"an answer was {exc} once decompressed (--max-answer-mib)") from None
        except transfer.BadEncoding as exc:
            raise _BadAnswer(str(exc)) from None
        try:
            data = resp.data
        finally:
            resp.release_conn()
        return _parse(data)


@dataclass
class _Budget:
    """What is left to read of one resource."""

    pages: int
    objects: int
    over: bool = False
    """A page held more objects than were left."""


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
