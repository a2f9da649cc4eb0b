"""Issue 31: a side-file is used only where it is proven to be this user's copy of its snapshot.

A flipped bit, a side-file re-saved with altered content (by anyone without this user's key),
a planted header of 100 MB, a side-file truncated while it is read: none changes a figure, each
is passed over with one note on stderr, and the snapshot's text is read instead. The writer
never writes through a planted `FILE.columns.tmp`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from gpuaudit import snapshot
from gpuaudit.cli import app
from gpuaudit.snapshot import reader, sidekey
from gpuaudit.snapshot import sidefile as columns
from gpuaudit.snapshot.answers import Answer
from tests.support.paths import DEMO, ROOT
from tests.test_snapshot_columns import _read_without_text, _same

runner = CliRunner()


@pytest.fixture(autouse=True)
def own_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This test's own key (never the key of whoever runs the tests)."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    return cache / "gpuaudit" / "side-file.key"


@pytest.fixture
def demo(tmp_path: Path) -> Path:
    path = tmp_path / "demo.snapshot.json.gz"
    shutil.copyfile(DEMO, path)
    return path


def _report(path: Path) -> tuple[dict[str, Any], str]:
    res = runner.invoke(app, ["scan", "--snapshot", str(path), "-f", "json"])
    assert res.exit_code in (0, 1), res.output
    doc: dict[str, Any] = json.loads(res.stdout)
    doc.pop("generated_at", None)
    return doc, res.stderr


def _not_used(stderr: str) -> int:
    return stderr.count("was not used")


def test_a_flipped_bit_never_changes_a_figure(demo: Path) -> None:
    want = snapshot.read(demo, side_file=False)
    side = reader.index(demo)
    clean = side.read_bytes()
    # Bits all over the file: the preamble, the seals, the header, every array.
    for at in [*range(0, 200, 23), *range(200, len(clean), len(clean) // 40)]:
        flipped = bytearray(clean)
        flipped[at] ^= 0x10
        side.write_bytes(bytes(flipped))
        notes: list[str] = []
        _same(want, snapshot.read(demo, note=notes.append))
        assert len(notes) == 1, (at, notes)
        assert "was not used" in notes[0]


def test_a_flipped_bit_in_the_numbers_leaves_the_report_as_it_was(demo: Path) -> None:
    """The issue's case: one bit in the hourly numbers moved idle GPU-hours from 649 to 601 with
    complete=true. The scan reads the text instead, and says so once."""
    before, _ = _report(demo)
    side = reader.index(demo)
    data = bytearray(side.read_bytes())
    data[len(data) - 4000] ^= 0x40  # in the last array, the hourly values
    side.write_bytes(bytes(data))
    after, stderr = _report(demo)
    assert after == before
    assert _not_used(stderr) == 1
    assert "gpuaudit: note: the side-file" in stderr and "snapshot index" in stderr


def _altered(demo: Path, how: str) -> snapshot.Snapshot:
    """The demo as an attacker would have the side-file say it is."""
    snap = snapshot.read(demo, side_file=False)
    if how == "idle GPUs hidden":
        for qid, entries in snap.prometheus.items():
            if qid.startswith(("act_", "util_")) and "count" not in qid:
                for e in entries:
                    a: Answer = e["answer"]
                    busy = 1.0 if qid.startswith("act_") else 100.0
                    e["answer"] = replace(
                        a,
                        values=np.where(np.isnan(a.values), a.values, busy),
                        vs=np.full_like(a.vs, busy),
                    )
    elif how == "pods dropped":
        snap.kubernetes["pods"] = [
            {**page, "items": page["items"][: len(page["items"]) // 3]}
            for page in snap.kubernetes["pods"]
        ]
    return snap  # a cluster renamed: in the envelope


@pytest.mark.parametrize("how", ["idle GPUs hidden", "pods dropped", "cluster renamed"])
def test_a_side_file_re_saved_with_other_content_never_changes_the_report(
    demo: Path, tmp_path: Path, own_key: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """Written by the attacker's own gpuaudit, with the snapshot's true size and digest: valid
    in every way but the seal, which only this user's key makes."""
    sidekey.ensure()  # this user has a key of their own
    before, _ = _report(demo)
    envelope = reader._envelope(demo, str(demo))
    if how == "cluster renamed":
        envelope = {**envelope, "manifest": {**envelope["manifest"], "cluster": "renamed"}}
    forged = _altered(demo, how)
    theirs = tmp_path / "attacker"
    with monkeypatch.context() as m:
        m.setenv("XDG_CACHE_HOME", str(theirs))
        key = sidekey.ensure()
        columns.write(forged, envelope, demo, columns.fingerprint(demo), key)
        # Under the attacker's key the side-file is taken: it does say something else.
        assert _report(demo)[0] != before
    after, stderr = _report(demo)
    assert after == before
    assert _not_used(stderr) == 1 and "not what this user's gpuaudit wrote" in stderr
    # Copying the seals of a genuine side-file over the forged one does not help either.
    genuine = reader.index(demo).read_bytes()
    columns.write(forged, envelope, demo, columns.fingerprint(demo), key)
    start = columns._PREAMBLE.size
    data = columns.side_path(demo).read_bytes()
    columns.side_path(demo).write_bytes(
        data[:start] + genuine[start : columns._START] + data[columns._START :]
    )
    after, stderr = _report(demo)
    assert after == before and _not_used(stderr) == 1


def _plant_header(demo: Path, n: int) -> Path:
    """A side-file whose header is `n` bytes of zeros (a sparse file), with no arrays, naming
    the snapshot's true size and digest."""
    size, digest = columns.fingerprint(demo)
    pre = columns._PREAMBLE.pack(columns.MAGIC, columns.VERSION, 0, size, digest, n, *[0] * 6)
    side = columns.side_path(demo)
    with open(side, "wb") as fh:
        fh.write(pre + bytes(2 * columns._SEAL))
        fh.truncate(columns._START + n)
    return side


class _NoParse:
    """Stands in for orjson in the side-file module: any parse fails the test."""

    @staticmethod
    def loads(_: object) -> None:
        raise AssertionError("the side-file's header was parsed")


def test_a_planted_100_mb_header_is_refused_before_it_is_parsed(
    demo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    want = snapshot.read(demo, side_file=False)
    sidekey.ensure()
    _plant_header(demo, 100 * 1024**2)
    monkeypatch.setattr(columns, "orjson", _NoParse)
    notes: list[str] = []
    _same(want, snapshot.read(demo, note=notes.append))
    assert len(notes) == 1 and "not what this user's gpuaudit wrote" in notes[0]

    # Past the bound on a header, not even read: its size is checked first.
    def no_read(*_: object) -> int:
        raise AssertionError("the side-file was read past its preamble")

    monkeypatch.setattr(columns, "_fill", no_read)
    monkeypatch.setenv("GPUAUDIT_SIDE_FILE_MAX_HEADER_BYTES", str(1024**2))
    notes.clear()
    _same(want, snapshot.read(demo, note=notes.append))
    assert notes[0].count("104,857,600 bytes, more than 1,048,576") == 1
    assert "GPUAUDIT_SIDE_FILE_MAX_HEADER_BYTES" in notes[0]


_CUT_WHILE_READ = """
import json, os, sys
from pathlib import Path
from gpuaudit.snapshot import reader, sidekey
from gpuaudit.snapshot import sidefile as columns

from tests.test_snapshot_side_file_proof import _figures

demo, when = Path(sys.argv[1]), sys.argv[2]
side = columns.side_path(demo)
half = side.stat().st_size // 2


def cut():
    os.truncate(side, half)


if when == "parsed":  # the side-file is cut once it was opened and its header is read
    real = columns.orjson

    class Cutting:
        JSONDecodeError = real.JSONDecodeError

        @staticmethod
        def loads(data):
            cut()
            return real.loads(data)

    columns.orjson = Cutting
else:  # cut between its preamble and its body
    load = sidekey.load

    def cutting_load():
        cut()
        return load()

    sidekey.load = cutting_load
snap = reader.read(demo, note=lambda text: print(text, file=sys.stderr))
print(json.dumps(_figures(snap)))
"""


def _figures(snap: snapshot.Snapshot) -> list[list[Any]]:
    """Per query: its answers, and the sum of their numbers."""
    return [
        [
            q,
            len(v),
            sum(float(np.nansum(e["answer"].vs) + np.nansum(e["answer"].values)) for e in v),
        ]
        for q, v in sorted(snap.prometheus.items())
    ]


@pytest.mark.parametrize("when", ["parsed", "body"])
def test_a_side_file_truncated_while_it_is_read_never_kills_the_scan(
    demo: Path, own_key: Path, when: str
) -> None:
    """Cut in half between its opening and its use: the scan goes on (no SIGBUS), from the
    side-file read before the cut or, cut before its body was read, from the text."""
    want = snapshot.read(demo, side_file=False)
    reader.index(demo)
    env = {**os.environ, "XDG_CACHE_HOME": str(own_key.parents[1])}
    res = subprocess.run(
        [sys.executable, "-c", _CUT_WHILE_READ, str(demo), when],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        check=False,
    )
    assert res.returncode == 0, (res.returncode, res.stderr[-2000:])
    assert json.loads(res.stdout) == _figures(want)
    if when == "body":
        assert "it was cut short while it was read" in res.stderr


def test_the_writer_never_writes_through_a_planted_tmp_link(demo: Path, tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    planted = demo.with_name(demo.name + ".columns.tmp")
    planted.symlink_to(victim)
    side = reader.index(demo)
    assert victim.read_bytes() == b"precious"
    assert planted.is_symlink() and not side.is_symlink()
    assert [p.name for p in tmp_path.iterdir() if ".tmp" in p.name] == [planted.name]
    # A link planted where the side-file goes is replaced, not written through.
    side.unlink()
    side.symlink_to(victim)
    reader.index(demo)
    assert victim.read_bytes() == b"precious" and not side.is_symlink()


def test_the_key_is_private_and_an_unsafe_one_is_never_trusted(
    demo: Path, own_key: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reader.index(demo)
    assert own_key.stat().st_mode & 0o777 == 0o600
    assert own_key.parent.stat().st_mode & 0o077 == 0
    assert columns.side_path(demo).stat().st_mode & 0o077 == 0
    _read_without_text(demo, monkeypatch)
    # A key others may read could have sealed anything: side-files read as text, and no
    # side-file is written with it.
    own_key.chmod(0o644)
    notes: list[str] = []
    _same(snapshot.read(demo, side_file=False), snapshot.read(demo, note=notes.append))
    assert "no key to prove it with" in notes[0] and "mode 0600" in notes[0]
    res = runner.invoke(app, ["snapshot", "index", str(demo)])
    assert res.exit_code == 2 and len(res.stderr.strip().splitlines()) == 1
    assert "no key to seal it with" in res.stderr and "Traceback" not in res.stderr
    # Gone: the next index makes a new one, and the side-files sealed with the old one are
    # read as text until then.
    own_key.unlink()
    notes.clear()
    snapshot.read(demo, note=notes.append)
    assert "does not exist" in notes[0]
    reader.index(demo)
    _read_without_text(demo, monkeypatch)


def test_a_side_file_of_a_rewritten_snapshot_is_passed_over_and_said(demo: Path) -> None:
    reader.index(demo)
    snap = snapshot.read(demo, side_file=False)
    resource = next(iter(snap.kubernetes))
    snap.kubernetes.pop(resource)
    snapshot.write(snap, demo)
    notes: list[str] = []
    snapshot.read(demo, note=notes.append)
    assert len(notes) == 1 and "written for other bytes than the snapshot's" in notes[0]
