"""A small client for the Prometheus HTTP API and the compatible backends (Thanos, Mimir,
Cortex, VictoriaMetrics, managed services), built on httpx.

Every query is a form-encoded POST (no URL length limits); answers are gzip-compressed on the
wire; `warnings` are collected, never dropped, and an answer a backend marks as partial
(VictoriaMetrics' `isPartial`) says so. Retries are bounded and back off: on 429, on 5xx other
than a query timeout (a 503 `timeout` means the query was too heavy: retrying it only
multiplies the load, so the planner cuts it smaller instead), and on connection errors;
tenacity counts the tries and waits between them.

Each request is bounded as a whole (`transfer`): it must be done, last byte read, within
`timeout_s`, and its answer may not grow past `max_answer_bytes` once decompressed. A request
that runs out of time is not retried: the same request would be as slow again. A collection may
also bound all its requests together (`PromClient.allowance`, a `transfer.Allowance`): each try
is cut to what is left of it, no wait is begun that would leave no time for the try after it
(the last try's error is then the request's), and a try cut short ends the request with
`CollectionOverdue`, which no caller takes for a refusal to work around.

Query parameters of the URL (`?access_token=...`) are sent with every request, after the API
path; like the user info, they are never printed or recorded.
"""

from __future__ import annotations

import base64
import logging
import re
import ssl
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

import orjson
import tenacity

from gpuaudit import __version__
from gpuaudit.core.errors import ConfigError, SourceError
from gpuaudit.core.redact import header_secrets, redact_headers, scrub, url_for_display, url_secrets
from gpuaudit.sources.bounds import DEFAULT_ANSWER_MIB, DEFAULT_TIMEOUT_S, MIB
from gpuaudit.sources.transfer import (
    Allowance,
    AnswerTooLarge,
    BadEncoding,
    Deadline,
    DeadlineExceeded,
    read_body,
    within,
)

if TYPE_CHECKING:
    import httpx

log = logging.getLogger("gpuaudit.prometheus")

_RETRY_STATUS = {429, 500, 502, 503, 504}
"""Answers worth another try: the server is busy or briefly unwell."""
_MAX_RETRY_AFTER_S = 30.0
"""The longest `Retry-After` honoured."""
_CONNECT_S = 10.0
"""The longest wait for a connection (less when `timeout_s` is less)."""
_LEAST_TRY_S = 0.05
"""A try is not sent with less of the collection's allowance left than this."""
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_CHUNK = 1 << 16


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
    timeout_s: float = DEFAULT_TIMEOUT_S
    """Seconds one request may take, from start to last byte."""
    retries: int = 3
    backoff_s: float = 0.5
    max_answer_bytes: int = DEFAULT_ANSWER_MIB * MIB
    """The largest answer read, after decompression."""


SERIES_LIMIT_WORDS = (
    "matching timeseries exceeds",  # VictoriaMetrics
    "maximum number of series",  # Mimir
    "max number of series",  # Cortex
    "series limit",  # Thanos
    "too many series",
    "maxuniquetimeseries",
)
"""How backends say that a query selects more series than they allow."""
REASON_CHARS = 4_000
"""The most of a backend's error text kept for classifying it."""


class PromError(SourceError):
    """The server answered with an error (or not at all)."""

    def __init__(
        self,
        message: str,
        status: int = 0,
        error_type: str = "",
        reason: str = "",
        unanswered: bool = False,
        timeout: str = "",
    ) -> None:
        super().__init__(message)
        self.status = status
        self.error_type = error_type
        self.timeout = timeout
        """Why no answer came in time, in words (`the connection was accepted, but no answer
        came`); empty when the request did not run out of time."""
        self.reason = reason
        """The backend's whole error text (bounded), which the message may shorten: what the
        error is classified by."""
        self.unanswered = unanswered
        """No complete answer came within `--timeout`: the backend did not stop the query at
        the `timeout` it was asked to (a server does not enforce it at every stage of a
        query)."""

    @property
    def _text(self) -> str:
        return f"{self} {self.reason}".lower()

    @property
    def series_limit(self) -> bool:
        """The backend refused the query for the number of series it selects (VictoriaMetrics'
        `-search.maxUniqueTimeseries`, Mimir's and Cortex's series limits, Thanos' series
        limit): cutting it in time does not help, sharding it by GPU does."""
        return self.too_big and any(w in self._text for w in SERIES_LIMIT_WORDS)

    @property
    def too_big(self) -> bool:
        """The query asked for more than the backend allows: cut it smaller and try again."""
        text = self._text
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


class CollectionOverdue(SourceError):
    """The collection's allowance (`PromClient.allowance`) was spent before a request was
    done: the backend answers too slowly, or not at all. Never retried, never worked around."""


class _Again(Exception):
    """A try that failed in a way the next may not (a busy server, a dropped connection):
    `error` is what the user is told if no later try succeeds."""

    def __init__(self, error: PromError, retry_after: str | None = None) -> None:
        super().__init__(str(error))
        self.error = error
        self.retry_after = retry_after
        """The answer's `Retry-After` header, if it had one."""


@dataclass
class Response:
    """One successful HTTP API response as the server returned it, plus the request that got
    it. (`gpuaudit.snapshot.answers.Answer` is the answer parsed into arrays.)"""

    params: dict[str, Any]
    """The form or query parameters sent."""
    envelope: dict[str, Any]
    """The body parsed from JSON, its `data.result` possibly in short form: as many zeros as
    it has series (`_envelope`: a large answer's series are parsed by whoever keeps them,
    straight from `raw`). Status, result type, series count, stats, warnings: all there."""
    warnings: list[str]
    """The API's `warnings`, never dropped."""
    raw: bytes = b""
    """The body's bytes exactly as received (after HTTP decompression)."""
    partial: bool = False
    """The backend said the answer is partial (VictoriaMetrics' `"isPartial": true`: some
    storage nodes did not answer)."""
    whole: bool = True
    """Whether `envelope` holds the whole body (else `body` parses `raw` when first asked)."""
    where: str = ""
    """The request, as error messages name it."""

    @property
    def body(self) -> dict[str, Any]:
        """The whole body, parsed from JSON (from `raw` on first use where `envelope` is in
        short form: `PromError` if its series are not valid JSON)."""
        if not self.whole:
            try:
                body = orjson.loads(self.raw)
            except orjson.JSONDecodeError as exc:
                raise PromError(
                    f"{self.where} answered a body that is not JSON past its first series "
                    f"(corrupted in transit, or not a Prometheus API?): {exc}"
                ) from None
            if not isinstance(body, dict):
                raise PromError(f"{self.where} answered JSON that is not an object")
            self.envelope, self.whole = body, True
        return self.envelope


_RESULT = b'"result":['
_ROW = b'{"metric":'
_SAMPLES = ((b',"values":[', b"]]}"), (b',"value":[', b"]}"))
_SHORT_FROM = 1 << 18
"""Bytes from which an answer is parsed in short form (`_envelope`): below, whole, as it
costs little."""


def _envelope(raw: bytes) -> dict[str, Any] | None:
    """A large answer's body with `data.result` in short form: as many zeros as it has series,
    parsed without a Python object per series or point (a tenth of the time; the series are
    parsed once, by the caller that keeps them, `gpuaudit.snapshot.answers.from_bytes`). None
    where the bytes are not in the compact form Prometheus, Thanos and VictoriaMetrics write
    (each series `{"metric":{...},"values":[...]}` or `...,"value":[...]}`): the caller then
    parses them whole. The markers cannot occur inside a JSON string, where every `"` is
    escaped; the series are counted by their starts and by their samples' keys, which must
    agree, and the short document must parse with that many series."""
    head, sep, rest = raw.partition(_RESULT)
    if not sep or rest.startswith(b"]"):
        return None
    rows = rest.count(_ROW)
    last = rest.rfind(_ROW)
    if rows == 0:
        return None
    found = [(rest.find(mark, last), mark, close) for mark, close in _SAMPLES]
    at, mark, close = max(found)
    if at < 0 or rest.count(mark) != rows:
        return None
    end = rest.find(close, at)
    if end < 0 or rest[end + len(close) : end + len(close) + 1] != b"]":
        return None
    short = head + _RESULT + b",".join([b"0"] * rows) + rest[end + len(close) :]
    try:
        doc = orjson.loads(short)
    except orjson.JSONDecodeError:
        return None
    data = doc.get("data") if isinstance(doc, dict) else None
    result = data.get("result") if isinstance(data, dict) else None
    if not isinstance(result, list) or len(result) != rows:
        return None
    return dict(doc)


def _clean_secret(value: str, what: str) -> str:
    """A credential as given, without the line break or spaces a file or `$(cat ...)` leaves
    around it; `ConfigError` (never quoting it) when one is left inside."""
    text = value.strip()
    if _CONTROL.search(text):
        raise ConfigError(
            f"{what} holds a line break or another control character (not shown); "
            "check how it was written (a file with Windows line ends?)"
        )
    return text


def _bearer(cfg: PromConfig) -> str | None:
    if cfg.token:
        return _clean_secret(cfg.token, "the Prometheus token (--prometheus-token)") or None
    if cfg.token_file:
        try:
            text = cfg.token_file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            why = exc.strerror if isinstance(exc, OSError) else "it is not UTF-8 text"
            raise SourceError(
                f"cannot read the Prometheus token file {cfg.token_file}: {why}"
            ) from None
        token = _clean_secret(text, f"the Prometheus token file {cfg.token_file}")
        if not token:
            raise SourceError(f"the Prometheus token file {cfg.token_file} is empty")
        return token
    return None


def _split_url(url: str) -> tuple[str, httpx.QueryParams]:
    """The base URL (scheme, user info, host, path; no query or fragment) and the URL's query
    parameters, which go with every request after the API path."""
    import httpx

    parts = urlsplit(url.strip())
    base = urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/") + "/", "", ""))
    return base, httpx.QueryParams(parts.query)


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
        """`sleep` waits between tries (tests pass one that only notes the waits)."""
        import httpx

        self.cfg = cfg
        self._sleep = sleep
        self.allowance: Allowance | None = None
        """The time all requests together may take (`PrometheusSource.collect` sets it); None:
        each request is bounded by `timeout_s` alone."""
        self.requests = 0
        self._counting = threading.Lock()
        self.asked: list[tuple[str, dict[str, Any], dict[str, Any]]] | None = None
        """Where a list (`PrometheusSource.collect` sets one for discovery): every query and
        range query is sent with `stats=all` and noted here (its PromQL, the parameters sent,
        the answer's envelope), for the samples it read."""
        headers = {"User-Agent": f"gpuaudit/{__version__}", "Accept-Encoding": "gzip"}
        headers.update(cfg.headers)  # checked once, where the option was resolved
        token = _bearer(cfg)
        if token:
            headers["Authorization"] = f"Bearer {token}"
        elif cfg.username is not None:
            user = cfg.username.strip("\r\n")
            password = (cfg.password or "").strip("\r\n")
            raw = f"{user}:{password}".encode()
            headers["Authorization"] = "Basic " + base64.b64encode(raw).decode()
        verify = _tls(cfg)
        shown = url_for_display(cfg.url)
        self._where = shown.rstrip("/")
        """The base URL as messages show it: no credentials, query or trailing slash."""
        self._secrets = header_secrets(headers) + url_secrets(cfg.url)
        for secret in (cfg.password, cfg.token):
            if secret:
                self._secrets += [secret, secret.strip()]
        try:
            base, params = _split_url(cfg.url)
            self._http = httpx.Client(
                base_url=base,
                params=params,
                headers=headers,
                verify=verify,
                timeout=httpx.Timeout(cfg.timeout_s, connect=min(_CONNECT_S, cfg.timeout_s)),
                transport=transport,
                follow_redirects=False,
            )
        except (ValueError, httpx.InvalidURL) as exc:
            why = self._scrub(str(exc))
            raise SourceError(f"invalid Prometheus URL {shown!r}: {why}") from None

    @property
    def base_url(self) -> str:
        """The API's URL as messages show it: no credentials, query or trailing slash."""
        return self._where

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> PromClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _scrub(self, text: str) -> str:
        """`text` without any credential this client sends (the last guard on messages)."""
        return scrub(text, self._secrets)

    # -- transport -------------------------------------------------------------------------
    def _request(
        self,
        method: str,
        path: str,
        data: Mapping[str, Any] | None,
        *,
        retry_timeouts: bool = True,
    ) -> Response:
        """One API call: tried again, with waits that double, while `_attempt` says that a
        failure may pass (`_Again`); the last failure's one-line `PromError` otherwise.
        `retry_timeouts=False`: a try that runs out of time (connecting too) is the last."""
        where = f"{self._where}/{path}"
        allowance = self.allowance
        if allowance is not None and allowance.granting:
            allowance.grant()
        retrying = tenacity.Retrying(
            stop=self._stop,
            retry=tenacity.retry_if_exception_type(_Again),
            wait=self._wait,
            sleep=self._sleep,
            reraise=True,
        )
        try:
            return retrying(self._attempt, method, path, data, where, retry_timeouts)
        except _Again as again:
            raise again.error from None

    def _seconds(self, path: str) -> float:
        """How long the next try of a request on `path` may take: `timeout_s`, or what is left
        of the allowance when that is less; `CollectionOverdue` when it is spent."""
        allowance = self.allowance
        if allowance is None:
            return self.cfg.timeout_s
        left = allowance.left()
        if left < _LEAST_TRY_S:
            raise self._overdue(path, allowance)
        return min(self.cfg.timeout_s, left)

    def _overdue(self, path: str, allowance: Allowance) -> CollectionOverdue:
        n, each = allowance.requests, f"--timeout {allowance.per_request_s:g} s"
        needed = f"{each} for the one request" if n == 1 else f"{each} for each of {n:,} requests"
        return CollectionOverdue(
            f"Prometheus at {self._where} went past the collection's deadline of "
            f"{_seconds_text(allowance.seconds)} s ({needed} it needed) while waiting for "
            f"/{path}: it answers too slowly, or not at all; check its load, or raise --timeout"
        )

    def _attempt(
        self,
        method: str,
        path: str,
        data: Mapping[str, Any] | None,
        where: str,
        retry_timeouts: bool = True,
    ) -> Response:
        """One try of a request: its answer, a `PromError` not worth another try, or `_Again`
        holding the error to give if no later try succeeds."""
        import httpx

        seconds = self._seconds(path)
        with self._counting:  # queries may be in flight together
            self.requests += 1
        log.debug("%s %s %s", method, where, redact_headers(dict(self._http.headers)))
        try:
            resp, body_bytes = within(seconds, lambda dl: self._send(method, path, data, dl))
        except DeadlineExceeded:
            # The allowance cut this try short: it is spent. (When both end together, this
            # request's own timeout is what it ran into.)
            if self.allowance is not None and seconds < self.cfg.timeout_s - _LEAST_TRY_S:
                raise self._overdue(path, self.allowance) from None
            raise PromError(
                f"{where}: no complete answer within {self.cfg.timeout_s:g} s (--timeout); "
                "raise --timeout, or audit a shorter --window",
                unanswered=True,
                timeout="the connection was accepted, but no complete answer came",
            ) from None
        except AnswerTooLarge as exc:
            raise PromError(
                f"{where}: the answer is {exc} once decompressed "
                "(--max-answer-mib); raise --max-answer-mib if it is genuine, or narrow "
                "the scan with --cluster-label or a shorter --window"
            ) from None
        except BadEncoding as exc:
            raise PromError(f"{where}: cannot read the answer: {exc}") from None
        except httpx.TransportError as exc:
            if isinstance(exc, httpx.TimeoutException):
                error = PromError(
                    f"{where}: no answer within {self.cfg.timeout_s:g} s (--timeout)",
                    unanswered=isinstance(exc, httpx.ReadTimeout),
                    timeout=_timed_out(exc, self.cfg.timeout_s),
                )
                # A read that timed out is as slow again when retried: give up at once.
                if isinstance(exc, httpx.ReadTimeout) or not retry_timeouts:
                    raise error from None
            else:
                msg = self._scrub(str(exc) or type(exc).__name__)
                error = PromError(f"cannot reach Prometheus at {where}: {msg}")
            raise _Again(error) from None
        except httpx.HTTPError as exc:
            msg = self._scrub(str(exc) or type(exc).__name__)
            raise PromError(f"cannot query Prometheus at {where}: {msg}") from None
        try:
            return self._parse(resp, body_bytes, where, data)
        except PromError as err:
            # A 503 `timeout` is a query too heavy to finish: retrying it only multiplies the
            # load, so the planner cuts it smaller instead.
            retryable = resp.status_code in _RETRY_STATUS and not (
                resp.status_code == 503 and err.error_type == "timeout"
            )
            if retryable:
                raise _Again(err, resp.headers.get("Retry-After")) from None
            raise

    def _send(
        self, method: str, path: str, data: Mapping[str, Any] | None, deadline: Deadline
    ) -> tuple[httpx.Response, bytes]:
        """One request and its body, read within `deadline` and the size cap."""
        if method == "GET":
            req = self._http.build_request("GET", path, params=data)
        else:
            req = self._http.build_request(method, path, data=data)
        resp = self._http.send(req, stream=True)
        try:
            deadline.check()
            limit = self.cfg.max_answer_bytes
            encoding = resp.headers.get("Content-Encoding", "")
            length = resp.headers.get("Content-Length", "")
            if encoding.strip().lower() in ("", "identity") and length.strip().isdecimal():
                if int(length) > limit:
                    raise AnswerTooLarge(limit)
            if resp.is_stream_consumed:  # held in memory already (a transport in tests)
                body = read_body([resp.content], "", limit, deadline)
            else:
                body = read_body(resp.iter_raw(_CHUNK), encoding, limit, deadline)
        finally:
            resp.close()
        return resp, body

    def _wait(self, state: tenacity.RetryCallState) -> float:
        """Seconds to wait before the next try: `backoff_s`, doubled after every failed try,
        or the server's `Retry-After` in seconds when that is longer (at most
        `_MAX_RETRY_AFTER_S`)."""
        delay = tenacity.wait_exponential(multiplier=self.cfg.backoff_s, exp_base=2)(state)
        again = state.outcome.exception() if state.outcome is not None else None
        retry_after = again.retry_after if isinstance(again, _Again) else None
        if retry_after:
            try:
                delay = max(delay, min(float(retry_after), _MAX_RETRY_AFTER_S))
            except ValueError:
                pass
        return delay

    def _stop(self, state: tenacity.RetryCallState) -> bool:
        """Whether to stop trying: after `retries` more tries, or when the collection's
        allowance is too short for the wait before the next try and the try itself. Then the
        last try's error is the request's (it says what went wrong), and no time is spent
        waiting for a try that could not be sent."""
        if state.attempt_number > self.cfg.retries:
            return True
        allowance = self.allowance
        return allowance is not None and allowance.left() < self._wait(state) + _LEAST_TRY_S

    def _parse(
        self, resp: httpx.Response, raw: bytes, where: str, data: Mapping[str, Any] | None
    ) -> Response:
        status = resp.status_code
        short = _envelope(raw) if status < 400 and len(raw) >= _SHORT_FROM else None
        try:
            body = short if short is not None else orjson.loads(raw)
        except orjson.JSONDecodeError:
            snippet = raw[:120].decode("utf-8", "replace").strip().replace("\n", " ")
            snippet = self._scrub(snippet)
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
            etype = str(body.get("errorType", ""))[:80]
            whole = str(body.get("error", ""))
            # Some backends (VictoriaMetrics) write the whole query first and the reason last:
            # keep both ends of a long text.
            etext = whole if len(whole) <= 500 else f"{whole[:160]} ... {whole[-340:]}"
            text = self._scrub(
                f"{where}: {etype + ': ' if etype else ''}{etext or f'HTTP {status}'}"
            )
            reason = self._scrub(whole[: REASON_CHARS // 2] + " " + whole[-REASON_CHARS // 2 :])
            raise PromError(text, status, etype, reason)
        return Response(
            params=dict(data or {}),
            envelope=body,
            warnings=_warnings(body.get("warnings")),
            raw=raw,
            partial=body.get("isPartial") is True,
            whole=short is None,
            where=where,
        )

    # -- API -------------------------------------------------------------------------------
    @property
    def eval_timeout(self) -> str:
        """The evaluation timeout asked of the server with every query (`timeout`, which
        Prometheus, Thanos, Mimir and VictoriaMetrics honour up to their own limit): nine
        tenths of the request's deadline, so that a query too heavy to finish in time is
        stopped by the server, which says so (a timeout error the planner answers by cutting
        the query smaller), before gpuaudit's own deadline would end the whole collection."""
        return f"{max(1, int(self.cfg.timeout_s * 900))}ms"

    def query(
        self,
        expr: str,
        at: float,
        extra: Mapping[str, str] | None = None,
        rtype: str = "vector",
    ) -> Response:
        """An instant query at `at`; its answer must be of `rtype` (`matrix` for a range
        selector)."""
        params: dict[str, Any] = {
            "query": expr,
            "time": _format_seconds(at),
            "timeout": self.eval_timeout,
        }
        params.update(extra or {})
        ans = self._query("api/v1/query", params)
        _expect(ans, rtype)
        return ans

    def _query(self, path: str, params: dict[str, Any]) -> Response:
        """A query's request; with `asked` set, sent with `stats=all` and noted there."""
        if self.asked is None:
            return self._request("POST", path, params)
        params.setdefault("stats", "all")
        ans = self._request("POST", path, params)
        self.asked.append((str(params.get("query", "")), ans.params, ans.envelope))
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
            "timeout": self.eval_timeout,
            # VictoriaMetrics moves a range of 50 points or more onto multiples of its step
            # (for its response cache) unless told not to: the buckets of a window whose end
            # is not on that grid (hourly rules evaluated off the hour) would come back an
            # offset earlier. Other backends ignore it.
            "nocache": "1",
        }
        params.update(extra or {})
        ans = self._query("api/v1/query_range", params)
        _expect(ans, "matrix")
        return ans

    def buildinfo(self) -> dict[str, Any]:
        """The server's build information (`data`; empty when it gives none). A try that runs
        out of time is not retried: a server that cannot answer this cannot be audited."""
        ans = self._request("GET", BUILDINFO, None, retry_timeouts=False)
        data = ans.body.get("data")
        return data if isinstance(data, dict) else {}

    def labels(self, match: str, start: float, end: float) -> Listing:
        """The label names of the series `match` selects in the time range."""
        ans = self._request(
            "POST",
            "api/v1/labels",
            {"match[]": match, "start": _format_seconds(start), "end": _format_seconds(end)},
        )
        return Listing.of(ans)

    def label_values(self, name: str, match: str, start: float, end: float) -> Listing:
        """The values of label `name` (a valid label name) on the series `match` selects in the
        time range."""
        ans = self._request(
            "GET",
            f"api/v1/label/{name}/values",
            {"match[]": match, "start": _format_seconds(start), "end": _format_seconds(end)},
        )
        return Listing.of(ans)

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

    def metric_names(self, start: float, end: float) -> Listing:
        """The metric names with series in the time range."""
        ans = self._request(
            "GET",
            "api/v1/label/__name__/values",
            {"start": _format_seconds(start), "end": _format_seconds(end)},
        )
        return Listing.of(ans)


@dataclass(frozen=True)
class Listing:
    """A list of names the API gave (label names, metric names), and whether it may be
    missing some."""

    names: list[str]
    warnings: list[str]
    """The API's `warnings` for this answer."""
    partial: bool
    """The backend marked the answer partial."""
    well_formed: bool = True
    """`data` was a list of strings."""

    @classmethod
    def of(cls, ans: Response) -> Listing:
        data = ans.body.get("data")
        ok = isinstance(data, list) and all(isinstance(x, str) for x in data)
        names = [x for x in data if isinstance(x, str)] if isinstance(data, list) else []
        return cls(names, ans.warnings, ans.partial, ok)

    @property
    def trusted(self) -> bool:
        """Nothing says the list may be missing names."""
        return self.well_formed and not self.warnings and not self.partial

    def doubt(self) -> str:
        """Why the list may be missing names, in words."""
        why = []
        if self.partial:
            why.append("the backend marked it partial")
        if not self.well_formed:
            why.append("it was not a list of names")
        why += [f"warning: {w}" for w in self.warnings]
        return "; ".join(why)


_MAX_WARNINGS = 20
"""Warnings kept of one answer; the rest are counted."""


def _warnings(raw: Any) -> list[str]:
    """The `warnings` of an answer as a list of texts (a single text is one warning), each cut
    to a readable length, the first `_MAX_WARNINGS` of them and a count of the rest."""
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, list):
        return [] if raw is None else [f"unreadable warnings field ({type(raw).__name__})"]
    texts = [str(w)[:500] for w in raw if w]
    if len(texts) > _MAX_WARNINGS:
        more = len(texts) - _MAX_WARNINGS
        texts = [*texts[:_MAX_WARNINGS], f"... and {more} more warnings"]
    return texts


_TOKEN_CHARS = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
"""The characters of an HTTP header name (RFC 9110 `token`)."""


def check_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """Extra headers, checked: names are HTTP tokens and values have no line breaks or other
    control characters (the space and line break around a value are dropped). `ConfigError`
    otherwise; the message names the header, never its value."""
    out: dict[str, str] = {}
    for name, value in headers.items():
        if not _TOKEN_CHARS.match(name):
            raise ConfigError(
                "an extra header has a name that is not an HTTP header name (not shown, it may "
                "hold a secret); write each as 'Name: value'"
            )
        clean = value.strip()
        if _CONTROL.search(clean):
            raise ConfigError(
                f"the value of the header {name} holds a line break or another control "
                "character (not shown); check how it was written"
            )
        out[name] = clean
    return out


BUILDINFO = "api/v1/status/buildinfo"
"""The build information's path: the first request of a collection."""


def _timed_out(exc: Exception, timeout_s: float) -> str:
    """Why an httpx timeout came, in words."""
    import httpx

    if isinstance(exc, httpx.ConnectTimeout):
        return f"no connection was made within {min(_CONNECT_S, timeout_s):g} s"
    if isinstance(exc, httpx.ReadTimeout):
        return "the connection was accepted, but no answer came"
    return "the request could not be sent in time"


def _seconds_text(seconds: float) -> str:
    """Seconds as messages show them: whole from 10 on, else to a tenth."""
    return f"{seconds:,.0f}" if seconds >= 10 else f"{seconds:.1f}"


def _format_seconds(x: float) -> str:
    """A time or duration as a query parameter: whole seconds without a decimal point."""
    return str(int(x)) if float(x).is_integer() else f"{x:.3f}"


def _expect(ans: Response, rtype: str) -> None:
    data = ans.envelope.get("data")
    if not isinstance(data, dict) or data.get("resultType") != rtype:
        got = data.get("resultType") if isinstance(data, dict) else None
        raise PromError(f"expected a {rtype} answer, got {got!r}")
    if not isinstance(data.get("result"), list):
        raise PromError(f"the {rtype} answer has no result list")
