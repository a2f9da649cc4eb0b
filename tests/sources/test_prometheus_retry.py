"""Which failed requests the Prometheus client tries again, how often, how long it waits
between tries, and the one line a user sees when the tries run out."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from gpuaudit.sources.prometheus.http import PromClient, PromConfig, PromError

OK = {"status": "success", "data": {"resultType": "vector", "result": []}}
WHERE = "http://prom.test/api/v1/query"

Handler = Callable[[httpx.Request], httpx.Response]


class Backend:
    """A mock backend that gives `failures` bad answers (or raises them), then good ones,
    and counts the requests it was sent."""

    def __init__(self, fail: Handler, failures: int = 1_000) -> None:
        self.fail = fail
        self.failures = failures
        self.calls = 0

    def __call__(self, req: httpx.Request) -> httpx.Response:
        self.calls += 1
        if self.calls <= self.failures:
            return self.fail(req)
        return httpx.Response(200, json=OK)


def _query(backend: Backend, **cfg: object) -> tuple[PromClient, list[float]]:
    sleeps: list[float] = []
    client = PromClient(
        PromConfig(url="http://prom.test", **cfg),  # type: ignore[arg-type]
        transport=httpx.MockTransport(backend),
        sleep=sleeps.append,
    )
    client.query("up", 0)
    return client, sleeps


def _status(code: int, **kw: object) -> Handler:
    return lambda req: httpx.Response(code, **kw)  # type: ignore[arg-type]


def _raise(exc: type[httpx.RequestError]) -> Handler:
    def handler(req: httpx.Request) -> httpx.Response:
        raise exc("boom", request=req)

    return handler


@pytest.mark.parametrize("code", [429, 500, 502, 503, 504])
def test_busy_and_server_errors_are_tried_again_with_doubling_waits(code: int) -> None:
    backend = Backend(_status(code, text="busy"), failures=3)
    client, sleeps = _query(backend)
    assert backend.calls == 4 and client.requests == 4
    assert sleeps == [0.5, 1.0, 2.0]


def test_the_tries_run_out_in_one_line_naming_the_status() -> None:
    backend = Backend(_status(502, text="<html>Bad Gateway</html>"))
    with pytest.raises(PromError) as info:
        _query(backend, retries=2, backoff_s=0.25)
    assert backend.calls == 3
    assert str(info.value) == (f"{WHERE} answered HTTP 502 Bad Gateway: '<html>Bad Gateway</html>'")
    assert info.value.status == 502 and not info.value.unanswered


def test_no_retries_means_one_try() -> None:
    backend = Backend(_status(503, text="busy"))
    with pytest.raises(PromError):
        _query(backend, retries=0)
    assert backend.calls == 1


@pytest.mark.parametrize("code", [400, 401, 403, 404, 422, 501])
def test_client_errors_and_other_statuses_are_not_tried_again(code: int) -> None:
    body = {"status": "error", "errorType": "bad_data", "error": "no"}
    backend = Backend(_status(code, json=body))
    with pytest.raises(PromError, match=f"{WHERE}: bad_data: no"):
        _query(backend)
    assert backend.calls == 1


def test_a_body_that_is_not_json_is_not_tried_again_when_the_status_is_ok() -> None:
    backend = Backend(_status(200, text="<html>login</html>"))
    with pytest.raises(PromError, match="not JSON"):
        _query(backend)
    assert backend.calls == 1


def test_a_query_timeout_is_not_tried_again_but_another_503_is() -> None:
    timeout = {"status": "error", "errorType": "timeout", "error": "query timed out"}
    backend = Backend(_status(503, json=timeout))
    with pytest.raises(PromError) as info:
        _query(backend)
    assert backend.calls == 1 and info.value.too_big
    unavailable = {"status": "error", "errorType": "unavailable", "error": "try later"}
    backend = Backend(_status(503, json=unavailable), failures=1)
    _query(backend)
    assert backend.calls == 2


@pytest.mark.parametrize(
    ("header", "waits"),
    [
        ("3", [3.0, 3.0]),  # longer than the backoff: waited
        ("0.7", [0.7, 1.0]),  # longer than the first wait only
        ("3600", [30.0, 30.0]),  # capped
        ("Wed, 21 Oct 2015 07:28:00 GMT", [0.5, 1.0]),  # a date: ignored
    ],
)
def test_retry_after_lengthens_the_wait_up_to_a_cap(header: str, waits: list[float]) -> None:
    backend = Backend(_status(429, headers={"Retry-After": header}, text="slow"), failures=2)
    _, sleeps = _query(backend)
    assert sleeps == waits


def test_connection_errors_are_tried_again_then_said_in_one_line() -> None:
    backend = Backend(_raise(httpx.ConnectError))
    with pytest.raises(PromError) as info:
        _query(backend)
    assert backend.calls == 4
    assert str(info.value) == f"cannot reach Prometheus at {WHERE}: boom"
    assert not info.value.unanswered


def test_a_connection_error_then_an_answer_is_an_answer() -> None:
    backend = Backend(_raise(httpx.RemoteProtocolError), failures=2)
    client, sleeps = _query(backend)
    assert backend.calls == 3 and client.requests == 3 and sleeps == [0.5, 1.0]


def test_a_connect_timeout_is_tried_again_a_read_timeout_is_not() -> None:
    backend = Backend(_raise(httpx.ConnectTimeout))
    with pytest.raises(PromError) as info:
        _query(backend, timeout_s=7)
    assert backend.calls == 4
    assert str(info.value) == f"{WHERE}: no answer within 7 s (--timeout)"
    assert not info.value.unanswered
    backend = Backend(_raise(httpx.ReadTimeout))
    with pytest.raises(PromError) as info:
        _query(backend, timeout_s=7)
    assert backend.calls == 1
    assert str(info.value) == f"{WHERE}: no answer within 7 s (--timeout)"
    assert info.value.unanswered


def test_other_request_errors_are_not_tried_again() -> None:
    backend = Backend(_raise(httpx.DecodingError))
    with pytest.raises(PromError) as info:
        _query(backend)
    assert backend.calls == 1
    assert str(info.value) == f"cannot query Prometheus at {WHERE}: boom"


def test_an_answer_too_large_is_not_tried_again_whatever_its_status() -> None:
    backend = Backend(_status(503, text="x" * 200))
    with pytest.raises(PromError, match="--max-answer-mib"):
        _query(backend, max_answer_bytes=100)
    assert backend.calls == 1
