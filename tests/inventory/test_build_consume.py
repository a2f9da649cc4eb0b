"""`build(consume=True)` lets go of the snapshot's answers once they are read into series, and
of its Kubernetes lists once they are read into rows (the scan's pipeline does, to keep its peak
memory down): the inventory must be the one built
without it, table for table."""

from __future__ import annotations

import pandas as pd

from gpuaudit import snapshot
from gpuaudit.inventory import build
from tests.support.paths import DEMO


def test_an_inventory_built_consuming_its_snapshot_is_the_same() -> None:
    kept, consumed = snapshot.read(DEMO), snapshot.read(DEMO)
    a = build(kept)
    b = build(consumed, consume=True)
    assert kept.prometheus and not consumed.prometheus
    assert kept.kubernetes and not consumed.kubernetes
    for name in ("hourly", "holdings", "gpus", "pods", "nodes", "gangs", "p2p"):
        pd.testing.assert_frame_equal(getattr(a, name), getattr(b, name), check_exact=True)
    assert (a.capabilities, a.missing, a.warnings) == (b.capabilities, b.missing, b.warnings)
    assert (a.complete, a.incomplete_reasons) == (b.complete, b.incomplete_reasons)
    assert a.topologies.keys() == b.topologies.keys()
