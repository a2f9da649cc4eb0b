"""A small client for the Prometheus HTTP API and the compatible backends (Thanos, Mimir,
Cortex, VictoriaMetrics, managed services), built on httpx.

Every query is a form-encoded POST (no URL length limits); answers are gzip-compressed on the
wire; `warnings` are collected, never dropped. Retries are bounded and back off: on 429, on 5xx
other than a query timeout (a 503 `timeout` means the query was too heavy: retrying it only
multiplies the load, so the planner cuts it smaller instead), and on connection errors.
"""

from __future__ import annotations

import base64
import logging
import ssl
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson

from gpuaudit import __version__
from gpuaudit.errors import SourceError
from gpuaudit.redact import redact_headers, url_for_display

log = logging.getLogger("gpuaudit.prometheus")

_RETRY_STATUS = {429, 500, 502, 503, 504}


@dataclass(frozen=True)
class PromConfig:
    """How to reach a Prometheus-compatible API. Secrets are never printed or recorded."""

    url: str
    token: str | None = None
    token_file: Path | None = None
    username: str | None = None
    password: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    ca_file: Path | None = None
    client_cert: Path | None = None
    client_key: Path | None = None
    insecure_skip_tls_verify: bool = False
    timeout_s: float = 120.0
    retries: int = 3
    backoff_s: float = 0.5


class PromError(SourceError):
    """The server answered with an error (or not at all)."""

    def __init__(self, message: str, status: int = 0, error_type: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.error_type = error_type

    @property
    def too_big(self) -> bool:
        """The query asked for more than the backend allows: cut it smaller and try again."""
        text = str(self).lower()
        if self.status == 422 or self.error_type in ("execution", "422"):
            return any(
                w in text
                for w in ("sample", "chunk", "series", "limit", "exceed", "too many", "memory")
            )
        if self.status == 503 or self.error_type == "timeout":
            return "timed out" in text or "timeout" in text
        if self.status == 400:
            return "maximum resolution" in text or "points" in text
        return False


@dataclass
class Response:
    """One successful HTTP API response as the server returned it, plus the request that got
    it. (`gpuaudit.snapshot.answers.Answer` is the answer parsed into arrays.)"""

    params: dict[str, Any]
    """The form or query parameters sent."""
    body: dict[str, Any]
    """The body, parsed from JSON."""
    warnings: list[str]
    """The API's `warnings`, never dropped."""
    raw: bytes = b""
    """The body's bytes exactly as received (after HTTP decompression)."""


def _bearer(cfg: PromConfig) -> str | None:
    if cfg.token:
        return cfg.token
    if cfg.token_file:
        try:
            return cfg.token_file.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise SourceError(
                f"cannot read the Prometheus token file {cfg.token_file}: {exc.strerror}"
            ) from None
    return None


def _tls(cfg: PromConfig) -> bool | ssl.SSLContext:
    """httpx's `verify`: whether to verify the server, or the context that holds the CA file and
    the client certificate."""
    verify: bool | ssl.SSLContext = True
    if cfg.insecure_skip_tls_verify:
        verify = False
    elif cfg.ca_file:
        try:
            verify = ssl.create_default_context(cafile=str(cfg.ca_file))
        except (OSError, ssl.SSLError) as exc:
            raise SourceError(f"cannot load the CA file {cfg.ca_file}: {exc}") from None
    if not cfg.client_cert:
        return verify
    if not isinstance(verify, bool):
        ctx = verify
    else:
        ctx = ssl.create_default_context()
        if not verify:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
    try:
        ctx.load_cert_chain(str(cfg.client_cert), str(cfg.client_key) if cfg.client_key else None)
    except (OSError, ValueError) as exc:
        raise SourceError(f"cannot load the client certificate {cfg.client_cert}: {exc}") from None
    return ctx


class PromClient:
    """Talks to one Prometheus-compatible API; the URL may carry a path prefix
    (`https://mimir.example/prometheus`, an API-server service-proxy URL ...)."""

    def __init__(
        self,
        cfg: PromConfig,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.cfg = cfg
        self._sleep = sleep
        self.requests = 0
        headers = {"User-Agent": f"gpuaudit/{__version__}", "Accept-Encoding": "gzip"}
        headers.update(cfg.headers)
        token = _bearer(cfg)
        if token:
            headers["Authorization"] = f"Bearer {token}"
        elif cfg.username is not None:
            raw = f"{cfg.username}:{cfg.password or ''}".encode()
            headers["Authorization"] = "Basic " + base64.b64encode(raw).decode()
        verify = _tls(cfg)
        shown = url_for_display(cfg.url)
        self._where = shown.rstrip("/")
        """The base URL as messages show it: no credentials, query or trailing slash."""
        base = cfg.url.rstrip("/") + "/"
        try:
            self._http = httpx.Client(
                base_url=base,
                headers=headers,
                verify=verify,
                timeout=httpx.Timeout(cfg.timeout_s, connect=10.0),
                transport=transport,
                follow_redirects=False,
            )
        except ValueError as exc:
            raise SourceError(f"invalid Prometheus URL {shown!r}: {exc}") from None

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> PromClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- transport -------------------------------------------------------------------------
    def _request(self, method: str, path: str, data: Mapping[str, Any] | None) -> Response:
        where = f"{self._where}/{path}"
        attempt = 0
        while True:
            attempt += 1
            self.requests += 1
            log.debug("%s %s %s", method, where, redact_headers(dict(self._http.headers)))
            try:
                if method == "GET":
                    resp = self._http.get(path, params=data)
                else:
                    resp = self._http.post(path, data=data)
                body_bytes = resp.content
            except httpx.TimeoutException:
                err = PromError(f"{where}: no answer within {self.cfg.timeout_s:g} s")
                if attempt <= self.cfg.retries:
                    self._backoff(attempt, None)
                    continue
                raise err from None
            except httpx.TransportError as exc:
                msg = str(exc) or type(exc).__name__
                if attempt <= self.cfg.retries:
                    self._backoff(attempt, None)
                    continue
                raise PromError(f"cannot reach Prometheus at {where}: {msg}") from None
            try:
                return self._parse(resp, body_bytes, where, data)
            except PromError as err:
                retryable = resp.status_code in _RETRY_STATUS and not (
                    resp.status_code == 503 and err.error_type == "timeout"
                )
                if retryable and attempt <= self.cfg.retries:
                    self._backoff(attempt, resp.headers.get("Retry-After"))
                    continue
                raise

    def _backoff(self, attempt: int, retry_after: str | None) -> None:
        delay = self.cfg.backoff_s * (2 ** (attempt - 1))
        if retry_after:
            try:
                delay = max(delay, min(float(retry_after), 30.0))
            except ValueError:
                pass
        self._sleep(delay)

    def _parse(
        self, resp: httpx.Response, raw: bytes, where: str, data: Mapping[str, Any] | None
    ) -> Response:
        status = resp.status_code
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError:
            snippet = raw[:120].decode("utf-8", "replace").strip().replace("\n", " ")
            if status >= 400:
                raise PromError(
                    f"{where} answered HTTP {status} {resp.reason_phrase}: {snippet!r}", status
                ) from None
            raise PromError(
                f"{where} answered HTTP {status} with a body that is not JSON "
                f"(truncated or not a Prometheus API?): {snippet!r}",
                status,
            ) from None
        if not isinstance(body, dict):
            raise PromError(f"{where} answered JSON that is not an object", status)
        if body.get("status") != "success" or status >= 400:
            etype = str(body.get("errorType", ""))
            etext = str(body.get("error", "")) or f"HTTP {status}"
            raise PromError(f"{where}: {etype + ': ' if etype else ''}{etext}", status, etype)
        warnings = [str(w) for w in body.get("warnings", []) or [] if w]
        return Response(params=dict(data or {}), body=body, warnings=warnings, raw=raw)

    # -- API -------------------------------------------------------------------------------
    def query(self, expr: str, at: float, extra: Mapping[str, str] | None = None) -> Response:
        params: dict[str, Any] = {"query": expr, "time": _format_seconds(at)}
        params.update(extra or {})
        ans = self._request("POST", "api/v1/query", params)
        _expect(ans, "vector")
        return ans

    def query_range(
        self,
        expr: str,
        start: float,
        end: float,
        step: float,
        extra: Mapping[str, str] | None = None,
    ) -> Response:
        params: dict[str, Any] = {
            "query": expr,
            "start": _format_seconds(start),
            "end": _format_seconds(end),
            "step": _format_seconds(step),
        }
        params.update(extra or {})
        ans = self._request("POST", "api/v1/query_range", params)
        _expect(ans, "matrix")
        return ans

    def buildinfo(self) -> dict[str, Any]:
        ans = self._request("GET", "api/v1/status/buildinfo", None)
        data = ans.body.get("data")
        return data if isinstance(data, dict) else {}

    def labels(self, match: str, start: float, end: float) -> list[str]:
        ans = self._request(
            "POST",
            "api/v1/labels",
            {"match[]": match, "start": _format_seconds(start), "end": _format_seconds(end)},
        )
        data = ans.body.get("data")
        return [str(x) for x in data] if isinstance(data, list) else []

    def recording_rule_names(self) -> set[str]:
        """Names of the recording rules the server evaluates (empty when it has no rules API)."""
        ans = self._request("GET", "api/v1/rules", {"type": "record"})
        data = ans.body.get("data")
        groups = data.get("groups") if isinstance(data, dict) else None
        names: set[str] = set()
        for g in groups if isinstance(groups, list) else []:
            for r in g.get("rules", []) if isinstance(g, dict) else []:
                if isinstance(r, dict) and isinstance(r.get("name"), str):
                    names.add(r["name"])
        return names

    def metric_names(self, start: float, end: float) -> list[str]:
        ans = self._request(
            "GET",
            "api/v1/label/__name__/values",
            {"start": _format_seconds(start), "end": _format_seconds(end)},
        )
        data = ans.body.get("data")
        return [str(x) for x in data] if isinstance(data, list) else []


def _format_seconds(x: float) -> str:
    """A time or duration as a query parameter: whole seconds without a decimal point."""
    return str(int(x)) if float(x).is_integer() else f"{x:.3f}"


def _expect(ans: Response, rtype: str) -> None:
    data = ans.body.get("data")
    if not isinstance(data, dict) or data.get("resultType") != rtype:
        got = data.get("resultType") if isinstance(data, dict) else None
        raise PromError(f"expected a {rtype} answer, got {got!r}")
    if not isinstance(data.get("result"), list):
        raise PromError(f"the {rtype} answer has no result list")
