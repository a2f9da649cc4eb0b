"""The hourly recording rules (`gpuaudit rules`, group `gpuaudit.hourly`): derived from the
catalogue, found from their heartbeat alone, and read as plain selectors on a window moved to
end on their last evaluation (`gpuaudit.sources.prometheus.hourly`)."""

from __future__ import annotations

from typing import Any

import httpx

from gpuaudit.inventory.parse import Parser, query_offset
from gpuaudit.snapshot.from_live import from_collection
from gpuaudit.sources.collect import LiveCollection
from gpuaudit.sources.interface import make_window
from gpuaudit.sources.prometheus import catalogue, hourly
from gpuaudit.sources.prometheus.http import PromClient, PromConfig
from gpuaudit.sources.prometheus.promsource import PromCollection, collect_prometheus

END = 1_795_392_000
DAY = 86400


def test_rules_are_the_scan_own_text_for_one_hourly_bucket() -> None:
    rules = {r.record: r.expr for r in hourly.rules("exported")}
    reads = hourly.reads("exported")
    act_hourly = catalogue.BY_ID["act_hourly"]
    assert rules[reads["act_hourly"][0]] == act_hourly.promql(3600, "exported")
    # A window count and the hourly sample count are one statistic: one rule.
    assert reads["act_count"] == reads["act_count_hourly"]
    # An `unless` count reads its own metric's rule and the other metric's.
    assert reads["util_count_hourly"] == (
        "gpuaudit:dcgm_fi_dev_gpu_util:count_1h",
        "gpuaudit:dcgm_fi_prof_gr_engine_active:count_1h",
    )
    assert "!=" not in rules[reads["util_count_hourly"][0]]
    assert rules[reads["fb_used_sum"][0]] == catalogue.BY_ID["fb_used_sum"].promql(3600, "exported")
    # Window means are those of the hourly means: no window sum of activity is read.
    assert "act_sum" not in reads and "power_hourly" in reads
    assert catalogue.SERVING.id not in reads
    assert len(set(rules.values())) == len(rules)
    group = hourly.group("exported")
    assert group["interval"] == "1h" and group["name"] == "gpuaudit.hourly"
    last = group["rules"][-1]
    assert last == {"record": hourly.HEARTBEAT, "expr": f"vector({hourly.fingerprint()})"}
    assert 0 <= hourly.fingerprint() < 2**24
    assert hourly.fingerprint("pod") != hourly.fingerprint("exported")


def test_recorded_queries_read_the_evaluations_of_their_buckets() -> None:
    fb_sum, act_max = catalogue.BY_ID["fb_used_sum"], catalogue.BY_ID["act_max"]
    assert hourly.recorded_query(fb_sum, "exported", "", 7200) == (
        "sum_over_time(gpuaudit:dcgm_fi_dev_fb_used:sum_1h[7199s])"
    )
    assert hourly.recorded_query(act_max, "exported", 'c="a"', 3600).startswith(
        'max_over_time(gpuaudit:dcgm_fi_prof_gr_engine_active:max_1h{c="a"}[3599s])'
    )
    util_count = catalogue.BY_ID["util_count_hourly"]
    assert hourly.recorded_query(util_count, "exported", "", 3600, 60) == (
        "(last_over_time(gpuaudit:dcgm_fi_dev_gpu_util:count_1h[3599s]) unless "
        "last_over_time(gpuaudit:dcgm_fi_prof_gr_engine_active:count_1h[3599s])) != 60"
    )
    assert hourly.recorded_query(catalogue.BY_ID["act_hourly"], "exported", "", 3600) == (
        "last_over_time(gpuaudit:dcgm_fi_prof_gr_engine_active:mean_1h[3599s])"
    )


def _collect(
    last: float,
    value: float | None = None,
    since: float = 0,
    series: int = 1,
) -> tuple[list[tuple[str, dict[str, str]]], PromCollection]:
    """A collection from a server whose hourly rules last evaluated at `last` (unix seconds,
    with milliseconds) and have run after `since`; the queries it was sent and the
    collection."""
    fp = hourly.fingerprint("exported") if value is None else value
    seen: list[tuple[str, dict[str, str]]] = []

    def handler(req: httpx.Request) -> httpx.Response:
        path = req.url.path
        if path.endswith("__name__/values"):
            return httpx.Response(
                200, json={"status": "success", "data": [catalogue.ACT_PROF, catalogue.UTIL]}
            )
        if path.endswith("/labels"):
            return httpx.Response(200, json={"status": "success", "data": ["exported_pod"]})
        if path.endswith("buildinfo"):
            return httpx.Response(200, json={"status": "success", "data": {"version": "2.53"}})
        if path.endswith("/rules"):
            return httpx.Response(404, json={"status": "error", "error": "no rules API"})
        form = dict(httpx.QueryParams(req.content.decode()))
        seen.append((form["query"], form))
        rtype = "matrix" if path.endswith("query_range") else "vector"
        result: list[dict[str, Any]] = []
        if form["query"] == f"{hourly.HEARTBEAT}[3600s]":
            rtype = "matrix"
            result = [
                {"metric": {"__name__": hourly.HEARTBEAT, "i": str(i)}, "values": [[last, str(fp)]]}
                for i in range(series)
            ]
        elif form["query"].endswith("mean_1h[3599s])") and "start" in form:
            lo, hi, step = float(form["start"]), float(form["end"]), float(form["step"])
            points = [[round(lo + i * step, 3), "0.5"] for i in range(int((hi - lo) // step) + 1)]
            result = [{"metric": {"UUID": "GPU-1", "exported_pod": "p"}, "values": points}]
        elif hourly.HEARTBEAT in form["query"]:
            lo, hi = float(form["start"]), float(form["end"])
            points = [
                [round(lo + i * 3600, 3), "1"]
                for i in range(int((hi - lo) // 3600) + 1)
                if lo + i * 3600 > since
            ]
            result = [{"metric": {}, "values": points}]
        return httpx.Response(
            200, json={"status": "success", "data": {"resultType": rtype, "result": result}}
        )

    client = PromClient(PromConfig(url="http://p.test"), transport=httpx.MockTransport(handler))
    return seen, collect_prometheus(client, make_window(DAY, 3600, END))


def test_the_window_ends_on_the_last_evaluation_to_the_millisecond() -> None:
    last = END - 3600 + 67.25
    seen, got = _collect(last)
    assert got.window is not None
    assert (got.window.start, got.window.end) == (END - 3600 + 67 - DAY, END - 3600 + 67)
    cov = got.capabilities.to_dict()["recorded_hourly"]
    assert cov == {
        "fingerprint": hourly.fingerprint(),
        "phase_ms": 67_250,
        "offset_ms": 250,
        "since": last - DAY,
        "covers": "whole",
        "requested_end": END,
        "end": END - 3600 + 67,
    }
    assert query_offset(got.capabilities.to_dict()) == 0.25
    assert any("the window ends on their last evaluation" in n for n in got.capabilities.notes)
    sums = next(f for q, f in seen if q.startswith("sum_over_time(") and "gr_engine" in q)
    assert sums["query"] == (
        f"sum_over_time(gpuaudit:dcgm_fi_prof_gr_engine_active:count_1h[{DAY - 1}s])"
    )
    assert sums["time"] == f"{last:.3f}"
    means = next(
        f
        for q, f in seen
        if q == "last_over_time(gpuaudit:dcgm_fi_prof_gr_engine_active:mean_1h[3599s])"
    )
    assert (means["start"], means["end"]) == (f"{last - DAY + 3600:.3f}", f"{last:.3f}")
    # Every query is sent at the evaluations.
    params = [e["params"] for entries in got.answers.values() for e in entries]
    assert len(params) > 10
    assert all(p.get("time", p.get("end", "")).endswith(".250") for p in params)
    reads = {q["id"]: q["reads"] for q in got.queries}
    assert (
        reads["act_hourly"] == reads["act_count"] == reads["util_count_hourly"] == "recorded hourly"
    )


def test_rules_that_began_within_the_window_cut_every_query_where_they_began() -> None:
    last = END - 3600 + 67
    began = last - 10 * 3600  # evaluations after it are there
    _, got = _collect(last, since=began)
    assert got.window is not None
    cov = got.capabilities.to_dict()["recorded_hourly"]
    assert cov["covers"] == "part" and cov["since"] == began
    w = got.window
    assert [c[:2] for c in got.plan["act_count"]] == [[w.start, began], [began, w.end]]
    assert [c[:2] for c in got.plan["act_hourly"]] == [[w.start, began], [began, w.end]]
    raw, rec = got.answers["act_count"]
    assert "DCGM_FI_PROF_GR_ENGINE_ACTIVE[50400s]" in raw["query"]
    assert rec["query"] == "sum_over_time(gpuaudit:dcgm_fi_prof_gr_engine_active:count_1h[35999s])"
    reads = {q["id"]: q["reads"] for q in got.queries}
    assert reads["act_count"] == "recorded hourly and raw"


def test_a_heartbeat_of_other_rules_is_not_used() -> None:
    seen, got = _collect(END - 3600 + 67, value=12345)
    assert got.window is None
    assert "recorded_hourly" not in got.capabilities.to_dict()
    assert any("apply `gpuaudit rules` again" in n for n in got.capabilities.notes)
    assert not any("_1h" in q for q, _ in seen if hourly.HEARTBEAT not in q)


def test_two_servers_recording_the_rules_are_not_used() -> None:
    _, got = _collect(END - 3600 + 67, series=2)
    assert got.window is None
    assert any("2 series of" in n for n in got.capabilities.notes)


def test_answers_at_the_evaluations_lie_on_the_window_grid() -> None:
    """The reader takes the sub-second offset off the answers' times: every point of a bucket
    is on the window's grid, none is left out."""
    _, got = _collect(END - 3600 + 67.25)
    assert got.window is not None
    raw = LiveCollection(got.window, "c", "u", got, {}, {}, [], [])
    p = Parser(from_collection(raw))
    (answer,) = p.answers["act_hourly"]
    w = got.window
    assert answer.ts.tolist() == [float(w.start + 3600 * (i + 1)) for i in range(24)]
    assert p.off_grid == {} and p.outside == {}
