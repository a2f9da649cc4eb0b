"""GPUs no pod held, bucket by bucket, and the GPUs some work held in the same buckets: what a
move of that work onto those GPUs is priced against (GPU031).

A GPU no pod held is paid for already: work moved onto it in a bucket it sat unheld costs
nothing extra for that bucket. Both sides are counted from the whole-GPU rows
(`grouped.WholeRows`) on integer codes, in one pass over the rows each: a GPU counts as unheld
in a bucket only where it has a row there and no pod held it (a GPU without data in a bucket is
not counted unheld: missing data is never idle capacity), and work counts one GPU for each row
it held in a bucket, as its GPU-hours are counted.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from gpuaudit.inventory import columns as C

if TYPE_CHECKING:
    import numpy.typing as npt

    from gpuaudit.inventory.grouped import WholeRows


def held_per_bucket(
    whole: WholeRows, groups: Sequence[Sequence[int]]
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int32]]:
    """The bucket ends (ascending) at which any group of holding positions (rows of
    `whole.keys`; a position in one group only) held a row, and per group and bucket end how
    many of its rows were held then."""
    owner = np.full(len(whole.keys), -1, dtype=np.int64)
    for g, positions in enumerate(groups):
        owner[np.asarray(positions, dtype=np.int64)] = g
    held = whole.keys[C.HELD].astype(bool).to_numpy()
    rows = whole.pos
    ts = whole.ts
    sel = np.flatnonzero(held[rows] & (owner[rows] >= 0))
    sel = sel[~np.isnan(ts[sel])]  # a row without a time is in no bucket
    ends, col = np.unique(ts[sel], return_inverse=True)
    out = np.zeros((len(groups), len(ends)), dtype=np.int32)
    np.add.at(out, (owner[rows[sel]], col.reshape(-1)), 1)
    return ends, out


def unheld_per_bucket(
    whole: WholeRows, nodes: Sequence[str], ends: npt.NDArray[np.float64]
) -> npt.NDArray[np.int32]:
    """Per node of `nodes`, per bucket end of `ends` (ascending): how many distinct GPUs
    (GPU indices) of it have a row in that bucket and no pod held them in any part of it."""
    import pandas as pd

    out = np.zeros((len(nodes), len(ends)), dtype=np.int32)
    if not len(nodes) or not len(ends):
        return out
    rows, keys = whole.pos, whole.keys
    code_of = {n: i for i, n in enumerate(nodes)}
    node_codes = np.array([code_of.get(str(n), -1) for n in keys[C.NODE].tolist()], np.int64)
    index_codes, index_names = pd.factorize(keys[C.GPU_INDEX], use_na_sentinel=False)
    n_idx = max(len(index_names), 1)
    held = keys[C.HELD].astype(bool).to_numpy()

    def gpus(mask: npt.NDArray[np.bool_]) -> npt.NDArray[np.int64]:
        """(cell, GPU index) codes of the rows of `mask` on these nodes at these times."""
        sel = np.flatnonzero(mask[rows] & (node_codes[rows] >= 0))
        col, ok = _columns(whole.ts[sel], ends)
        r = rows[sel][ok]
        codes: npt.NDArray[np.int64] = np.unique(
            (node_codes[r] * len(ends) + col[ok]) * n_idx + index_codes[r]
        )
        return codes

    # A GPU held for part of a bucket (a pod started or ended in it) is not unheld there.
    unheld = np.setdiff1d(gpus(~held), gpus(held), assume_unique=True)
    np.add.at(out.reshape(-1), unheld // n_idx, 1)
    return out


def _columns(
    ts: npt.NDArray[np.float64], ends: npt.NDArray[np.float64]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
    """Each time's column in `ends`, and whether it is one of them."""
    col = np.searchsorted(ends, ts).astype(np.int64)
    inside = col < len(ends)
    ok = inside.copy()
    ok[inside] = ends[col[inside]] == ts[inside]
    return np.where(ok, col, 0), ok
