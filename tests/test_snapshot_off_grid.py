"""Issue 31: points of a range answer that lie inside the window but off its bucket grid (not at
the window's start plus whole steps) are not the backend's answer to a range query, which
holds its own steps alone. Counted as more buckets, three such points between every two gave 4
times the allocated GPU-hours with complete=true. They are left out, said (the query and how
many), and the audit is incomplete."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from gpuaudit import snapshot
from gpuaudit.cli import app
from gpuaudit.inventory import build
from tests.support.factories import Series, gpu_labels, make_node, make_pod
from tests.support.factories import snapshot as make_snapshot
from tests.support.paths import DEMO
from tests.support.raw_snapshot import raw_snapshot

runner = CliRunner()


def _write(doc: dict[str, Any], path: Path) -> Path:
    """`doc` (as `raw_snapshot` reads one) written as a version 2 snapshot file."""
    lines = [{"format": "gpuaudit-snapshot", "manifest": doc["manifest"], "version": 2}]
    lines += [{"kubernetes": r, "page": p} for r, pages in doc["kubernetes"].items() for p in pages]
    lines += [{**e, "prometheus": q} for q, entries in doc["prometheus"].items() for e in entries]
    lines.append({"end": len(lines) - 1})
    path.write_text("".join(json.dumps(line, sort_keys=True) + "\n" for line in lines))
    return path


def _scan(path: Path) -> dict[str, Any]:
    res = runner.invoke(app, ["scan", "--snapshot", str(path), "-f", "json"])
    assert res.exit_code in (0, 1), res.output
    report: dict[str, Any] = json.loads(res.stdout)
    return report


def _off_grid(doc: dict[str, Any]) -> dict[str, int]:
    """Three points between every two of each hourly series, at a quarter, a half and three
    quarters of a step, with the value of the point before; how many, per query."""
    window = doc["manifest"]["window"]
    step, end = window["step"], window["end"]
    added: dict[str, int] = {}
    for qid, entries in doc["prometheus"].items():
        if not qid.endswith("_hourly"):
            continue
        for e in entries:
            for r in e["body"]["data"]["result"]:
                values = []
                for t, v in r["values"]:
                    values.append([t, v])
                    if t + step <= end:
                        values += [[t + step * j / 4, v] for j in (1, 2, 3)]
                        added[qid] = added.get(qid, 0) + 3
                r["values"] = values
    return added


def test_off_grid_points_do_not_count_and_are_said(tmp_path: Path) -> None:
    clean = _scan(_write(raw_snapshot(DEMO), tmp_path / "clean.json"))
    doc = raw_snapshot(DEMO)
    added = _off_grid(doc)
    assert added["act_hourly"] > 1000
    edited = _scan(_write(doc, tmp_path / "edited.json"))
    for key in ("summary", "findings", "gpus", "clusters"):
        if key in clean:
            assert edited[key] == clean[key], key
    assert clean["complete"] is True and edited["complete"] is False
    for qid, n in added.items():
        said = [w for w in edited["warnings"] if w.startswith(f"{n} points of {qid} lay inside")]
        assert len(said) == 1 and "off its bucket grid" in said[0], qid
    assert any("off the bucket grid" in r for r in edited["incomplete_reasons"])


def test_a_point_a_rounding_away_from_the_grid_is_on_it_and_counted_once() -> None:
    """Within half a millisecond (less than a Prometheus timestamp can say) a point is on the
    grid, put exactly on it, and a second point at the same bucket replaces the first rather
    than adding a bucket; a millisecond off is off."""
    hours = 4
    series = [
        Series(gpu_labels(uuid="GPU-0", gpu="0", pod="p0", namespace="ml"), act=[0.0] * hours)
    ]
    doc: dict[str, Any] = make_snapshot(
        series, hours, pods=[make_pod("p0")], nodes=[make_node("node-a")]
    ).to_json()

    def held(edit: Any) -> tuple[float, tuple[str, ...]]:
        d = json.loads(json.dumps(doc))
        for e in d["prometheus"]["act_hourly"]:
            for r in e["body"]["data"]["result"]:
                r["values"] = edit(r["values"])
        inv = build(snapshot.from_json(d))
        return float(len(inv.hourly)), inv.warnings

    rows, warnings = held(lambda v: v)
    assert rows == hours and not [w for w in warnings if "grid" in w]
    nudged, warnings = held(lambda v: [[t + 0.0004, x] for t, x in v] + [[v[-1][0], "0"]])
    assert nudged == hours and not [w for w in warnings if "grid" in w]
    off, warnings = held(lambda v: v + [[v[-1][0] - 0.001, "0"]])
    assert off == hours
    assert [w for w in warnings if "1 points of act_hourly lay inside" in w]
