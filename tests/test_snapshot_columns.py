"""The columnar side-file (`snapshot.columns`): a snapshot read through it is the snapshot read
from its text, field for field and array for array; a side-file that does not match its
snapshot, or is damaged, is passed over; `snapshot index` refuses what it cannot index in one
line."""

from __future__ import annotations

import json
import mmap
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from gpuaudit import snapshot
from gpuaudit.cli import app
from gpuaudit.core.errors import SnapshotError
from gpuaudit.snapshot import reader
from gpuaudit.snapshot import sidefile as columns
from gpuaudit.snapshot.answers import Answer
from tests.support.paths import DEMO

runner = CliRunner()


def _same(a: snapshot.Snapshot, b: snapshot.Snapshot) -> None:
    assert a.manifest == b.manifest
    assert a.kubernetes == b.kubernetes
    assert list(a.prometheus) == list(b.prometheus)
    for qid, entries in a.prometheus.items():
        others = b.prometheus[qid]
        assert len(entries) == len(others)
        for x, y in zip(entries, others, strict=True):
            assert list(x) == list(y)
            assert {k: v for k, v in x.items() if k != "answer"} == {
                k: v for k, v in y.items() if k != "answer"
            }
            _same_answer(x["answer"], y["answer"])


def _same_answer(x: Answer, y: Answer) -> None:
    assert (x.rtype, x.dropped, x.malformed) == (y.rtype, y.dropped, y.malformed)
    assert [dict(m) for m in x.metrics] == [dict(m) for m in y.metrics]
    assert [list(m) for m in x.metrics] == [list(m) for m in y.metrics]  # key order too
    for name in ("values", "offsets", "ts", "vs"):
        a, b = getattr(x, name), getattr(y, name)
        assert a.dtype == b.dtype and a.shape == b.shape, name
        assert np.array_equal(a, b, equal_nan=True), name


def _sharing(s: snapshot.Snapshot) -> list[list[int]]:
    """Which series share one label object, as numbers in order of first appearance."""
    seen: dict[int, int] = {}
    return [
        [seen.setdefault(id(m), len(seen)) for m in e["answer"].metrics]
        for entries in s.prometheus.values()
        for e in entries
    ]


@pytest.fixture(autouse=True)
def own_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This test's own key that seals side-files (never the key of whoever runs the tests)."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    return cache / "gpuaudit" / "side-file.key"


@pytest.fixture
def demo(tmp_path: Path) -> Path:
    path = tmp_path / "demo.snapshot.json.gz"
    shutil.copyfile(DEMO, path)
    return path


def test_a_side_file_gives_the_snapshot_its_text_gives(
    demo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from_text = snapshot.read(demo)
    out = reader.index(demo)
    assert out == demo.with_name(demo.name + ".columns") and out.is_file()

    def no_text(*_: object) -> None:
        raise AssertionError("the answers' text was parsed")

    with monkeypatch.context() as m:
        m.setattr(reader, "from_record_line", no_text)
        from_side = snapshot.read(demo)
        with pytest.raises(AssertionError, match="text was parsed"):
            snapshot.read(demo, side_file=False)
    _same(from_text, from_side)
    # Series with one label set share one object, as the reader's interning makes them.
    assert _sharing(from_text) == _sharing(from_side)


def test_the_scan_report_is_the_same_with_and_without_a_side_file(demo: Path) -> None:
    def report() -> dict[str, Any]:
        res = runner.invoke(app, ["scan", "--snapshot", str(demo), "-f", "json"])
        assert res.exit_code in (0, 1), res.output
        doc = json.loads(res.stdout)
        doc.pop("generated_at", None)
        return doc

    before = report()
    res = runner.invoke(app, ["snapshot", "index", str(demo)])
    assert res.exit_code == 0, res.output
    assert "wrote" in res.stderr
    assert report() == before


def test_a_side_file_of_another_file_is_passed_over(demo: Path, tmp_path: Path) -> None:
    reader.index(demo)
    # The snapshot is rewritten (the same answers, one Kubernetes page fewer): the side-file
    # names the old bytes, so the new text is read.
    snap = snapshot.read(demo, side_file=False)
    resource = next(iter(snap.kubernetes))
    changed = snapshot.Snapshot(
        manifest=snap.manifest,
        prometheus=snap.prometheus,
        kubernetes={k: v for k, v in snap.kubernetes.items() if k != resource},
    )
    snapshot.write(changed, demo)
    assert resource not in snapshot.read(demo).kubernetes


def test_the_side_file_is_read_into_private_memory(demo: Path) -> None:
    """Its arrays are views of one buffer read from the file (never a map of it: a file
    truncated under a map kills the process with SIGBUS); a write into one changes neither the
    file nor another reader's arrays."""
    side = reader.index(demo)
    before = side.read_bytes()
    first = snapshot.read(demo)
    answer = next(e["answer"] for v in first.prometheus.values() for e in v if len(e["answer"].vs))
    assert answer.vs.base is not None and not isinstance(answer.vs.base, mmap.mmap)
    answer.vs[:1] = 42.0
    assert side.read_bytes() == before
    again = snapshot.read(demo)
    _same(snapshot.read(demo, side_file=False), again)


@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty", "older", "fifo", "version"])
def test_a_damaged_side_file_is_passed_over(demo: Path, damage: str) -> None:
    want = snapshot.read(demo)
    side = reader.index(demo)
    data = side.read_bytes()
    if damage == "truncate":
        side.write_bytes(data[: len(data) // 2])
    elif damage == "garbage":
        side.write_bytes(b"not a side-file at all")
    elif damage == "empty":
        side.write_bytes(b"")
    elif damage == "older":  # what gpuaudit wrote before side-files were sealed: an .npz
        with open(side, "wb") as fh:
            np.savez(fh, header=np.zeros(3, dtype=np.uint8))
    elif damage == "fifo":  # opening a FIFO to read waits for a writer: never here
        side.unlink()
        os.mkfifo(side)
    else:
        side.write_bytes(data[:16] + (99).to_bytes(4, "little") + data[20:])
    notes: list[str] = []
    _same(want, snapshot.read(demo, note=notes.append))
    assert len(notes) == 1 and f"the side-file {side} was not used" in notes[0]


def test_an_oversized_side_file_is_not_read(demo: Path) -> None:
    """The bound on a snapshot's size bounds its side-file too: past it, the text is read, and
    refused."""
    reader.index(demo)
    notes: list[str] = []
    with pytest.raises(SnapshotError, match="decompresses to more than"):
        snapshot.read(demo, limit=1000, note=notes.append)
    assert "the bound on a snapshot" in notes[0]


def test_index_refuses_in_one_line(tmp_path: Path, demo: Path) -> None:
    missing = runner.invoke(app, ["snapshot", "index", str(tmp_path / "nothing.json")])
    assert missing.exit_code == 2
    assert "does not exist" in missing.stderr and "Traceback" not in missing.stderr
    v1 = tmp_path / "v1.json"
    v1.write_text(json.dumps(snapshot.read(demo).to_json()))
    with pytest.raises(SnapshotError, match="version 1"):
        reader.index(v1)
    res = runner.invoke(app, ["snapshot", "index", str(v1)])
    assert res.exit_code == 2 and len(res.stderr.strip().splitlines()) == 1


def _read_without_text(path: Path, monkeypatch: pytest.MonkeyPatch) -> snapshot.Snapshot:
    """The snapshot through its side-file; fails if any answer's text is parsed."""

    def no_text(*_: object) -> None:
        raise AssertionError("the answers' text was parsed")

    with monkeypatch.context() as m:
        m.setattr(reader, "from_record_line", no_text)
        return snapshot.read(path)


def test_scenario_writes_the_side_file_unless_told_not_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "s.json.gz"
    args = ["scenario", "--gpus", "24", "--days", "1", "--output", str(out)]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    assert columns.side_path(out).is_file()
    _same(snapshot.read(out, side_file=False), _read_without_text(out, monkeypatch))
    bare = tmp_path / "bare.json.gz"
    res = runner.invoke(app, [*args[:-1], str(bare), "--no-side-file"])
    assert res.exit_code == 0, res.output
    assert bare.read_bytes() == out.read_bytes()
    assert not columns.side_path(bare).exists()


def test_series_are_keyed_by_label_number_as_by_label_object(demo: Path) -> None:
    """Answers read from a side-file carry their label-set numbers, and the inventory's parser
    looks series up by them: every answer's key numbers, and the keys, must be those the text
    gives."""
    from gpuaudit.inventory.parse import Parser

    from_text = Parser(snapshot.read(demo, side_file=False))
    reader.index(demo)
    side = snapshot.read(demo)
    assert all(
        e["answer"].numbers is not None for entries in side.prometheus.values() for e in entries
    )
    from_side = Parser(side)
    for qid, answers in from_text.answers.items():
        for a, b in zip(answers, from_side.answers[qid], strict=True):
            assert from_text.kids(a).tolist() == from_side.kids(b).tolist(), qid
    assert from_text.keys == from_side.keys
    assert from_text.ident == from_side.ident
