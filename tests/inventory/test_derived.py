"""The array views behind GPU001-GPU003, GPU020, GPU021, GPU040, GPU070, the breakdown and the
summary give the figures the groupbys on string keys gave (sums up to their last bit), whatever
the holding ids and bucket times."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np
import pandas as pd
import pytest

from gpuaudit import snapshot
from gpuaudit.audit.breakdown import breakdown
from gpuaudit.audit.settings import Settings
from gpuaudit.audit.summary import summarise
from gpuaudit.checks import discover
from gpuaudit.inventory import Inventory, Views, build, derived
from gpuaudit.inventory import columns as C
from tests.support.paths import DEMO

MINE = {"GPU001", "GPU002", "GPU003", "GPU020", "GPU021", "GPU040", "GPU070"}


@pytest.fixture(scope="module")
def demo() -> Inventory:
    return build(snapshot.read(DEMO))


def _fresh(inv: Inventory) -> Inventory:
    """A copy (views are kept by a `Views` object, never by the inventory)."""
    return dataclasses.replace(inv)


def _renumbered(inv: Inventory) -> Inventory:
    """The same inventory with holding ids that are not row positions (rows reversed, ids
    spaced out), as a hand-built inventory may number them."""
    h = inv.holdings.iloc[::-1].reset_index(drop=True)
    h[C.HOLDING] = 1000 + 3 * h[C.HOLDING]
    hr = inv.hourly.copy()
    hr[C.HOLDING] = 1000 + 3 * hr[C.HOLDING]
    return dataclasses.replace(inv, holdings=h, hourly=hr)


def _off_grid(inv: Inventory) -> Inventory:
    """Bucket ends moved off the window's step grid (the bucket index then comes from the
    times themselves)."""
    hr = inv.hourly.copy()
    hr[C.TS] = hr[C.TS] + 0.25
    return dataclasses.replace(inv, hourly=hr)


def _outputs(inv: Inventory) -> dict[str, str]:
    s = Settings()
    views = Views(inv, s.prices)
    # Checks that walk the holdings table list findings in its row order; the report sorts them.
    out = {
        c.code: repr(sorted(map(repr, c.run(views, c.configure(s.checks)))))
        for c in discover()
        if c.code in MINE and all(r in inv.capabilities for r in c.requires)
    }
    idle = s.checks["idle_activity"]
    out["breakdown"] = repr(breakdown(views, idle, "training.kubeflow.org/job-name"))
    out["summary"] = repr(summarise(views, idle, s.currency))
    return out


def _reference_pod_hourly(inv: Inventory) -> pd.DataFrame:
    """The pod-hourly view as the groupby on namespace, pod and time computed it."""
    hr = derived.hourly_with(inv, [C.NAMESPACE, C.POD, C.FRACTION], held_only=True)
    hr["_wa"] = hr[C.ACT] * hr[C.FRACTION]
    hr["_gh"] = hr[C.FRACTION] * hr[C.HELD_H]
    g = hr.groupby([C.NAMESPACE, C.POD, C.TS], sort=True)
    out = g.agg(gpus=(C.FRACTION, "sum"), _wa=("_wa", "sum"), _gh=("_gh", "sum")).reset_index()
    out[C.ACT] = out["_wa"] / out["gpus"]
    out[C.GPU_HOURS] = out["_gh"]
    return out.drop(columns=["_wa", "_gh"])


def test_demo_findings_do_not_depend_on_holding_ids(demo: Inventory) -> None:
    found = _outputs(_fresh(demo))
    assert all(found[code] != repr([]) for code in MINE)
    assert _outputs(_renumbered(demo)) == found


@pytest.mark.parametrize("change", [_fresh, _renumbered, _off_grid])
def test_pod_hourly_is_the_groupby(
    demo: Inventory, change: Callable[[Inventory], Inventory]
) -> None:
    inv = change(_fresh(demo))
    pd.testing.assert_frame_equal(
        Views(inv, {}).pod_hourly, _reference_pod_hourly(_fresh(inv)), rtol=1e-14, atol=0
    )


def _awkward(n: int, seed: int) -> np.ndarray:
    """Values whose sums depend on the order and method of summation, with NaN, infinities
    and negative zeros among them."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n) * 10.0 ** rng.integers(-8, 17, n)
    special = rng.integers(0, 40, n)
    x[special == 0] = np.nan
    x[special == 1] = -0.0
    x[special == 2] = np.inf
    return x


def _group_fsums(values: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Each group's correctly rounded sum, NaN left out."""
    ends = np.r_[starts[1:], len(values)]
    return np.array(
        [math.fsum(v for v in values[a:b] if v == v) for a, b in zip(starts, ends, strict=True)]
    )


@pytest.mark.parametrize("seed", range(5))
def test_sorted_sums_are_the_groups_sums(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 5000
    keys = np.sort(rng.integers(0, 900, n))  # groups of 0 to ~20 rows
    values = rng.uniform(0.0, 1.0, n) * rng.choice([1.0, 1 / 7, 0.5], n)
    values[rng.integers(0, 40, n) == 0] = np.nan
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    got = derived.sorted_sums(values, starts)
    np.testing.assert_allclose(got, _group_fsums(values, starts), rtol=1e-14, atol=0)
    np.testing.assert_allclose(
        got, pd.Series(values).groupby(keys, sort=True).sum().to_numpy(), rtol=1e-14, atol=0
    )


@pytest.mark.parametrize("keys", [[0], [0, 0, 0], [0, 1, 2, 3], [0, 0, 1, 2], [0, 1, 2, 2, 2]])
def test_sorted_sums_of_single_and_last_groups(keys: list[int]) -> None:
    """Groups of one row are their value; the last group is summed too; NaN counts as 0."""
    values = np.array([0.1, 0.2, np.nan, 0.25, 1.0][: len(keys)])
    starts = np.flatnonzero(np.r_[True, np.diff(keys) != 0])
    got = derived.sorted_sums(values, starts)
    np.testing.assert_allclose(got, _group_fsums(values, starts), rtol=1e-14, atol=0)
    assert len(derived.sorted_sums(np.zeros(0), np.zeros(0, dtype=np.intp))) == 0


def test_a_mean_at_the_threshold_reaches_it_whatever_the_order_of_its_sum() -> None:
    """8 GPUs at 0.6762: numpy's sum gives 5.409599999999999, the correctly rounded sum
    5.4096; compared at the threshold's `edge`, their mean reaches 0.6762 either way, and a
    mean a measurable step under it does not."""
    values = np.full(8, 0.6762)
    (got,) = derived.sorted_sums(values, np.array([0]))
    assert got != math.fsum(values) == 5.4096
    for total in (got, math.fsum(values)):
        assert total / 8 >= derived.edge(0.6762)
    assert not 0.6761 >= derived.edge(0.6762)
    assert derived.edge(72.0) == pytest.approx(72.0 - 72e-9)


@pytest.mark.parametrize("seed", range(3))
def test_group_sums_and_series_sum_are_pandas_sums(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 4000
    codes = rng.integers(-1, 30, n)
    values = _awkward(n, seed)
    names = np.array([f"k{c:03d}" if c >= 0 else None for c in codes], dtype=object)
    expected = pd.Series(values).groupby(names, sort=True).sum()
    (got,) = derived.group_sums(codes, 30, [values])
    seen = np.bincount(codes[codes >= 0], minlength=30) > 0
    np.testing.assert_array_equal(got[seen], expected.to_numpy(), strict=True)
    finite = values[~np.isinf(values)]  # NaN left in: skipped
    assert derived.series_sum(finite) == pd.Series(finite).sum()


@pytest.mark.parametrize("piece", [1, 7, 1000])
def test_held_rows_are_the_same_in_slices(
    demo: Inventory, piece: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The held rows' buckets are worked out a slice of rows at a time: any slice gives what
    one slice of every row gives."""
    from gpuaudit.inventory import arrays

    whole = derived.held_rows(demo)
    monkeypatch.setattr(arrays, "_SLICE", piece)
    sliced = derived.held_rows(demo)
    for name in ("rows", "holding", "bucket", "bucket_ts"):
        np.testing.assert_array_equal(getattr(sliced, name), getattr(whole, name))
    assert len(whole.bucket_ts) > 1 and len(whole.rows) > piece


def test_views_the_checks_let_go_of_are_made_again_the_same(demo: Inventory) -> None:
    """`forget_check_rows` (run before the summary, breakdown and capacity plan) drops the
    row-long views only checks read; one asked for again is the same, and the views the later
    stages read are kept."""
    views = Views(_fresh(demo), {})
    before = views.pod_hourly.copy()
    whole = views.whole_rows
    rows = views.held_rows
    views.forget_check_rows()
    assert "pod_hours" not in vars(views) and "whole_rows" not in vars(views)
    assert views.held_rows is rows
    pd.testing.assert_frame_equal(views.pod_hourly, before, check_exact=True)
    again = views.whole_rows
    assert again is not whole
    for name in ("pos", "ts", "held"):
        assert np.array_equal(getattr(again, name), getattr(whole, name), equal_nan=True)
    pd.testing.assert_frame_equal(again.keys, whole.keys, check_exact=True)
