"""Sharding by UUID (`planner.subshards`) and how backends' refusals are classified."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from gpuaudit.sources.prometheus.http import PromError
from gpuaudit.sources.prometheus.planner import SHARD_DIGITS, SHARDS, subshards


def _leaves(shard: str = "") -> list[str]:
    todo, out = [shard], []
    while todo:
        s = todo.pop()
        sub = subshards(s)
        if sub:
            todo += sub
        else:
            out.append(s)
    return out


def _matches(shard: str, uuid: str) -> bool:
    op, pattern = shard[:2], shard[3:-1]  # `=~"..."` or `!~"..."`, anchored as PromQL anchors
    hit = re.fullmatch(pattern, uuid) is not None
    return hit if op == "=~" else not hit


LEAVES = _leaves()

UUIDS = st.one_of(
    st.text(alphabet="0123456789abcdefABCDEF-", max_size=12).map(lambda t: "GPU-" + t),
    st.text(max_size=12),
    st.from_regex(r"GPU-[0-9a-f]{8}-[0-9a-f]{4}", fullmatch=True),
)


# Each example walks 273 shards' regexes: no per-example deadline (a loaded machine is slow).
@settings(deadline=None)
@given(UUIDS)
def test_every_uuid_falls_in_exactly_one_shard_at_every_depth(uuid: str) -> None:
    assert sum(_matches(s, uuid) for s in SHARDS) == 1
    assert sum(_matches(s, uuid) for s in LEAVES) == 1
    for shard in SHARDS:
        sub = subshards(shard)
        if _matches(shard, uuid) and sub:
            assert sum(_matches(s, uuid) for s in sub) == 1


def test_shards_get_finer_down_to_the_bound() -> None:
    assert subshards("") == list(SHARDS)
    assert subshards('!~"GPU-[0-9a-fA-F].*"') == []  # the rest cannot be told apart
    assert subshards('=~"GPU-[0-7].*"') == ['=~"GPU-[0123].*"', '=~"GPU-[4567].*"']
    # One hex digit at each of SHARD_DIGITS positions is the finest.
    assert SHARD_DIGITS == 2
    assert len(LEAVES) == 16 * 16 + 16 + 1
    assert all(subshards(s) == [] for s in LEAVES)


VM_422 = (
    'error when executing query="sum by (cluster, UUID, gpu, Hostname, modelName) '
    + "(sum_over_time(DCGM_FI_DEV_GPU_UTIL[3600s]))" * 20
    + '" for (time=1796158949747, step=300000): search error after reading 0 data blocks: '
    "error when searching tsids: the number of matching timeseries exceeds 300000; either "
    "narrow down the search or increase -search.max* command-line flag values at vmselect"
)


def test_a_long_error_keeps_its_reason_and_is_classified_by_it() -> None:
    exc = PromError(
        "api/v1/query: 422: " + VM_422[:160] + " ... " + VM_422[-340:], 422, "422", VM_422
    )
    assert exc.too_big and exc.series_limit
    assert "exceeds 300000" in str(exc)
    samples = PromError(
        "api/v1/query: execution: query processing would load too many samples into memory",
        422,
        "execution",
    )
    assert samples.too_big and not samples.series_limit
    mimir = PromError(
        "api/v1/query: execution: the query exceeded the maximum number of series (limit: "
        "100000 series) (err-mimir-max-series-per-query)",
        422,
        "execution",
    )
    assert mimir.series_limit
    assert not PromError("api/v1/query: bad_data: parse error", 400, "bad_data").too_big
