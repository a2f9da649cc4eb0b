"""A key split at a pod's start (`claimed._split`, DRA claims) must rebuild every per-key field
of the builder's series: a field added to `build._Series` and left out of the split would keep
arrays one key short, or give the new key another key's values. This test reads the fields off
the dataclass, so it fails for a new field until the split handles it or it is listed below
with the reason it needs no split."""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any

import numpy as np

from gpuaudit import snapshot
from gpuaudit.inventory import claimed
from gpuaudit.inventory.parse import Metric, Parser, Stat, from_hourly
from tests.support.paths import DEMO

# The package exports the function `build` under the module's name.
build = importlib.import_module("gpuaudit.inventory.build")

NOT_SPLIT = {
    "counted": "one flag for the whole snapshot, not per key",
    "p2p": "GPU pairs per node, not per key",
    "xid_max": "a window maximum by key number: stays with the time before, as health maxima do",
    "xid_codes": "window-wide by key number: stays with the time before, as health maxima do",
    "xid_msgs": "window-wide by key number: stays with the time before, as health maxima do",
    "xid_events": "window-wide by key number: stays with the time before, as health maxima do",
}


def _lengths(value: Any) -> list[int]:
    """The length of every per-key array a field holds (an hourly tuple's key numbers are
    checked apart)."""
    if isinstance(value, Stat):
        return [len(value.values), len(value.present)]
    if isinstance(value, Metric):
        return [n for st in (value.mean, value.mx, value.p95, value.count) for n in _lengths(st)]
    if isinstance(value, np.ndarray):
        return [len(value)]
    if isinstance(value, dict):
        return [n for v in value.values() if v is not None for n in _lengths(v)]
    raise AssertionError(f"a per-key field of an unknown kind: {type(value)}")


def test_a_split_rebuilds_every_per_key_field_of_the_series() -> None:
    s = build._read_series(Parser(snapshot.read(DEMO)), None)
    assert s.n > 2
    changed: dict[str, Any] = {}

    def grow(series: Any, **changes: Any) -> Any:
        changed.update(changes)
        return dataclasses.replace(series, **changes)

    first = float(np.nanmin(s.act_h[1]))
    out = claimed._split(s, [(0, first + 3600.0), (1, first)], grow)
    names = {f.name for f in dataclasses.fields(build._Series)}
    assert set(NOT_SPLIT) <= names, "a field listed as not split is gone: drop it from the list"
    assert not set(changed) & set(NOT_SPLIT)
    assert set(changed) | set(NOT_SPLIT) == names, (
        f"fields neither split nor listed: {sorted(names - set(changed) - set(NOT_SPLIT))}"
    )
    assert out.n == s.n + 2
    for name, value in changed.items():
        if name == "n":
            continue
        if name.endswith("_h"):  # hourly points: (key, bucket end, value, samples)
            assert len({len(a) for a in value}) == 1 and (value[0] < out.n).all(), name
            continue
        if name == "split_points":  # hourly points by holding column
            for h in value.values():
                assert len({len(a) for a in h}) == 1 and (h[0] < out.n).all(), name
            continue
        assert set(_lengths(value)) == {out.n}, name


def test_a_split_moves_the_points_and_statistics_the_literal_rule_gives() -> None:
    """Only the split keys' blocks are read: the keys, first buckets and window statistics
    come out as the rule over every point gives them."""
    s = build._read_series(Parser(snapshot.read(DEMO)), None)
    n0 = s.n
    for h in (s.act_h, s.util_h):
        literal = np.full(n0, np.inf)
        np.minimum.at(literal, h[0], h[1])
        got = claimed._first_bucket(dataclasses.replace(s, act_h=h, util_h=h), n0)
        np.testing.assert_array_equal(got, np.where(np.isfinite(literal), literal, np.nan))
    first = float(np.nanmin(s.act_h[1]))
    splits = [(0, first + 3600.0), (1, first), (n0 - 1, first + 7200.0)]
    out = claimed._split(s, splits, dataclasses.replace)
    cut, moved = np.full(n0, np.inf), np.arange(n0)
    for i, (k, t) in enumerate(splits):
        cut[k], moved[k] = t, n0 + i
    affected = [k for k, _ in splits] + list(range(n0, out.n))
    for name in ("act", "util"):
        h = getattr(s, f"{name}_h")
        keys = np.where(h[1] >= cut[h[0]], moved[h[0]], h[0])
        np.testing.assert_array_equal(getattr(out, f"{name}_h")[0], keys)
        whole = from_hourly(getattr(out, f"{name}_h"), out.n)
        got = getattr(out, name)
        for mine, theirs in ((got.mean, whole.mean), (got.count, whole.count)):
            np.testing.assert_array_equal(mine.values[affected], theirs.values[affected])
            np.testing.assert_array_equal(mine.present[affected], theirs.present[affected])
