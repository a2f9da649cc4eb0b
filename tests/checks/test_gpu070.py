from __future__ import annotations

import pytest

from gpuaudit.audit import run_checks
from gpuaudit.checks import by_code
from gpuaudit.checks import gpu070_sick_gpus as gpu070
from gpuaudit.findings import Severity
from gpuaudit.settings import Settings
from tests.factories import Series, gpu_labels, inventory, run_check


def _run(series: list[Series], hours: int = 10):  # type: ignore[no-untyped-def]
    return run_check(gpu070, inventory(series, hours))


def test_drain_xid_on_a_held_gpu_is_critical_with_cordon_advice() -> None:
    lab = gpu_labels(uuid="GPU-7", gpu="3", host="n1", pod="train-0", namespace="ml")
    (f,) = _run([Series(lab, act=[0.5] * 10, xids=[0, 79])])
    assert f.code == "GPU070" and f.severity is Severity.CRITICAL
    assert (f.resource.kind, f.resource.name, f.resource.node) == ("GPU", "GPU-7", "n1")
    assert f.message == (
        "GPU 3 (H100 80GB HBM3, GPU-7) on node n1 reported XID 79 (xid 79) while pod "
        "ml/train-0 held it for 10 GPU-hours."
    )
    assert f.impact.gpu_hours == pytest.approx(10)
    assert f.impact.cost == pytest.approx(68.8)
    assert "kubectl cordon n1" in f.recommendation and "drain" in f.recommendation
    assert f.evidence["xid_codes"] == [79] and f.evidence["drain_xids"] == [79]


def test_meaning_falls_back_to_the_table_without_err_msg() -> None:
    from gpuaudit import xid

    assert xid.meaning(79) == "GPU has fallen off the bus"
    assert xid.meaning(79, "exporter text") == "exporter text"
    assert xid.meaning(9999) == "unknown XID"


def test_application_xid_is_medium_and_points_at_the_app() -> None:
    lab = gpu_labels(pod="bad-kernel", namespace="ml")
    (f,) = _run([Series(lab, act=[0.5] * 10, xids=[13])])
    assert f.severity is Severity.MEDIUM
    assert "logs of ml/bad-kernel" in f.recommendation


def test_row_remap_failure_and_remapped_rows() -> None:
    failed = Series(
        gpu_labels(uuid="G0", pod="a", namespace="ml"),
        act=[0.5] * 10,
        health={"remap_failure_max": 1.0, "remap_uncorr_max": 8.0},
    )
    remapped = Series(
        gpu_labels(uuid="G1", gpu="1", pod="b", namespace="ml"),
        act=[0.5] * 10,
        health={"remap_uncorr_max": 2.0, "remap_failure_max": 0.0},
    )
    found = {f.resource.name: f for f in _run([failed, remapped])}
    assert found["G0"].severity is Severity.CRITICAL
    assert "a failed row remap and 8 rows remapped" in found["G0"].message
    assert found["G1"].severity is Severity.HIGH
    assert found["G1"].evidence["uncorrectable_remapped_rows_max"] == 2


def test_volatile_double_bit_errors_are_critical() -> None:
    s = Series(gpu_labels(pod="a", namespace="ml"), act=[0.5] * 5, health={"ecc_dbe_max": 3.0})
    (f,) = _run([s], 5)
    assert f.severity is Severity.CRITICAL and "3 volatile double-bit ECC errors" in f.message


def test_healthy_or_unallocated_gpus_stay_quiet() -> None:
    free_sick = Series(gpu_labels(uuid="G0"), act=[0.0] * 10, xids=[79])
    held_ok = Series(
        gpu_labels(uuid="G1", gpu="1", pod="a", namespace="ml"), act=[0.5] * 10, xids=[0]
    )
    assert _run([free_sick, held_ok]) == []


def test_skipped_with_the_reason_when_no_health_metric_was_collected() -> None:
    inv = inventory([Series(gpu_labels(pod="a", namespace="ml"), act=[0.5] * 5)], 5)
    check = by_code("GPU070")
    assert check is not None
    result = run_checks(inv, Settings(), (check,))
    (skip,) = result.skipped
    assert skip.code == "GPU070" and "DCGM_FI_DEV_XID_ERRORS" in skip.reason
