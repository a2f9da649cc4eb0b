"""Samples read per query and in total (issue 37): Prometheus' own figure where its `stats`
give one, an estimate from the query's selectors and the answer where they do not, each
figure saying which; the manifest keeps them, and reads back only figures that add up."""

from __future__ import annotations

import math
from typing import Any

import pytest

from gpuaudit.snapshot.manifest import Manifest
from gpuaudit.sources.prometheus import catalogue
from gpuaudit.sources.prometheus.catalogue import Part
from gpuaudit.sources.prometheus.stats import (
    QuerySamples,
    SamplesCounter,
    SamplesRead,
    Selector,
    estimate,
    evaluations,
    fetched_series,
    said_samples,
    selectors,
)

WEEK = 7 * 86400
SHARD = 'UUID=~"GPU-[0-7].*",cluster="a{b}[c]"'


def _q(qid: str) -> catalogue.QuerySpec:
    return catalogue.BY_ID[qid]


def _body(rows: int, stats: Any = None, matrix: int = 0) -> dict[str, Any]:
    if matrix:
        result: list[dict[str, Any]] = [
            {"metric": {"UUID": f"GPU-{i}"}, "values": [[t, "1"] for t in range(matrix)]}
            for i in range(rows)
        ]
    else:
        result = [{"metric": {"UUID": f"GPU-{i}"}, "value": [0, "1"]} for i in range(rows)]
    data: dict[str, Any] = {"resultType": "matrix" if matrix else "vector", "result": result}
    if stats is not None:
        data["stats"] = stats
    return {"status": "success", "data": data}


# -- the selectors of a query ------------------------------------------------------------


def test_a_window_sum_reads_one_raw_range_and_nothing_of_its_by_list() -> None:
    text = _q("act_sum").promql(WEEK, "exported", SHARD)
    assert selectors(text) == (Selector(catalogue.ACT_PROF, WEEK),)


def test_a_mean_reads_its_series_twice_and_an_unless_query_both_metrics() -> None:
    assert len(selectors(_q("act_hourly").promql(3600, "exported"))) == 2
    text = _q("util_count_hourly").promql(3600, "pod", full=12)
    assert [s.name for s in selectors(text)] == [catalogue.UTIL, catalogue.ACT_PROF]
    # Without `full` a count compares two evaluations (now and the bucket before, `offset`),
    # the `vector(time())` of its `on ()` reading no series.
    text = _q("act_count_hourly").promql(3600, "pod", first=1_700_000_000)
    assert [s.range_s for s in selectors(text)] == [3600, 3600, 3600]


def test_subqueries_repeat_what_they_hold_at_each_of_their_steps() -> None:
    found = selectors(_q("xid_events").promql(WEEK, "exported", SHARD))
    assert found == (Selector(catalogue.XID, None, WEEK / 300),) * 3
    found = selectors(catalogue.SERVING.promql(WEEK, "any"))
    assert found == (Selector("", None, WEEK / catalogue.SERVING_STEP_S),)


def test_recorded_pieces_say_their_own_evaluation_interval() -> None:
    parts = (Part(False, 100_000, 504_800), Part(True, 504_000, 800), Part(False, 799_999, 0))
    found = selectors(_q("act_sum").promql(WEEK, "exported", "", parts))
    assert [s.name.startswith("gpuaudit:") for s in found] == [False, True, False]
    assert found[1].per_evaluation(60) == pytest.approx(504 / 300)
    assert found[2].range_s == pytest.approx(799.999)
    # An hourly rule read as a plain selector: one point per series per step; a window of
    # them read over a range of its evaluations.
    hourly = Selector("gpuaudit:dcgm_fi_prof_gr_engine_active:sum_1h", None)
    assert hourly.per_evaluation(None) == 1
    week = selectors("sum_over_time(gpuaudit:dcgm_fi_prof_gr_engine_active:sum_1h[604799s])")
    assert week[0].per_evaluation(None) == pytest.approx(604799 / 3600)


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ('sum by (a) (foo{x="]"}[1h30m] offset 5m)', [("foo", 5400.0)]),
        ("count_over_time(bar[299999ms]) unless on () baz", [("bar", 299.999), ("baz", None)]),
        ('{__name__="qux", y=~"(a|b)"}[2d]', [("qux", 172800.0)]),
        ("max without (pod) (rate(foo[5m:30s]))", [("foo", None)]),
        ('label_replace(sum(foo), "l", "$1", "__name__", "(.+)") > 0.95', [("foo", None)]),
        ("", []),
    ],
)
def test_the_reader_of_promql_shapes(text: str, want: list[tuple[str, float | None]]) -> None:
    assert [(s.name, s.range_s) for s in selectors(text)] == want


def test_a_text_it_cannot_read_gives_what_it_found() -> None:
    assert selectors("sum(foo[5m]") == (Selector("foo", 300),)
    assert selectors('foo{a="unterminated') == (Selector("foo", None),)
    assert selectors("foo[nonsense]") == (Selector("foo", None),)


# -- the estimate ------------------------------------------------------------------------


def test_the_estimate_is_series_times_evaluations_times_samples_per_evaluation() -> None:
    raw = (Selector("DCGM_FI_DEV_GPU_UTIL", 3600),) * 2  # a mean: sum and count
    # 10 series, 168 hourly steps, 60 samples of each range at a 60 s scrape, twice.
    assert estimate(raw, 10, 168, 60) == 10 * 168 * 60 * 2
    assert estimate(raw, 10, 168, None) is None  # a raw range needs the scrape interval
    recorded = (Selector("gpuaudit:dcgm_fi_dev_gpu_util:mean_1h", None),)
    assert estimate(recorded, 10, 168, None) == 10 * 168
    huge = selectors("foo[99999999999999999999999d]")
    assert estimate(huge, 10**9, 10**9, 1) == estimate(huge, 1, 1, 1e-300) == 10**15


def test_evaluations_of_instant_and_range_requests() -> None:
    assert evaluations({"query": "x", "time": "100"}) == 1
    assert evaluations({"start": "3600", "end": "604800", "step": "3600"}) == 168
    assert evaluations({"start": 0.5, "end": 0.5, "step": 60}) == 1
    for bad in ({"start": "a", "end": "1", "step": "1"}, {"start": 5, "end": 1, "step": 1}):
        assert evaluations(bad) == 1
    assert evaluations({"start": 0, "end": 10, "step": 0}) == 1


# -- what the backend said ---------------------------------------------------------------


@pytest.mark.parametrize(
    "stats",
    [
        None,
        "all",
        [],
        {"timings": {"evalTotalTime": 0.1}},  # partial: timings without samples
        {"samples": {"peakSamples": 7}},
        {"samples": {"totalQueryableSamples": "123"}},
        {"samples": {"totalQueryableSamples": -1}},
        {"samples": {"totalQueryableSamples": math.nan}},
        {"samples": {"totalQueryableSamples": True}},
        {"samples": {"totalQueryableSamples": 1e30}},
        {"samples": {"totalQueryableSamples": 1.5}},
        {"samples": ["totalQueryableSamples", 3]},
    ],
)
def test_garbage_missing_or_partial_stats_say_nothing(stats: Any) -> None:
    assert said_samples(_body(3, stats)) is None


def test_prometheus_stats_and_victoriametrics_series_fetched() -> None:
    assert said_samples(_body(3, {"samples": {"totalQueryableSamples": 1234}})) == 1234
    assert said_samples("not a body") is None
    assert fetched_series({"stats": {"seriesFetched": "42"}}) == 42
    assert fetched_series({"stats": {"seriesFetched": 42}}) == 42
    for bad in ("-1", "4e2", "9" * 20, None, 1.5):
        assert fetched_series({"stats": {"seriesFetched": bad}}) is None


# -- counting a collection ---------------------------------------------------------------


def _hourly(start: int = 0) -> dict[str, str]:
    return {"start": str(start + 3600), "end": str(start + WEEK), "step": "3600"}


def test_the_total_is_the_sum_of_the_queries_each_saying_how_it_was_found() -> None:
    c = SamplesCounter()
    act_sum = _q("act_sum").promql(WEEK, "exported")
    said = {"samples": {"totalQueryableSamples": 1000}}
    # act_sum in two shards: one said by the backend, the other not (estimated).
    c.add("act_sum", catalogue.ACT_PROF, "a", False, act_sum, {"time": "1"}, _body(4, said))
    c.add("act_sum", catalogue.ACT_PROF, "b", False, act_sum, {"time": "1"}, _body(5))
    hourly = _q("act_hourly").promql(3600, "exported")
    c.add("act_hourly", catalogue.ACT_PROF, "", False, hourly, _hourly(), _body(6, matrix=3))
    got = c.result(60.0)
    assert got.queries["act_sum"] == QuerySamples(1000 + 5 * WEEK // 60, 2, 1)
    assert got.queries["act_hourly"] == QuerySamples(6 * 168 * 60 * 2, 1, 1)
    assert got.total == sum(got.queries.values(), QuerySamples(0, 0))
    assert got.interval_s == 60.0
    assert got.queries["act_sum"].how == "1 of 2 estimated"
    assert got.queries["act_hourly"].text() == "120,960 samples read (1 request, estimated)"
    assert got.lines()[-1] == f"all queries: {got.total.text()}"
    assert got.lines()[0].startswith("query act_hourly: ")


def test_everything_said_records_no_interval_and_unknown_intervals_are_said() -> None:
    c = SamplesCounter()
    said = {"samples": {"totalQueryableSamples": 7}}
    text = _q("act_max").promql(WEEK, "exported")
    c.add("act_max", catalogue.ACT_PROF, "", False, text, {"time": "1"}, _body(2, said))
    got = c.result(60.0)
    assert got.interval_s is None and got.total == QuerySamples(7, 1)
    assert got.total.how == "as the backend said"
    c.add("act_p95", catalogue.ACT_PROF, "", False, text, {"time": "1"}, _body(2))
    got = c.result(None)
    assert got.queries["act_p95"] == QuerySamples(0, 1, 0, 1)
    assert got.queries["act_p95"].text() == "samples read not known (1 request)"
    assert got.total.how == "as the backend said, 1 not known"


def test_a_sparse_answer_is_taken_to_read_as_many_series_as_the_widest_of_its_metric() -> None:
    c = SamplesCounter()
    mx = _q("xid_max").promql(WEEK, "exported")
    onsets = _q("xid_events").promql(WEEK, "exported")
    c.add("xid_max", catalogue.XID, "", False, mx, {"time": "1"}, _body(40))
    c.add("xid_events", catalogue.XID, "", True, onsets, {"time": "1"}, _body(1))
    got = c.result(60.0)
    assert got.queries["xid_events"].samples == 40 * 3 * (WEEK // 300)
    # Another shard's widest does not count for it.
    c = SamplesCounter()
    c.add("xid_max", catalogue.XID, "a", False, mx, {"time": "1"}, _body(40))
    c.add("xid_events", catalogue.XID, "b", True, onsets, {"time": "1"}, _body(1))
    assert c.result(60.0).queries["xid_events"].samples == 3 * (WEEK // 300)


def test_a_subquery_counts_the_larger_of_the_backends_figure_and_the_estimate() -> None:
    # Prometheus counts a range function's subquery argument as its output points alone
    # (prometheus/prometheus#16638): 6 for the onsets of a day read by 36 series.
    onsets = _q("xid_events").promql(3600, "exported")
    said = {"samples": {"totalQueryableSamples": 6}}
    c = SamplesCounter()
    c.add("xid_events", catalogue.XID, "", False, onsets, _hourly(), _body(36, said, matrix=1))
    assert c.result(60.0).queries["xid_events"] == QuerySamples(36 * 168 * 3 * 12, 1, 1)
    said = {"samples": {"totalQueryableSamples": 10**9}}  # a Prometheus that counts them
    c = SamplesCounter()
    c.add("xid_events", catalogue.XID, "", False, onsets, _hourly(), _body(36, said, matrix=1))
    assert c.result(60.0).queries["xid_events"] == QuerySamples(10**9, 1)


def test_series_fetched_are_shared_among_the_selectors() -> None:
    c = SamplesCounter()
    text = _q("act_hourly").promql(3600, "exported")
    body = {**_body(1, matrix=1), "stats": {"seriesFetched": "20", "executionTimeMsec": 3}}
    c.add("act_hourly", catalogue.ACT_PROF, "", False, text, _hourly(), body)
    assert c.result(60.0).queries["act_hourly"].samples == 10 * 168 * 60 * 2


# -- in the manifest ---------------------------------------------------------------------


def _manifest(samples: Any) -> Manifest:
    window = {"start": 0, "end": WEEK, "step": 3600}
    return Manifest.from_json({"window": window, "samples_read": samples}, "m.json")


def test_the_manifest_keeps_the_figures_and_reads_them_back() -> None:
    read = SamplesRead(
        QuerySamples(30, 3, 1), {"a": QuerySamples(10, 1), "b": QuerySamples(20, 2, 1)}, 60.0
    )
    doc = read.to_json()
    assert doc["total"] == {"samples": 30, "requests": 3, "estimated": 1, "unknown": 0}
    assert doc["scrape_interval_s"] == 60.0
    m = _manifest(doc)
    assert m.samples_read == read
    assert m["samples_read"] == doc and "samples_read" not in m.unread
    assert Manifest.from_json(m.to_json(), "again").samples_read == read


@pytest.mark.parametrize(
    "bad",
    [
        "lots",
        {"total": {"samples": 1, "requests": 1}},
        {"total": {"samples": 2, "requests": 1}, "queries": {"a": {"samples": 1, "requests": 1}}},
        {"total": {"samples": -1, "requests": 1}, "queries": {"a": {"samples": -1, "requests": 1}}},
        {"total": {"samples": 1, "requests": 1, "estimated": 2}, "queries": {}},
        {"total": {"samples": True, "requests": 1}, "queries": {"a": {"samples": 1}}},
        {"total": {"samples": 10**5000, "requests": 1}, "queries": {"a": {"samples": 10**5000}}},
    ],
)
def test_figures_that_do_not_add_up_are_kept_unread(bad: Any) -> None:
    m = _manifest(bad)
    assert m.samples_read is None
    assert m.unread["samples_read"] == bad and m["samples_read"] == bad
