"""The inventory's array helpers against the literal operations they replace: a search in
sorted keys, a join through a dict of (holding, time) pairs, and a test of times on the grid."""

from __future__ import annotations

import random

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuaudit.inventory import arrays
from gpuaudit.inventory.arrays import KeyTable, join_at


@settings(max_examples=200, deadline=None)
@given(
    keys=st.sets(st.integers(0, 400), max_size=100),
    want=st.lists(st.integers(-3, 450), max_size=150),
    extra=st.sampled_from([0, 1, 10, 100_000]),
    shuffle=st.randoms(),
)
def test_a_key_table_is_a_search(
    keys: set[int], want: list[int], extra: int, shuffle: random.Random
) -> None:
    """Found keys give their value, others (negative ones included) NaN; unsorted keys too."""
    order = sorted(keys)
    shuffle.shuffle(order)
    k = np.asarray(order, dtype=np.int64)
    vals = k * 0.5 + 0.25
    space = (max(keys) + 1 if keys else 0) + extra
    got = KeyTable(k, vals, space).get(np.asarray(want, dtype=np.int64))
    by_key = dict(zip(order, vals.tolist(), strict=True))
    for w, g in zip(want, got.tolist(), strict=True):
        if w in by_key:
            assert g == by_key[w]
        else:
            assert np.isnan(g)


@st.composite
def _points(draw: st.DrawFn, off_grid: bool) -> tuple[np.ndarray, np.ndarray]:
    pairs = draw(st.sets(st.tuples(st.integers(0, 30), st.integers(-3, 40)), max_size=120))
    ordered = draw(st.booleans())
    items = sorted(pairs) if ordered else list(pairs)
    k = np.asarray([p[0] for p in items], dtype=np.int64)
    t = 1_000.0 + 60.0 * np.asarray([p[1] for p in items], dtype="float64")
    if off_grid and len(t):
        t[0] += 7.5
    return k, t


@settings(max_examples=300, deadline=None)
@given(data=st.data(), off_grid=st.booleans(), piece=st.sampled_from([arrays._SLICE, 1, 3]))
def test_join_at_is_a_dict_join(data: st.DataObject, off_grid: bool, piece: int) -> None:
    """Sorted or not, on the grid or off it, the times read in one slice or many: each wanted
    (key, time) gets the value of the same pair on the other side, NaN and not found where it
    has none."""
    hk, ht = data.draw(_points(off_grid))
    wk, wt = data.draw(_points(False))
    vals = np.arange(len(hk), dtype="float64") * 1.5
    whole, arrays._SLICE = arrays._SLICE, piece
    try:
        got, found = join_at(hk, ht, vals, wk, wt, 1_000.0, 60)
    finally:
        arrays._SLICE = whole
    have = {(int(k), float(t)): float(v) for k, t, v in zip(hk, ht, vals, strict=True)}
    for k, t, g, f in zip(wk.tolist(), wt.tolist(), got.tolist(), found.tolist(), strict=True):
        if (k, t) in have:
            assert f and g == have[(k, t)]
        else:
            assert not f and np.isnan(g)
    only, where = join_at(hk, ht, None, wk, wt, 1_000.0, 60)
    assert where.tolist() == found.tolist() and np.isnan(only).all()


@settings(max_examples=200, deadline=None)
@given(
    ks=st.lists(st.integers(-50, 50), max_size=40),
    odd=st.sampled_from([None, 7.5, float("inf"), float("nan")]),
    piece=st.sampled_from([arrays._SLICE, 1, 4]),
)
def test_grid_range_reads_the_grid_in_slices(ks: list[int], odd: float | None, piece: int) -> None:
    """The lowest and highest bucket number where every time is on the grid; None where one is
    off it (or not finite), where there are none, or where the step is not positive."""
    t = 1_000.0 + 60.0 * np.asarray(ks, dtype="float64")
    if odd is not None and len(t):
        t[len(t) // 2] = t[len(t) // 2] + odd
    whole, arrays._SLICE = arrays._SLICE, piece
    try:
        got = arrays.grid_range(len(t), t.__getitem__, 1_000.0, 60.0)
        assert arrays.grid_range(len(t), t.__getitem__, 1_000.0, 0.0) is None
    finally:
        arrays._SLICE = whole
    if not ks or (odd is not None):
        assert got is None
    else:
        assert got == (float(min(ks)), float(max(ks)))


@settings(max_examples=200, deadline=None)
@given(
    blocks=st.lists(
        st.tuples(st.integers(0, 30), st.integers(1, 9)), max_size=25, unique_by=lambda b: b[0]
    ),
    to_holding=st.permutations(range(31)),
    piece=st.sampled_from([arrays._SLICE, 1, 3, 7]),
)
def test_regroup_reorders_the_blocks_by_holding(
    blocks: list[tuple[int, int]], to_holding: list[int], piece: int
) -> None:
    """Blocks of points per key come back in holding order (ties in the order they came),
    every column at the same points, the points within a block untouched, whether the
    columns are gathered in one run of blocks or in runs of 1, 3 or 7 points."""
    k = np.repeat([b[0] for b in blocks], [b[1] for b in blocks]).astype(np.int64)
    t = np.arange(len(k), dtype="float64") * 60.0
    v = np.arange(len(k), dtype="float64") + 0.5
    hid_of = np.asarray(to_holding, dtype=np.int64)
    whole, arrays._SLICE = arrays._SLICE, piece
    try:
        hid, (gt, gv) = arrays.regroup(k, (t, v), hid_of)
    finally:
        arrays._SLICE = whole
    want = sorted(((int(hid_of[key]), at) for at, key in enumerate(k.tolist())), key=lambda p: p[0])
    assert hid.tolist() == [h for h, _ in want]
    assert gt.tolist() == [float(t[at]) for _, at in want]
    assert gv.tolist() == [float(v[at]) for _, at in want]


@settings(max_examples=100, deadline=None)
@given(
    pairs=st.sets(st.tuples(st.integers(0, 40), st.integers(0, 6)), max_size=80),
    want=st.lists(st.integers(-3, 300), max_size=60),
    piece=st.sampled_from([arrays._SLICE, 1, 5]),
)
def test_a_key_table_of_pairs_is_the_table_of_their_keys(
    pairs: set[tuple[int, int]], want: list[int], piece: int
) -> None:
    """Filled a slice of pairs at a time or from the keys made whole: the same look-ups."""
    major = np.array([p[0] for p in pairs], dtype=np.int32)
    minor = np.array([p[1] for p in pairs], dtype=np.int32)
    vals = np.arange(len(pairs), dtype="float64") + 0.5
    wanted = np.asarray(want, dtype=np.int64)
    whole, arrays._SLICE = arrays._SLICE, piece
    try:
        for space in (41 * 7, 10**9):  # a dense table, and a sorted search
            got = KeyTable.of_pairs(major, minor, 7, vals, space).get(wanted)
            ref = KeyTable(major.astype(np.int64) * 7 + minor, vals, space).get(wanted)
            np.testing.assert_array_equal(got, ref)
    finally:
        arrays._SLICE = whole
