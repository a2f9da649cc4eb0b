"""A Prometheus-compatible backend cannot make a scan wait, grow or ask without end: one request
is done within `--timeout`, last byte included; one answer stops at `--max-answer-mib`; a
collection sends at most `--max-queries` queries. Through the real client and real HTTP, the
fault server (tests/support/promfault.py) in front of a real Prometheus."""

from __future__ import annotations

import gzip
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuaudit.cli import app
from gpuaudit.core.errors import SourceError
from gpuaudit.sources.bounds import Limits
from gpuaudit.sources.interface import Window
from gpuaudit.sources.prometheus.catalogue import CATALOGUE
from gpuaudit.sources.prometheus.http import PromClient, PromConfig
from gpuaudit.sources.prometheus.promsource import PrometheusSource
from gpuaudit.sources.transfer import AnswerTooLarge, read_body
from tests.support.apiserver import KubeAPIServer
from tests.support.promfault import (
    QUERY_PATHS,
    PromFaultServer,
    Reply,
    answer,
    dripped,
    gzip_bomb,
    wait_for,
)
from tests.support.promserver import Backfilled

runner = CliRunner()
OK_VECTOR = b'{"status":"success","data":{"resultType":"vector","result":[]}'
GIB = 1024**3


@pytest.fixture(scope="session")
def bomb() -> bytes:
    """3 MB of gzip that inflate to 3 GiB of valid JSON (an empty answer and a sea of spaces)."""
    return gzip_bomb(3 * GIB, OK_VECTOR, b"}")


@pytest.fixture
def fault(prom_url: str) -> Iterator[PromFaultServer]:
    with PromFaultServer(prom_url) as srv:
        yield srv


def _scan(url: str, b: Backfilled, *extra: str) -> tuple[int, str]:
    args = ["scan", "-f", "json", "-q", "--prometheus-url", url, "--no-kubernetes"]
    res = runner.invoke(app, [*args, "--window", f"{b.days}d", "--end", str(b.end), *extra])
    return res.exit_code, res.output


def test_a_gzip_bomb_stops_at_the_cap_with_one_error(
    fault: PromFaultServer, bomb: bytes, scenario_tsdb: Backfilled
) -> None:
    assert len(bomb) < 4_000_000
    headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
    fault.faults.append(answer(QUERY_PATHS, Reply(200, bomb, headers)))
    code, out = _scan(fault.url, scenario_tsdb, "--max-answer-mib", "16")
    assert code == 2
    lines = [ln for ln in out.splitlines() if ln.strip()]
    assert len(lines) == 1, out
    assert "larger than 16 MiB once decompressed (--max-answer-mib)" in lines[0]
    assert "Traceback" not in out


def test_the_decoder_never_holds_more_than_the_cap(bomb: bytes) -> None:
    # Fed the bomb in network-sized pieces, the body never grows past the cap plus one byte.
    sizes: list[int] = []
    pieces = (bomb[i : i + 65536] for i in range(0, len(bomb), 65536))

    def fed() -> Iterator[bytes]:
        for p in pieces:
            sizes.append(len(p))
            yield p

    with pytest.raises(AnswerTooLarge):
        read_body(fed(), "gzip", 8 * 1024 * 1024)
    # It stopped long before the 3 MB of input were read (each piece inflates about 1000-fold).
    assert sum(sizes) < 100_000
    assert read_body([gzip.compress(b"{}")], "gzip", 2) == b"{}"


def test_an_answer_larger_than_the_cap_without_compression(
    fault: PromFaultServer, scenario_tsdb: Backfilled
) -> None:
    big = OK_VECTOR + b" " * (2 * 1024 * 1024) + b"}"
    fault.faults.append(answer(QUERY_PATHS, Reply(200, big)))
    code, out = _scan(fault.url, scenario_tsdb, "--max-answer-mib", "1")
    assert code == 2 and "larger than 1 MiB" in out


def test_a_dripped_answer_does_not_outlive_the_timeout(
    fault: PromFaultServer, scenario_tsdb: Backfilled
) -> None:
    # The answer arrives a byte every 0.1 s: no read ever waits a second, the whole would
    # take over 6 s, and --timeout 1 bounds the whole.
    fault.faults.append(dripped(QUERY_PATHS, 0.1))
    code, out = _scan(fault.url, scenario_tsdb, "--timeout", "1")
    assert code == 2, out
    assert "no complete answer within 1 s (--timeout)" in out
    # A request that ran out of time is not sent again.
    sent = [c.params["query"][0] for c in fault.calls if c.path in QUERY_PATHS]
    assert sent and len(sent) == len(set(sent))


def test_dripped_headers_do_not_outlive_the_timeout(
    fault: PromFaultServer, scenario_tsdb: Backfilled
) -> None:
    fault.faults.append(dripped(QUERY_PATHS, 0.1, head=True))
    code, out = _scan(fault.url, scenario_tsdb, "--timeout", "1")
    assert code == 2, out
    assert "no complete answer within 1 s (--timeout)" in out


def test_the_timeout_is_enough_for_an_answer_that_comes_in_time(
    fault: PromFaultServer, scenario_tsdb: Backfilled
) -> None:
    # Dripped, but done well within the deadline: the answer is used.
    slow = Reply(200, OK_VECTOR + b"}", drip_s=0.001)
    fault.faults.append(answer(("/api/v1/query",), slow))
    code, out = _scan(fault.url, scenario_tsdb, "--timeout", "30")
    assert code == 0, out


def test_a_window_of_millions_of_steps_is_refused_before_any_query(
    fault: PromFaultServer,
) -> None:
    # A window of 50 million hours: each hourly query would take some 4,500 requests; 10,000
    # is the bound for all of them together, and nothing at all is sent.
    w = Window(start=0, end=3600 * 50_000_000, step=3600)
    with PromClient(PromConfig(url=fault.url)) as client:
        with pytest.raises(SourceError, match=r"would take [\d,]+ queries.*--max-queries"):
            PrometheusSource(client).collect(w)
    assert fault.paths() == []


def test_cutting_queries_smaller_stops_at_the_query_bound(
    small_prom_url: str, scenario_tsdb: Backfilled
) -> None:
    # The plan (one query per catalogue entry: 2 days fit one range query) fits the bound
    # exactly, so it is admitted; the server refuses every whole-window query, and cutting
    # them smaller would take more queries than that.
    bound = len(CATALOGUE)
    with PromFaultServer(small_prom_url) as srv:
        code, out = _scan(srv.url, scenario_tsdb, "--max-queries", str(bound))
        assert code == 2, out
        assert "cutting the queries smaller" in out
        assert f"more than {bound} queries (--max-queries)" in out
        sent = sum(p in QUERY_PATHS for p in srv.paths())
    assert 0 < sent <= bound
    # One fewer and the plan itself is refused up front, before anything is sent.
    with PromFaultServer(small_prom_url) as srv:
        code, out = _scan(srv.url, scenario_tsdb, "--max-queries", str(bound - 1))
        assert code == 2, out
        assert f"would take {bound} queries, more than {bound - 1} (--max-queries)" in out
        assert not any(p in QUERY_PATHS for p in srv.paths())


def test_a_closed_connection_after_the_deadline_leaves_no_reader_behind(
    fault: PromFaultServer, scenario_tsdb: Backfilled
) -> None:
    fault.faults.append(dripped(QUERY_PATHS, 0.2))
    code, _ = _scan(fault.url, scenario_tsdb, "--timeout", "1")
    assert code == 2
    # The abandoned request stops at its next byte: no reader is left behind.
    assert wait_for(
        lambda: not any(t.name == "gpuaudit-request" for t in threading.enumerate()), 10
    )


def test_limits_are_checked_before_connecting() -> None:
    for flag, value in (
        ("--max-answer-mib", "0"),
        ("--max-answer-mib", "nan"),
        ("--max-queries", "1.5"),
        ("--max-objects", "-3"),
    ):
        res = runner.invoke(
            app, ["scan", "--prometheus-url", "http://127.0.0.1:9", flag, value, "-q"]
        )
        assert res.exit_code == 2, (flag, value, res.output)
        assert flag in res.output and "Traceback" not in res.output


def test_the_timeout_reaches_the_kubernetes_api(
    prom_url: str, scenario_tsdb: Backfilled, tmp_path: Path
) -> None:
    # A pod list of a few hundred bytes, one byte every 0.5 s: only a deadline on the whole
    # answer ends it before it is done, and --timeout is that deadline on the Kubernetes side.
    # 5 s, not less: the same deadline bounds each Prometheus query, which a loaded machine
    # may take seconds to answer.
    with KubeAPIServer.from_dir(scenario_tsdb.k8s_dir, drip={"pods": 0.5}) as srv:
        kc = srv.write_kubeconfig(tmp_path / "kc")
        args = ["scan", "-q", "--prometheus-url", prom_url, "--kubeconfig", str(kc)]
        args += ["--window", f"{scenario_tsdb.days}d", "--end", str(scenario_tsdb.end)]
        res = runner.invoke(app, [*args, "--timeout", "5"])
    code, out = res.exit_code, res.output
    assert code == 2
    assert "Kubernetes API" in out and "no complete answer within 5 s (--timeout)" in out


def test_max_objects_cuts_a_list_and_marks_the_report_incomplete(
    prom_url: str, scenario_tsdb: Backfilled, tmp_path: Path
) -> None:
    with KubeAPIServer.from_dir(scenario_tsdb.k8s_dir, endless_continue={"pods"}) as srv:
        kc = srv.write_kubeconfig(tmp_path / "kc")
        args = ["scan", "-f", "json", "-q", "--prometheus-url", prom_url, "--kubeconfig", str(kc)]
        args += ["--window", f"{scenario_tsdb.days}d", "--end", str(scenario_tsdb.end)]
        res = runner.invoke(app, [*args, "--max-objects", "1000", "--strict"])
        served = srv.pages_served("pods")
    assert res.exit_code == 2
    doc = json.loads(res.stdout)
    assert doc["complete"] is False
    assert any("more than 1,000 pods (--max-objects)" in r for r in doc["incomplete_reasons"])
    assert served <= Limits(objects=1000).pages(500)


def test_the_server_is_asked_to_stop_a_query_before_the_timeout(
    fault: PromFaultServer, scenario_tsdb: Backfilled
) -> None:
    """Every query carries Prometheus' `timeout` at nine tenths of --timeout, which a real
    server accepts: a query too heavy to finish is stopped by the server with a timeout error,
    which the planner answers by cutting it smaller (`test_prometheus_faults`), before the
    client's deadline would end the collection."""
    code, out = _scan(fault.url, scenario_tsdb, "--timeout", "30")
    assert code in (0, 1), out
    queries = [c for c in fault.calls if c.path in QUERY_PATHS]
    assert queries
    assert all(c.params.get("timeout") == ["27000ms"] for c in queries)
