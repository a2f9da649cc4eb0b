from __future__ import annotations

import pytest

from gpuaudit.audit.assemble import run_checks
from gpuaudit.audit.settings import Settings
from gpuaudit.checks import by_code
from gpuaudit.checks import gpu040_busy_no_work as gpu040
from gpuaudit.checks.findings import Finding, Severity
from tests.support.factories import Series, gpu_labels, inventory, run_check


def _hung(
    hours: int = 10, util: float = 97.0, act: float = 0.08, uuid: str = "G0", gpu: str = "0"
) -> Series:
    lab = gpu_labels(uuid=uuid, gpu=gpu, pod="allreduce-0", namespace="ml")
    return Series(lab, act=[act] * hours, util=[util] * hours)


def _run(series: list[Series], hours: int = 10) -> list[Finding]:
    return run_check(gpu040, inventory(series, hours))


def test_a_hung_collective_is_reported() -> None:
    (f,) = _run([_hung()])
    assert f.code == "GPU040" and f.severity is Severity.MEDIUM
    assert f.impact.gpu_hours == pytest.approx(10)
    assert f.impact.cost == pytest.approx(68.8)
    assert f.message == (
        "Pod ml/allreduce-0 kept 1 GPU (H100 80GB HBM3) at 97 % GPU utilisation but 8.0 % "
        "engine activity for 10 h: busy-looking, doing no work."
    )
    assert "NCCL" in f.recommendation
    assert f.evidence["activity_metric"] == "engine activity"


def test_every_gpu_counts_and_a_day_of_it_is_high() -> None:
    (f,) = _run([_hung(24), _hung(24, uuid="G1", gpu="1")], 24)
    assert f.impact.gpu_hours == pytest.approx(48) and f.severity is Severity.HIGH
    assert "kept 2 GPUs" in f.message


def test_near_miss_only_two_hours_stays_quiet() -> None:
    lab = gpu_labels(pod="allreduce-0", namespace="ml")
    s = Series(lab, act=[0.6] * 8 + [0.08] * 2, util=[97.0] * 10)
    assert _run([s]) == []


def test_near_miss_util_below_eighty_percent_stays_quiet() -> None:
    assert _run([_hung(util=75.0)]) == []


def test_near_miss_real_work_stays_quiet() -> None:
    assert _run([_hung(act=0.25)]) == []


def test_thresholds_are_settings() -> None:
    inv = inventory([_hung(util=75.0)], 10)
    (f,) = run_check(gpu040, inv, busy_util=0.7)
    assert f.evidence["threshold_util"] == 0.7
    assert run_check(gpu040, inv, busy_util=0.7, busy_min_hours=11) == []


def test_skipped_without_profiling_metrics() -> None:
    """GPU_UTIL alone cannot tell busy from stuck: the check says why it did not run."""
    lab = gpu_labels(pod="allreduce-0", namespace="ml")
    s = Series(lab, act=[], util=[97.0] * 10)
    check = by_code("GPU040")
    assert check is not None
    result = run_checks(inventory([s], 10), Settings(), (check,))
    (skip,) = result.skipped
    assert skip.code == "GPU040" and "DCGM_FI_PROF" in skip.reason


@pytest.mark.parametrize("piece", [1, 3, 7])
def test_rows_read_in_slices_give_the_same_findings(
    piece: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The held rows are tested a slice at a time: the same rows pass as in one slice."""
    from gpuaudit import snapshot
    from gpuaudit.inventory import arrays, build
    from tests.support.paths import DEMO

    inv = build(snapshot.read(DEMO))
    whole = run_check(gpu040, inv)
    assert whole
    monkeypatch.setattr(arrays, "_SLICE", piece)
    assert run_check(gpu040, inv) == whole
