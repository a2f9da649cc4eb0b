"""The integer-coded groupings of `gpuaudit.inventory.grouped`, and the checks built on them,
give the same findings whatever the holding ids and however hourly rows reach their holding."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from types import ModuleType

import numpy as np
import pytest

from gpuaudit.checks import gpu010_partial_gang as gpu010
from gpuaudit.checks import gpu030_topology_mismatch as gpu030
from gpuaudit.checks import gpu031_gang_spread as gpu031
from gpuaudit.checks import gpu060_warm_idle_nodes as gpu060
from gpuaudit.domain.pricing import DEFAULT_PRICES
from gpuaudit.inventory import Inventory, Views, derived, grouped
from gpuaudit.inventory import columns as C
from tests.support.factories import START, STEP, Series, gpu_labels, inventory, make_pod, run_check

HOURS = 30
H100 = "NVIDIA H100 80GB HBM3"


def _gpu(host: str, i: int, pod: str = "", model: str = H100, act: float = 0.5) -> Series:
    lab = gpu_labels(
        uuid=f"{host}-{i}",
        gpu=str(i),
        host=host,
        model=model,
        pod=pod,
        namespace="ml" if pod else "",
    )
    return Series(lab, act=[act if pod else 0.0] * HOURS)


def _topology() -> Inventory:
    board = {0: "tp2", 2: "tp2"}
    # A PyTorchJob's pod: its GPUs exchange data (GPU030 judges only such pods).
    pods = [make_pod("tp2", node="n1", gpus=2, owner=("PyTorchJob", "tp"))]
    series = [_gpu("n1", i, board.get(i, ""), "NVIDIA L40S") for i in range(4)]
    return inventory(series, HOURS, pods=pods)


def _spread() -> Inventory:
    series = [_gpu("a", i, "g-master-0" if i < 2 else "") for i in range(8)]
    series += [_gpu("b", i, "g-worker-0" if i < 2 else "x") for i in range(8)]
    job = {
        "metadata": {"name": "g", "namespace": "ml"},
        "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1}, "Worker": {"replicas": 1}}},
    }
    pods = [
        make_pod(
            p,
            node=n,
            gpus=2,
            owner=("PyTorchJob", "g"),
            labels={"training.kubeflow.org/job-name": "g"},
        )
        for p, n in (("g-master-0", "a"), ("g-worker-0", "b"))
    ]
    return inventory(series, HOURS, pods=pods, lists={"pytorchjobs": [job]})


def _idle_node() -> Inventory:
    series = [_gpu("idle", 0, "stale", act=0.01), _gpu("idle", 1), _gpu("busy", 0, "job")]
    return inventory(series, HOURS)


def _partial_gang() -> Inventory:
    group = {"scheduling.k8s.io/group-name": "pg"}
    pods = [
        make_pod(f"w-{i}", annotations=group, started=START, created=START) for i in range(2)
    ] + [
        make_pod(f"w-{i}", node="", phase="Pending", created=START, annotations=group)
        for i in range(2, 4)
    ]
    pg = {
        "metadata": {"name": "pg", "namespace": "ml"},
        "spec": {"minMember": 4},
        "status": {"phase": "Unknown"},
    }
    series = [_gpu("n1", i, f"w-{i}") for i in range(2)]
    return inventory(series, HOURS, pods=pods, lists={"volcano_podgroups": [pg]})


CASES: list[tuple[ModuleType, Callable[[], Inventory]]] = [
    (gpu010, _partial_gang),
    (gpu030, _topology),
    (gpu031, _spread),
    (gpu060, _idle_node),
]


def _renumbered(inv: Inventory) -> Inventory:
    """The same inventory with holding ids that are not row positions (rows reversed, ids
    spaced out), as a hand-built inventory may number them."""
    h = inv.holdings.iloc[::-1].reset_index(drop=True)
    h[C.HOLDING] = 1000 + 3 * h[C.HOLDING]
    hr = inv.hourly.copy()
    hr[C.HOLDING] = 1000 + 3 * hr[C.HOLDING]
    return dataclasses.replace(inv, holdings=h, hourly=hr)


@pytest.mark.parametrize(("check", "make"), CASES)
def test_holding_ids_that_are_not_row_positions_give_the_same_findings(
    check: ModuleType, make: Callable[[], Inventory]
) -> None:
    inv = make()
    found = run_check(check, inv)
    assert found
    again = _renumbered(inv)
    positions = grouped.holding_positions(again, again.hourly)
    assert positions is not None
    assert not np.array_equal(positions, again.hourly[C.HOLDING].to_numpy())
    assert run_check(check, again) == found


@pytest.mark.parametrize(("check", "make"), CASES)
def test_hourly_rows_without_a_holding_row_give_the_same_findings(
    check: ModuleType,
    make: Callable[[], Inventory],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    inv = make()
    found = run_check(check, inv)
    monkeypatch.setattr(grouped, "holding_positions", lambda *_: None)
    assert run_check(check, make()) == found


def test_repeated_holding_ids_cannot_be_placed() -> None:
    inv = _idle_node()
    h = inv.holdings.copy()
    h[C.HOLDING] = 5
    assert grouped.holding_positions(dataclasses.replace(inv, holdings=h), inv.hourly) is None


@pytest.mark.parametrize(
    "ts",
    [
        [START + 3 * STEP, START + STEP, START + 3 * STEP, START + 7 * STEP],
        [START + 0.5, START + STEP, START + 0.5],
        [START + STEP, float("inf")],
    ],
)
@pytest.mark.parametrize("piece", [1 << 20, 1, 3])
def test_bucket_index_holds_the_times_themselves(
    ts: list[float], piece: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the grid or off it, read in one slice or several."""
    from gpuaudit.inventory import arrays

    monkeypatch.setattr(arrays, "_SLICE", piece)
    arr = np.array(ts)
    index, ends = grouped.bucket_index(arr, START, STEP)
    assert np.array_equal(ends[index], arr)
    assert np.all(np.diff(ends) > 0)
    if ts[0] == START + 3 * STEP:  # on the grid: the ends are every bucket from first to last
        assert np.array_equal(ends, START + np.arange(1, 8) * STEP)


def test_free_gpus_asked_about_some_buckets_and_nodes() -> None:
    inv = inventory([_gpu("a", 0, "p"), _gpu("a", 1), _gpu("b", 0), _gpu("b", 1, "q")], HOURS)
    hourly = derived.whole_gpu_hourly(inv)
    every = derived.free_gpus(hourly)
    first, last = START + STEP, START + HOURS * STEP
    assert every[("a", first)] == {"1"} and every[("b", last)] == {"0"}
    assert derived.free_gpus(hourly, {first}, {"b"}) == {("b", first): {"0"}}


def test_free_counts_are_the_sizes_of_the_free_sets() -> None:
    series = [_gpu("a", 0, "p"), _gpu("a", 1), _gpu("a", 2), _gpu("b", 0), _gpu("b", 1, "q")]
    inv = inventory(series, HOURS)
    first, last = START + STEP, START + HOURS * STEP
    sets = derived.free_gpus(derived.whole_gpu_hourly(inv), {first, last})
    counts = Views(inv, DEFAULT_PRICES).free_counts({first, last})
    assert counts == {first: {"a": 2, "b": 1}, last: {"a": 2, "b": 1}}
    assert {(n, t): k for t, c in counts.items() for n, k in c.items()} == {
        key: len(v) for key, v in sets.items()
    }


def test_free_sets_are_the_free_gpus_of_the_whole_gpu_rows() -> None:
    """Tested on the rows the held and node masks keep, at the buckets asked about: the sets
    `derived.free_gpus` gives from the whole-GPU rows."""
    series = [_gpu("a", 0, "p"), _gpu("a", 1), _gpu("a", 2), _gpu("b", 0), _gpu("b", 1, "q")]
    inv = inventory(series, HOURS)
    hourly = derived.whole_gpu_hourly(inv)
    first, last = START + STEP, START + HOURS * STEP
    for buckets, nodes in (({first, last}, {"a", "b"}), ({last}, {"b"}), (set(), {"a"})):
        want = derived.free_gpus(hourly, buckets, nodes)
        assert Views(inv, DEFAULT_PRICES).free_sets(buckets, nodes) == want
    assert Views(inv, DEFAULT_PRICES).free_sets({first, START + 0.5}, {"a"})


def test_a_gangs_pod_hourly_is_the_views() -> None:
    a100 = "NVIDIA A100-SXM4-80GB"
    slices = [("1g.10gb", "9"), ("2g.20gb", "5"), ("3g.40gb", "2"), ("1g.10gb", "13")]
    series = [
        Series(
            gpu_labels(uuid="M", model=a100, pod=p, namespace="ml", mig=mig),
            act=[0.3] * (HOURS - k) + [None] * k,
        )
        for k, (p, mig) in enumerate(zip(["w-0", "w-0", "w-0", "w-1"], slices, strict=True))
    ]
    series += [_gpu("n1", 1, "w-0"), _gpu("n1", 2, "w-2")]
    inv = inventory(series, HOURS)
    views = Views(inv, DEFAULT_PRICES)
    mine = gpu010._pod_hourly_of(views, "ml", {"w-0", "w-1"})
    ph = views.pod_hourly
    want = ph[ph[C.POD].isin(["w-0", "w-1"])].reset_index(drop=True)
    assert mine[[C.NAMESPACE, C.POD]].astype(str).values.tolist() == (
        want[[C.NAMESPACE, C.POD]].astype(str).values.tolist()
    )
    assert mine[C.TS].tolist() == want[C.TS].tolist()
    # The same numbers summed (by pandas here, numpy there): equal up to the last bit.
    assert mine["gpus"].tolist() == pytest.approx(want["gpus"].tolist(), rel=1e-14, abs=0)
    assert len(set(want["gpus"].tolist())) > 2
