"""Faults a real server cannot be made to produce, through httpx.MockTransport."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from gpuaudit.core.errors import SourceError
from gpuaudit.sources.interface import make_window
from gpuaudit.sources.prometheus import catalogue as queries
from gpuaudit.sources.prometheus import promsource
from gpuaudit.sources.prometheus.http import PromClient, PromConfig, PromError
from gpuaudit.sources.prometheus.promsource import (
    PromCollection,
    PrometheusSource,
    collect_prometheus,
)

W = make_window(86400, 3600, 1_795_392_000)
OK_VECTOR = {"status": "success", "data": {"resultType": "vector", "result": []}}
OK_MATRIX = {"status": "success", "data": {"resultType": "matrix", "result": []}}
NAMES = {"status": "success", "data": [queries.ACT_PROF, queries.FB_USED, queries.FB_FREE]}
LABELS = {"status": "success", "data": ["UUID", "exported_pod", "gpu", "modelName"]}
BUILD = {"status": "success", "data": {"version": "2.42.0"}}


def _ok(request: httpx.Request) -> httpx.Response:
    path = request.url.path
    if path.endswith("buildinfo"):
        return httpx.Response(200, json=BUILD)
    if path.endswith("__name__/values"):
        return httpx.Response(200, json=NAMES)
    if path.endswith("/labels"):
        return httpx.Response(200, json=LABELS)
    if path.endswith("query_range"):
        return httpx.Response(200, json=OK_MATRIX)
    return httpx.Response(200, json=OK_VECTOR)


def _client(
    handler: Callable[[httpx.Request], httpx.Response],
    sleeps: list[float] | None = None,
    **cfg: object,
) -> PromClient:
    return PromClient(
        PromConfig(url="http://prom.test", **cfg),  # type: ignore[arg-type]
        transport=httpx.MockTransport(handler),
        sleep=(sleeps.append if sleeps is not None else (lambda s: None)),
    )


def test_queries_are_form_encoded_posts_with_auth_and_headers() -> None:
    seen: list[httpx.Request] = []

    def handler(req: httpx.Request) -> httpx.Response:
        seen.append(req)
        return _ok(req)

    c = _client(handler, token="s3cret-token", headers={"X-Scope-OrgID": "t1"})
    collect_prometheus(c, W)
    posts = [r for r in seen if r.url.path.endswith(("query", "query_range"))]
    assert posts and all(r.method == "POST" for r in posts)
    assert all(r.headers["content-type"] == "application/x-www-form-urlencoded" for r in posts)
    assert all(
        "query=" in r.content.decode() and "query" not in r.url.query.decode() for r in posts
    )
    assert all(r.headers["authorization"] == "Bearer s3cret-token" for r in seen)
    assert all(r.headers["x-scope-orgid"] == "t1" for r in seen)


def test_path_prefix_is_kept() -> None:
    seen: list[str] = []

    def handler(req: httpx.Request) -> httpx.Response:
        seen.append(req.url.path)
        return _ok(req)

    c = PromClient(
        PromConfig(url="http://mimir.test/prometheus"), transport=httpx.MockTransport(handler)
    )
    got = collect_prometheus(c, W)
    assert all(p.startswith("/prometheus/api/v1/") for p in seen)
    assert got.capabilities.backend == "mimir/cortex"


def test_503_burst_is_retried_with_backoff() -> None:
    calls = {"n": 0}
    sleeps: list[float] = []

    def handler(req: httpx.Request) -> httpx.Response:
        if req.url.path.endswith("/query"):
            calls["n"] += 1
            if calls["n"] <= 2:
                return httpx.Response(503, text="upstream unavailable")
        return _ok(req)

    collect_prometheus(_client(handler, sleeps), W)
    assert calls["n"] > 2
    assert sleeps[:2] == [0.5, 1.0]


def test_429_honours_retry_after() -> None:
    calls = {"n": 0}
    sleeps: list[float] = []

    def handler(req: httpx.Request) -> httpx.Response:
        calls["n"] += 1
        if calls["n"] == 1:
            return httpx.Response(
                429,
                headers={"Retry-After": "3"},
                json={"status": "error", "errorType": "too_many_requests", "error": "slow down"},
            )
        return _ok(req)

    collect_prometheus(_client(handler, sleeps), W)
    assert sleeps[0] == 3.0


def test_query_timeout_is_not_retried_but_cut_smaller() -> None:
    ranges: list[str] = []

    def handler(req: httpx.Request) -> httpx.Response:
        if req.url.path.endswith("/query"):
            body = dict(x.split("=", 1) for x in req.content.decode().split("&"))
            q = httpx.QueryParams(req.content.decode())["query"]
            ranges.append(q)
            if "[86400s]" in q and body:
                return httpx.Response(
                    503,
                    json={
                        "status": "error",
                        "errorType": "timeout",
                        "error": "query timed out in expression evaluation",
                    },
                )
        return _ok(req)

    got = collect_prometheus(_client(handler), W)
    assert got.plan["act_count"] == [
        [W.start, W.start + 43200, ""],
        [W.start + 43200, W.end, ""],
    ]


def _refusing_over_12h(
    refused: list[str], delay_s: float = 0.0
) -> Callable[[httpx.Request], httpx.Response]:
    """A backend that refuses, as too many samples (after `delay_s`), any instant query over
    a range longer than 12 hours, noting each in `refused`."""

    def handler(req: httpx.Request) -> httpx.Response:
        if req.url.path.endswith("/query"):
            q = httpx.QueryParams(req.content.decode())["query"]
            if any(int(r) > 43200 for r in re.findall(r"\[(\d+)s\]", q)):
                refused.append(q)
                time.sleep(delay_s)
                return httpx.Response(
                    422,
                    json={
                        "status": "error",
                        "errorType": "execution",
                        "error": "query processing would load too many samples into memory "
                        "in query execution",
                    },
                )
        return _ok(req)

    return handler


def test_the_planner_learns_the_limit_once_per_collection() -> None:
    """A backend that refuses any range over 12 hours as too many samples: the first window
    query is refused once and answered in halves; every later one is cut to halves before it
    is sent, so the backend refuses one query, not every one."""
    refused: list[str] = []
    got = collect_prometheus(_client(_refusing_over_12h(refused)), W)
    assert len(refused) == 1
    halves = [[W.start, W.start + 43200, ""], [W.start + 43200, W.end, ""]]
    window = [q.id for q in queries.CATALOGUE if q.kind == "window" and q.id in got.plan]
    assert len(window) >= 5
    assert all(got.plan[qid] == halves for qid in window)


def _parallel(handler: Callable[[httpx.Request], httpx.Response], parallel: int) -> PromCollection:
    return PrometheusSource(_client(handler), parallel=parallel).collect(W)


def test_parallel_queries_keep_that_many_in_flight_and_the_same_answers() -> None:
    """`--parallel-queries 3`: never more than 3 queries at the backend at once, and at some
    point 3; the plan and what was asked are those of one query at a time."""
    lock = threading.Lock()
    now, most = [0], [0]
    asked: list[list[str]] = [[], []]

    def slow(which: int) -> Callable[[httpx.Request], httpx.Response]:
        def handler(req: httpx.Request) -> httpx.Response:
            if not req.url.path.endswith(("/query", "/query_range")):
                return _ok(req)
            with lock:
                now[0] += 1
                most[0] = max(most[0], now[0])
                asked[which].append(httpx.QueryParams(req.content.decode())["query"])
            time.sleep(0.05)
            with lock:
                now[0] -= 1
            return _ok(req)

        return handler

    one = _parallel(slow(0), 1)
    assert most[0] == 1
    three = _parallel(slow(1), 3)
    assert most[0] == 3
    assert three.plan == one.plan and three.answers.keys() == one.answers.keys()
    assert sorted(asked[1]) == sorted(asked[0])


def test_parallel_queries_learn_the_limit_and_cut_the_same() -> None:
    """Queries refused while others are in flight are cut as one at a time would: every
    window query ends in halves, and at most as many are refused as were in flight."""
    refused: list[str] = []
    got = _parallel(_refusing_over_12h(refused, 0.02), 4)
    assert 1 <= len(refused) <= 4
    halves = [[W.start, W.start + 43200, ""], [W.start + 43200, W.end, ""]]
    window = [q.id for q in queries.CATALOGUE if q.kind == "window" and q.id in got.plan]
    assert len(window) >= 5
    assert all(got.plan[qid] == halves for qid in window)


@pytest.fixture
def discovering(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """Set while discovery runs: its requests (sent with `stats=all` too) told apart from the
    catalogue's."""
    flag = threading.Event()
    discover = promsource.discover

    def discovered(*args: Any, **kwargs: Any) -> Any:
        flag.set()
        try:
            return discover(*args, **kwargs)
        finally:
            flag.clear()

    monkeypatch.setattr(promsource, "discover", discovered)
    return flag


def test_an_error_among_parallel_queries_ends_the_collection_at_once(
    discovering: threading.Event,
) -> None:
    """The first query of the catalogue fails while the others sent beside it are still at
    the backend: one clear error, without waiting for their answers."""

    def handler(req: httpx.Request) -> httpx.Response:
        params = httpx.QueryParams(req.content.decode())
        if discovering.is_set():  # discovery's requests (sent with stats too) answer at once
            return _ok(req)
        if params["query"] == queries.BY_ID["act_count"].promql(W.seconds, "exported"):
            return httpx.Response(
                400, json={"status": "error", "errorType": "bad_data", "error": "parse error"}
            )
        time.sleep(10)
        return _ok(req)

    began = time.monotonic()
    with pytest.raises(PromError) as info:
        _parallel(handler, 8)
    assert "parse error" in str(info.value) and "\n" not in str(info.value)
    assert time.monotonic() - began < 6


def test_a_query_unanswered_within_the_timeout_is_cut_smaller() -> None:
    """A backend may run a query past the `timeout` it was asked to stop at: a query that
    gets no answer within `--timeout` is cut in halves like one the backend refused, said in
    the warnings, and the cut carries over to later queries."""

    def handler(req: httpx.Request) -> httpx.Response:
        if req.url.path.endswith("/query"):
            q = httpx.QueryParams(req.content.decode()).get("query", "")
            if any(int(r) > 43200 for r in re.findall(r"\[(\d+)s\]", q)):
                time.sleep(3)
        return _ok(req)

    got = PrometheusSource(_client(handler, timeout_s=1.0)).collect(W)
    halves = [[W.start, W.start + 43200, ""], [W.start + 43200, W.end, ""]]
    window = [q.id for q in queries.CATALOGUE if q.kind == "window" and q.id in got.plan]
    assert len(window) >= 5 and all(got.plan[qid] == halves for qid in window)
    slow = [w for w in got.warnings if "no answer within 1 s" in w]
    assert len(slow) == 1 and slow[0].startswith("act_count: ")


def test_a_backend_that_never_answers_ends_in_one_clear_error(
    discovering: threading.Event,
) -> None:
    """Cutting unanswered queries stops after `SLOW_CUTS`: a backend that answers nothing is
    down, not slow."""

    def handler(req: httpx.Request) -> httpx.Response:
        if not discovering.is_set() and "query" in httpx.QueryParams(req.content.decode()):
            time.sleep(3)
        return _ok(req)

    with pytest.raises(PromError) as info:
        PrometheusSource(_client(handler, timeout_s=0.5)).collect(W)
    assert "no complete answer within 0.5 s" in str(info.value)


def test_persistent_5xx_ends_in_one_clear_error() -> None:
    def handler(req: httpx.Request) -> httpx.Response:
        return httpx.Response(502, text="<html>Bad Gateway</html>")

    with pytest.raises(PromError) as info:
        collect_prometheus(_client(handler), W)
    msg = str(info.value)
    assert "502" in msg and "\n" not in msg


def test_truncated_json_is_an_error_not_a_partial_report() -> None:
    def handler(req: httpx.Request) -> httpx.Response:
        if req.url.path.endswith("/query"):
            return httpx.Response(200, content=json.dumps(OK_VECTOR).encode()[:30])
        return _ok(req)

    with pytest.raises(PromError, match="not JSON"):
        collect_prometheus(_client(handler), W)


def test_slow_answer_times_out_cleanly() -> None:
    def handler(req: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=req)

    # The first request, the build information, ends the collection (no query is sent).
    with pytest.raises(SourceError, match="did not answer /api/v1/status/buildinfo within 1 s"):
        collect_prometheus(_client(handler, timeout_s=1.0), W)


def test_error_json_becomes_one_message() -> None:
    def handler(req: httpx.Request) -> httpx.Response:
        if req.url.path.endswith("/query"):
            return httpx.Response(
                400,
                json={
                    "status": "error",
                    "errorType": "bad_data",
                    "error": "parse error: unexpected",
                },
            )
        return _ok(req)

    with pytest.raises(PromError, match="bad_data: parse error: unexpected"):
        collect_prometheus(_client(handler), W)


def test_warnings_and_partial_responses_mark_the_result_incomplete() -> None:
    def handler(req: httpx.Request) -> httpx.Response:
        if req.url.path.endswith("/query"):
            body = dict(OK_VECTOR)
            body["warnings"] = ["store 10.0.0.7:10901 unavailable: partial response"]
            return httpx.Response(200, json=body)
        return _ok(req)

    got = collect_prometheus(_client(handler), W)
    assert got.warnings and "partial response" in got.warnings[0]
    assert got.incomplete_reasons


def test_basic_auth_and_secret_never_in_errors() -> None:
    def handler(req: httpx.Request) -> httpx.Response:
        assert req.headers["authorization"].startswith("Basic ")
        return httpx.Response(401, text="unauthorized")

    with pytest.raises(PromError) as info:
        collect_prometheus(_client(handler, username="u", password="hunter2"), W)
    assert "hunter2" not in str(info.value)
