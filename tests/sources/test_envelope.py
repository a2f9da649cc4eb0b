"""A large answer's body parsed in short form (`http._envelope`): its series counted, not
turned into Python objects (the caller that keeps them reads them from the bytes); anything
not in the compact form Prometheus and VictoriaMetrics write is parsed whole."""

from __future__ import annotations

import json
from typing import Any

import httpx
import orjson
import pytest

from gpuaudit.sources.prometheus import http
from gpuaudit.sources.prometheus.http import PromClient, PromConfig, PromError


def _matrix(rows: int, extra: str = "") -> bytes:
    series = [
        {
            "metric": {"__name__": "m", "pod": f"p{i}", "note": 'a,"values":[1]]}]x'},
            "values": [[1700000000 + 60 * j, str(0.5 * j)] for j in range(3)],
        }
        for i in range(rows)
    ]
    doc: dict[str, Any] = {
        "status": "success",
        "data": {
            "resultType": "matrix",
            "result": series,
            "stats": {"samples": {"totalQueryableSamples": 42}},
        },
    }
    if extra:
        doc["warnings"] = [extra]
    return orjson.dumps(doc)


def test_a_matrix_is_its_envelope_with_a_zero_per_series() -> None:
    raw = _matrix(5, extra='odd ]]}] warning "result":[')
    doc = http._envelope(raw)
    assert doc is not None
    whole = json.loads(raw)
    assert doc["data"]["result"] == [0] * 5
    assert doc["data"]["stats"] == whole["data"]["stats"]
    assert doc["warnings"] == whole["warnings"]
    assert doc["data"]["resultType"] == "matrix"


def test_a_vector_with_victoriametrics_stats_at_the_top() -> None:
    raw = (
        b'{"status":"success","isPartial":true,"data":{"resultType":"vector","result":['
        b'{"metric":{"a":"1"},"value":[1700000000,"1"]},'
        b'{"metric":{"a":"2"},"value":[1700000000,"NaN"]}]},'
        b'"stats":{"seriesFetched":"7","executionTimeMsec":3}}'
    )
    doc = http._envelope(raw)
    assert doc is not None
    assert doc["data"]["result"] == [0, 0]
    assert doc["isPartial"] is True and doc["stats"]["seriesFetched"] == "7"


@pytest.mark.parametrize(
    "raw",
    [
        # Spaced (another writer): parsed whole.
        b'{"status": "success", "data": {"resultType": "matrix", "result": [{"metric": {}, '
        b'"values": [[1, "1"]]}]}}',
        # Keys in another order.
        b'{"status":"success","data":{"resultType":"matrix","result":[{"values":[[1,"1"]],'
        b'"metric":{}}]}}',
        # Series that do not all have samples where the count says.
        b'{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},'
        b'"values":[[1,"1"]]},{"metric":{}}]}}',
        # Empty result.
        b'{"status":"success","data":{"resultType":"matrix","result":[]}}',
        # Cut short.
        b'{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},'
        b'"values":[[1,"1"]]}',
    ],
)
def test_what_is_not_in_the_compact_form_is_left_to_the_whole_parse(raw: bytes) -> None:
    assert http._envelope(raw) is None


def _client(body: bytes) -> PromClient:
    def handler(req: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=body, headers={"Content-Type": "application/json"})

    return PromClient(PromConfig(url="http://p.test"), transport=httpx.MockTransport(handler))


def test_a_large_answer_is_kept_in_short_form_and_parsed_whole_on_demand(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(http, "_SHORT_FROM", 0)
    raw = _matrix(4)
    ans = _client(raw).query_range("m", 1700000000, 1700000180, 60)
    assert not ans.whole and ans.envelope["data"]["result"] == [0] * 4
    assert ans.body == json.loads(raw)
    assert ans.whole


def test_series_that_are_not_json_fail_in_one_line_when_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A body corrupted inside its series (a fault no real server makes: a fake transport)
    passes the envelope, and fails as a `PromError` naming the request when read whole."""
    monkeypatch.setattr(http, "_SHORT_FROM", 0)
    raw = _matrix(3).replace(b'"0.5"', b'"0.5', 1)
    ans = _client(raw).query_range("m", 1700000000, 1700000180, 60)
    assert not ans.whole
    with pytest.raises(PromError, match="not JSON past its first series"):
        _ = ans.body
