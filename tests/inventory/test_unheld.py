"""GPUs no pod held, bucket by bucket, and what some work held (`gpuaudit.inventory.unheld`)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from gpuaudit.inventory import columns as C
from gpuaudit.inventory.grouped import WholeRows
from gpuaudit.inventory.unheld import held_per_bucket, unheld_per_bucket


def _whole(rows: list[tuple[int, float]], keys: list[tuple[str, str, bool]]) -> WholeRows:
    """Rows as (holding position, bucket end) over holdings (node, GPU index, held)."""
    table = pd.DataFrame(keys, columns=[C.NODE, C.GPU_INDEX, C.HELD])
    pos = np.array([p for p, _ in rows], dtype=np.int64)
    ts = np.array([t for _, t in rows], dtype=np.float64)
    return WholeRows(pos, ts, np.ones(len(rows)), table)


KEYS = [
    ("a", "0", True),  # 0: the moving pod's GPU 0 on a
    ("a", "1", True),  # 1: its GPU 1
    ("b", "0", False),  # 2: b's GPU 0, unheld
    ("b", "1", False),  # 3: b's GPU 1, unheld
    ("b", "1", True),  # 4: b's GPU 1, held by another pod
    ("c", "0", False),  # 5: c's GPU 0, unheld
]


def test_work_counts_a_gpu_for_each_row_it_held_in_a_bucket() -> None:
    whole = _whole([(0, 1.0), (1, 1.0), (0, 2.0), (2, 1.0), (0, np.nan)], KEYS)
    ends, need = held_per_bucket(whole, [[0, 1]])
    assert ends.tolist() == [1.0, 2.0]
    assert need.tolist() == [[2, 1]]  # a row without a time is in no bucket


def test_a_gpu_is_unheld_only_where_it_has_data_and_nobody_held_it_in_the_bucket() -> None:
    rows = [(2, 1.0), (3, 1.0), (2, 2.0), (3, 2.0), (4, 2.0), (5, 1.0)]
    got = unheld_per_bucket(_whole(rows, KEYS), ["b", "c", "d"], np.array([1.0, 2.0, 3.0]))
    # b: both GPUs unheld at 1; at 2 GPU 1 was held for part of the bucket; no data at 3.
    assert got.tolist() == [[2, 1, 0], [1, 0, 0], [0, 0, 0]]
