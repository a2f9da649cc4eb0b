from __future__ import annotations

import pytest

from gpuaudit.checks import gpu060_warm_idle_nodes as gpu060
from gpuaudit.checks.findings import Severity
from tests.support.factories import Series, gpu_labels, inventory, make_node, run_check


def _node(host: str, acts: list[list[float | None]], pods: list[str] | None = None) -> list[Series]:
    pods = pods or [""] * len(acts)
    return [
        Series(
            gpu_labels(
                uuid=f"{host}-{i}", gpu=str(i), host=host, pod=p, namespace="ml" if p else ""
            ),
            act=a,
        )
        for i, (a, p) in enumerate(zip(acts, pods, strict=True))
    ]


def test_empty_node_for_a_day_and_more() -> None:
    series = _node("idle-a", [[0.0] * 30, [0.0] * 30])
    (f,) = run_check(gpu060, inventory(series, 30))
    assert f.code == "GPU060" and f.resource.kind == "Node" and f.resource.name == "idle-a"
    assert f.impact.gpu_hours == pytest.approx(60)
    assert f.impact.cost == pytest.approx(60 * 6.88)
    assert f.severity is Severity.LOW
    assert f.message == (
        "Node idle-a (2 GPUs, H100 80GB HBM3) had no GPU pod at work for 30 h of the window, "
        "30 h in a row: 60 GPU-hours an autoscaler could have released."
    )
    assert f.evidence["longest_idle_hours"] == 30
    assert f.evidence["idle_holders"] == []


def test_only_idle_pods_count_as_no_work_and_are_named() -> None:
    series = _node("n1", [[0.01] * 26, [0.0] * 26], pods=["stale-0", ""])
    (f,) = run_check(gpu060, inventory(series, 26))
    assert "only idle GPU pods (ml/stale-0)" in f.message
    assert f.evidence["idle_holders"] == ["ml/stale-0"]
    assert "stop the idle holders" in f.recommendation


def test_a_busy_hour_breaks_the_stretch() -> None:
    acts = [0.0] * 30
    acts[15] = 0.5
    series = _node("n1", [[0.0] * 30]) + [
        Series(gpu_labels(uuid="n1-1", gpu="1", host="n1", pod="job", namespace="ml"), act=acts)
    ]
    assert run_check(gpu060, inventory(series, 30)) == []
    (f,) = run_check(gpu060, inventory(series, 30), warm_idle_hours=14)
    assert f.evidence["idle_hours"] == 29 and f.evidence["longest_idle_hours"] == 15


def test_missing_data_is_not_idle() -> None:
    gappy: list[float | None] = [0.0] * 20 + [None] * 5 + [0.0] * 20
    assert run_check(gpu060, inventory(_node("n1", [gappy]), 45)) == []


def test_gpu_count_from_the_node_label_when_larger() -> None:
    series = _node("n1", [[0.0] * 24])
    inv = inventory(series, 24, nodes=[make_node("n1", gpus=8)])
    (f,) = run_check(gpu060, inv)
    assert f.resource.gpus == 8 and f.impact.gpu_hours == pytest.approx(192)
    assert f.severity is Severity.MEDIUM


@pytest.mark.parametrize("piece", [1, 5, 29])
def test_rows_read_in_slices_give_the_same_findings(
    piece: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hourly rows are read a slice at a time: cells, busy cells, hours held and idle
    holders come out as from one slice of every row."""
    from gpuaudit.inventory import arrays

    acts = [0.0] * 30
    acts[15] = 0.5
    series = (
        _node("n1", [[0.0] * 30, [0.01] * 30], pods=["stale-0", ""])
        + _node("n2", [[0.0] * 30])
        + [Series(gpu_labels(uuid="n1-9", gpu="9", host="n1", pod="job", namespace="ml"), act=acts)]
    )
    inv = inventory(series, 30)
    whole = run_check(gpu060, inv, warm_idle_hours=14)
    assert whole
    monkeypatch.setattr(arrays, "_SLICE", piece)
    assert run_check(gpu060, inv, warm_idle_hours=14) == whole
