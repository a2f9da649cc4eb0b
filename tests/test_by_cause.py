"""The ledger of every held GPU-hour by cause (`gpuaudit.audit.by_cause`): causes that do not
overlap and add up exactly to the allocated GPU-hours, on a hand-computed inventory and on a
generated cluster, fleet-wide, per namespace and per `--group-by-label` value."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gpuaudit.audit.by_cause import cause_ledger, rounded, rules_of
from gpuaudit.audit.ledger import ledger
from gpuaudit.cli import app
from gpuaudit.domain.pricing import DEFAULT_PRICES
from gpuaudit.inventory import Capability, Inventory, Views
from gpuaudit.inventory import columns as C
from gpuaudit.inventory.causes import CAUSES, Rules
from gpuaudit.scenario import generate
from gpuaudit.scenario.emit import write_snapshot
from tests.support.factories import START, Series, gpu_labels, inventory, iso, make_pod

HOURS = 24
END = START + HOURS * 3600


def _fleet() -> Inventory:
    """Three pods of one GPU each over 24 h (a sample a minute, buckets of 1 h):
    - serve/llm-0 started at the window's start, idle 8 h, then at 60 % for 16 h;
    - ml/trainer-0 at 50 % all along, in CrashLoopBackOff since 6.5 h before the end;
    - ml/hung-0 at 97 % GPU_UTIL but 8 % activity for 10 h, then 2 % for 14 h."""

    def s(pod: str, ns: str, uuid: str, act: list[float], util: list[float] | None) -> Series:
        return Series(gpu_labels(uuid=uuid, gpu=uuid[-1], pod=pod, namespace=ns), act, util)

    series = [
        s("llm-0", "serve", "G0", [0.0] * 8 + [0.6] * 16, None),
        s("trainer-0", "ml", "G1", [0.5] * 24, None),
        s("hung-0", "ml", "G2", [0.08] * 10 + [0.02] * 14, [97.0] * 10 + [1.0] * 14),
    ]
    trainer = make_pod("trainer-0", labels={"team": "research"}, started=START - 86400)
    trainer["status"]["containerStatuses"] = [
        {
            "name": "c",
            "restartCount": 9,
            "state": {"waiting": {"reason": "CrashLoopBackOff"}},
            "lastState": {
                "terminated": {
                    "reason": "OOMKilled",
                    "exitCode": 137,
                    "startedAt": iso(END - 7 * 3600),
                    "finishedAt": iso(END - 6.5 * 3600),
                }
            },
        }
    ]
    pods = [
        make_pod("llm-0", namespace="serve", labels={"team": "apps"}, started=START),
        trainer,
        make_pod("hung-0", labels={"team": "research"}, started=START - 86400),
    ]
    return inventory(series, HOURS, pods=pods)


def test_each_held_hour_lies_under_one_cause() -> None:
    views = Views(_fleet(), DEFAULT_PRICES)
    book = cause_ledger(views, Rules(), "team")
    assert book.fleet == pytest.approx(
        {
            "productive": 16 + 17.5,
            "idle": 14.0,
            "stalled": 10.0,
            "throttled": 0.0,
            "starting": 8.0,
            "restarting": 6.5,
            "not_measured": 0.0,
        }
    )
    assert book.allocated_gpu_hours == pytest.approx(ledger(views).allocated_gpu_hours) == 72
    assert book.effective_gpus == pytest.approx(33.5 / 24)
    assert book.allocated_gpus == pytest.approx(3.0)
    assert book.by_namespace["serve"] == pytest.approx(
        {**dict.fromkeys(CAUSES, 0.0), "productive": 16.0, "starting": 8.0}
    )
    assert book.by_group["research"]["restarting"] == pytest.approx(6.5)
    assert book.by_group["apps"]["starting"] == pytest.approx(8.0)
    assert "throttled" in book.not_measured and "POWER_VIOLATION" in book.not_measured["throttled"]


def test_throttled_busy_time_comes_out_of_the_work_it_slowed() -> None:
    """4 busy GPU-hours lost on serve/llm-0's GPU: taken from its 16 working hours, not from
    its start."""
    inv = _fleet()
    h = inv.holdings.copy()
    h[C.THROTTLED_LOST] = [4.0 if p == "llm-0" else float("nan") for p in h[C.POD]]
    inv = dataclasses.replace(
        inv, holdings=h, capabilities=inv.capabilities | {Capability.THROTTLING}
    )
    book = cause_ledger(Views(inv, DEFAULT_PRICES), Rules())
    assert book.fleet["throttled"] == pytest.approx(4.0)
    assert book.fleet["productive"] == pytest.approx(33.5 - 4.0)
    assert book.fleet["starting"] == pytest.approx(8.0)
    assert book.allocated_gpu_hours == pytest.approx(72.0)
    assert book.not_measured == {}


def test_settings_move_hours_between_causes() -> None:
    views = Views(_fleet(), DEFAULT_PRICES)
    book = cause_ledger(views, rules_of({"idle_activity": 0.1, "busy_util": 0.99}))
    # hung-0's 10 busy-looking hours are no longer stalled (GPU_UTIL under 99 %): idle at 8 %.
    assert book.fleet["stalled"] == 0.0 and book.fleet["idle"] == pytest.approx(24.0)


def test_rounded_parts_add_up_to_the_rounded_total() -> None:
    parts = {"a": 1.005, "b": 2.335, "c": 0.004}
    out = rounded(parts)
    assert sum(out.values()) == pytest.approx(round(sum(parts.values()), 2))


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("causes") / "scenario.json.gz"
    write_snapshot(generate(64, 2, 3), path)
    return path


def test_a_generated_cluster_adds_up_exactly(generated: Path) -> None:
    """Fleet-wide, per namespace and per label value: the causes sum to the allocated
    GPU-hours (the attribution ledger's), and the JSON's hundredths to its rounded total."""
    from gpuaudit import snapshot
    from gpuaudit.inventory import build

    views = Views(build(snapshot.read(generated)), DEFAULT_PRICES)
    book = cause_ledger(views, Rules(), "team")
    allocated = ledger(views).allocated_gpu_hours
    assert book.allocated_gpu_hours == pytest.approx(allocated, rel=1e-12)
    assert book.fleet["not_measured"] > 0  # nodes without an exporter
    for groups in (book.by_namespace, book.by_group):
        assert sum(sum(g.values()) for g in groups.values()) == pytest.approx(allocated, rel=1e-12)
        for cause in CAUSES:
            assert sum(g[cause] for g in groups.values()) == pytest.approx(
                book.fleet[cause], rel=1e-9, abs=1e-9
            )
    assert all(v >= 0 for g in book.by_namespace.values() for v in g.values())
    out = CliRunner().invoke(
        app, ["scan", "--snapshot", str(generated), "-q", "-f", "json", "--group-by-label", "team"]
    )
    doc: dict[str, Any] = json.loads(out.stdout)
    section = doc["ledger"]
    assert section["allocated_gpu_hours"] == doc["summary"]["allocated_gpu_hours"]
    assert round(sum(section["by_cause"].values()), 2) == section["allocated_gpu_hours"]
    for key, groups in (("by_namespace", book.by_namespace), ("by_group", book.by_group)):
        assert set(section[key]) == set(groups)
        for name, parts in section[key].items():
            assert round(sum(parts.values()), 2) == round(sum(groups[name].values()), 2)
    assert section["effective_gpus"] == pytest.approx(
        section["by_cause"]["productive"] / 48, abs=1e-3
    )


def test_a_fleet_no_pod_held_has_an_empty_ledger() -> None:
    inv = inventory([Series(gpu_labels(uuid="GPU-0"), act=[0.5] * 4)], 4)
    book = cause_ledger(Views(inv, DEFAULT_PRICES), Rules(), "team")
    assert book.allocated_gpu_hours == 0 and book.effective_gpus == 0
    assert book.by_namespace == {} and book.by_group == {}


def test_without_the_pods_the_unattributed_side_is_said_to_be_unknown() -> None:
    inv = inventory([Series(gpu_labels(pod="p-0", namespace="ml"), act=[0.5] * 4)], 4)
    book = cause_ledger(Views(inv, DEFAULT_PRICES), Rules())
    assert book.fleet["productive"] == pytest.approx(4.0)
    assert "unknown" in book.not_measured["not_measured"]
