from __future__ import annotations

import dataclasses

import pytest

from gpuaudit.audit.assemble import run_checks
from gpuaudit.audit.settings import Settings
from gpuaudit.checks import by_code
from gpuaudit.checks import gpu070_sick_gpus as gpu070
from gpuaudit.checks.findings import Drain, Finding, Severity
from gpuaudit.domain import xid
from gpuaudit.inventory import Capability, build
from tests.support.factories import Series, gpu_labels, inventory, run_check, snapshot


def _run(series: list[Series], hours: int = 10) -> list[Finding]:
    return run_check(gpu070, inventory(series, hours))


def _held(uuid: str = "GPU-7", gpu: str = "3", pod: str = "train-0", **kw: object) -> Series:
    lab = gpu_labels(uuid=uuid, gpu=gpu, host="n1", pod=pod, namespace="ml")
    return Series(lab, act=[0.5] * 10, **kw)  # type: ignore[arg-type]


# ---- NVIDIA's catalog -----------------------------------------------------------------------


def test_catalog_buckets_follow_nvidia() -> None:
    assert xid.entry(8).bucket is xid.Bucket.RESTART_APP
    assert xid.entry(13).catalog == "RESTART_APP"
    assert xid.entry(79).bucket is xid.Bucket.REBOOT and xid.entry(79).catalog == "RESTART_BM"
    assert xid.entry(95).bucket is xid.Bucket.RESET_GPU
    assert xid.entry(63).catalog == "IGNORE"
    assert xid.entry(48).catalog == "WORKFLOW_XID_48" and xid.entry(48).note
    assert xid.entry(54).bucket is xid.Bucket.CONTACT_SUPPORT
    assert xid.entry(9999).bucket is xid.UNKNOWN_BUCKET and xid.entry(9999).catalog == ""
    assert 79 in xid.codes_in(xid.Bucket.REBOOT) and 63 not in xid.codes_in(xid.Bucket.REBOOT)


def test_xid_63_waits_for_a_reset_rather_than_being_ignored() -> None:
    assert gpu070.xid_action(63) is gpu070.Action.RESET_WHEN_IDLE
    assert gpu070.xid_action(92) is gpu070.Action.NONE
    assert gpu070.xid_action(79) is gpu070.Action.REBOOT


def test_explain_lists_every_catalogued_code_under_its_action() -> None:
    """The docstring's list by code is what the check does (it cannot drift from the table)."""
    doc = " ".join(gpu070.__doc__.split())  # type: ignore[union-attr]
    for action in gpu070.Action:
        codes = sorted(c for c in xid.CATALOG if gpu070.xid_action(c) is action)
        listed = ", ".join(str(c) for c in codes)
        assert f"{action.value}: {listed}" in doc, action


def test_meaning_falls_back_to_the_table_without_err_msg() -> None:
    assert xid.meaning(79) == "GPU has fallen off the bus"
    assert xid.meaning(79, "exporter text") == "exporter text"
    assert xid.meaning(9999) == "unknown XID"


# ---- XIDs by bucket ---------------------------------------------------------------------------


def test_reboot_xid_is_critical_and_drains_the_node() -> None:
    (f,) = _run([_held(xids=[0, 79])])
    assert f.code == "GPU070" and f.severity is Severity.CRITICAL
    assert (f.resource.kind, f.resource.name, f.resource.node) == ("GPU", "GPU-7", "n1")
    assert f.message == (
        "GPU 3 (H100 80GB HBM3, GPU-7) on node n1 reported XID 79 (xid 79, 1 event) while pod "
        "ml/train-0 held it for 10 GPU-hours; NVIDIA's guidance: reboot the node."
    )
    assert f.impact.gpu_hours == pytest.approx(10)
    assert f.impact.cost == pytest.approx(68.8)
    assert "kubectl cordon n1" in f.recommendation and "reboot" in f.recommendation
    assert f.drains == (Drain("n1"),)
    assert f.pods == ("ml/train-0",)
    assert f.evidence["xids"]["79"]["catalog_action"] == "RESTART_BM"
    assert f.evidence["xid_codes"] == [79]


def test_reset_bucket_xid_is_high_and_frees_only_that_gpu() -> None:
    (f,) = _run([_held(xids=[119])])
    assert f.severity is Severity.HIGH
    assert f.drains == (Drain("n1", "GPU-7"),)
    assert "nvidia-smi -r -i 3" in f.recommendation and "Move ml/train-0" in f.recommendation
    assert "kubectl cordon" not in f.recommendation.split(";")[0]
    assert f.message.endswith("NVIDIA's guidance: reset the GPU.")


def test_application_xid_is_medium_and_points_at_the_app() -> None:
    (f,) = _run([_held(pod="bad-kernel", xids=[13])])
    assert f.severity is Severity.MEDIUM and f.drains == ()
    assert f.recommendation.startswith("Restart ml/bad-kernel")
    assert "cordon" not in f.recommendation


def test_ignore_bucket_xid_is_low_with_no_action() -> None:
    (f,) = _run([_held(xids=[92])])
    assert f.severity is Severity.LOW and f.drains == ()
    assert f.evidence["action"] == "no action now"


def test_unknown_xid_is_taken_as_a_reset_and_says_so() -> None:
    (f,) = _run([_held(xids=[777])])
    assert f.severity is Severity.HIGH
    assert f.evidence["xids"]["777"]["catalog_action"] == "not in gpuaudit's copy of the catalog"


def test_the_most_disruptive_xid_decides() -> None:
    (f,) = _run([_held(xids=[13, 79], xid_events={13: 3, 79: 1})])
    assert f.severity is Severity.CRITICAL
    assert "XID 13 (xid 13, 3 events) and XID 79 (xid 79, 1 event)" in f.message


# ---- a lone XID 63, pending and failed remaps -------------------------------------------------


def test_a_lone_xid_63_is_not_cordon_and_drain() -> None:
    (f,) = _run([_held(xids=[63])])
    assert f.severity is Severity.MEDIUM
    assert f.drains == ()
    assert f.recommendation.startswith("No drain is needed")
    assert "kubectl" not in f.recommendation and "nvidia-smi -r -i 3" in f.recommendation
    assert f.evidence["action"] == "reset the GPU when its work ends"


def test_pending_remap_waits_for_a_reset() -> None:
    s = _held(health={"remap_pending_max": 1.0, "remap_uncorr_max": 2.0})
    (f,) = _run([s])
    assert f.severity is Severity.MEDIUM and f.drains == ()
    assert "a row remap pending until the next GPU reset and 2 rows remapped" in f.message
    assert f.evidence["row_remap_pending_max"] == 1.0


def test_failed_remap_calls_for_rma_and_drains_the_node() -> None:
    s = _held(health={"remap_failure_max": 1.0, "remap_uncorr_max": 8.0})
    (f,) = _run([s])
    assert f.severity is Severity.CRITICAL
    assert f.drains == (Drain("n1"),)
    assert "replaced" in f.recommendation and "RMA" in f.recommendation
    assert "a failed row remap and 8 rows remapped for uncorrectable errors" in f.message


def test_pending_and_failed_remaps_differ() -> None:
    pending = _held(uuid="G0", health={"remap_pending_max": 1.0, "remap_failure_max": 0.0})
    failed = _held(uuid="G1", gpu="1", health={"remap_failure_max": 1.0})
    found = {f.resource.name: f for f in _run([pending, failed])}
    assert found["G0"].severity is Severity.MEDIUM and found["G0"].drains == ()
    assert found["G1"].severity is Severity.CRITICAL and found["G1"].drains == (Drain("n1"),)


def test_remapped_rows_in_effect_are_not_reported() -> None:
    """With the pending flag at 0 the remaps are applied: the GPU protected itself."""
    assert _run([_held(health={"remap_uncorr_max": 1.0, "remap_pending_max": 0.0})]) == []


def test_remapped_rows_without_the_pending_flag_need_no_action_now() -> None:
    (f,) = _run([_held(health={"remap_uncorr_max": 1.0})])
    assert f.severity is Severity.LOW and f.drains == ()
    assert "1 row remapped for uncorrectable errors" in f.message
    assert f.evidence["row_remap_pending_max"] is None


# ---- uncorrectable ECC --------------------------------------------------------------------


def test_volatile_double_bit_errors_call_for_a_reset() -> None:
    (f,) = _run([_held(health={"ecc_dbe_max": 3.0})])
    assert f.severity is Severity.HIGH and "3 volatile double-bit ECC errors" in f.message
    assert f.drains == (Drain("n1", "GPU-7"),)


def test_lifetime_double_bit_errors_alone_are_low() -> None:
    (f,) = _run([_held(health={"ecc_dbe_agg_max": 2.0, "ecc_dbe_max": 0.0})])
    assert f.severity is Severity.LOW
    assert "2 double-bit ECC errors in its lifetime" in f.message


# ---- events, not samples ------------------------------------------------------------------


def test_a_stale_gauge_is_not_an_error() -> None:
    """The gauge showed XID 79 all window long but never changed into it: the event was
    before the window (or before this pod), so nothing is reported."""
    assert _run([_held(xids=[79], xid_events={})]) == []


def test_a_stale_code_beside_a_new_event_decides_nothing() -> None:
    (f,) = _run([_held(xids=[13, 79], xid_events={13: 1})])
    assert f.severity is Severity.MEDIUM
    assert f.evidence["stale_xid_codes"] == [79] and f.evidence["xid_codes"] == [13]
    assert "still showed XID 79 from before, with no new event" in f.message
    assert f.drains == ()


def test_without_the_events_query_every_code_seen_counts_once() -> None:
    snap = snapshot([_held(xids=[79])], 10)
    snap = dataclasses.replace(
        snap, prometheus={k: v for k, v in snap.prometheus.items() if k != "xid_events_hourly"}
    )
    inv = build(snap)
    assert Capability.XID_EVENTS not in inv.capabilities
    assert "not counted" in inv.missing[Capability.XID_EVENTS]
    (f,) = run_check(gpu070, inv)
    assert f.severity is Severity.CRITICAL
    assert "event count unknown" in f.message
    assert f.evidence["xid_events_counted"] is False


def test_events_are_summed_over_the_holdings_of_one_gpu() -> None:
    a = _held(pod="a", xids=[13], xid_events={13: 2})
    b = dataclasses.replace(
        _held(pod="b", xids=[13], xid_events={13: 1}), act=[None] * 5 + [0.5] * 5
    )
    a.act = [0.5] * 5 + [None] * 5
    (f,) = _run([a, b])
    assert "3 events" in f.message and f.pods == ("ml/a", "ml/b")


# ---- near misses ------------------------------------------------------------------------------


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
