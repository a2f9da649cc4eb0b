"""Snapshot files: version 2 is streamed line by line, version 1 is still read, damage is one
clear error."""

from __future__ import annotations

import gzip
import json
import tracemalloc
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gpuaudit import snapshot
from gpuaudit.core.errors import ConfigError, SnapshotError
from gpuaudit.inventory import build
from gpuaudit.snapshot import answers
from tests.support.factories import Series, gpu_labels
from tests.support.factories import snapshot as make_snapshot


def _small() -> snapshot.Snapshot:
    series = [
        Series(gpu_labels(uuid=f"GPU-{i}", gpu=str(i), pod=f"p{i}", namespace="ns"), act=[0.5] * 6)
        for i in range(3)
    ]
    return make_snapshot(series, hours=6)


def _frames_equal(a: snapshot.Snapshot, b: snapshot.Snapshot) -> None:
    ia, ib = build(a), build(b)
    pd.testing.assert_frame_equal(ia.holdings, ib.holdings, check_exact=True)
    pd.testing.assert_frame_equal(ia.hourly, ib.hourly, check_exact=True)


def test_version_2_round_trip_reads_answers_as_arrays(tmp_path: Path) -> None:
    snap = _small()
    path = tmp_path / "s.json.gz"
    snapshot.write(snap, path)
    lines = gzip.decompress(path.read_bytes()).splitlines()
    assert json.loads(lines[0])["version"] == 2
    assert json.loads(lines[-1]) == {"end": len(lines) - 2}
    back = snapshot.read(path)
    entry = back.prometheus["act_hourly"][0]
    assert "body" not in entry and isinstance(entry["answer"], answers.Answer)
    assert entry["answer"].rtype == "matrix" and len(entry["answer"].metrics) == 3
    _frames_equal(snap, back)
    # Written again, the same bytes.
    again = tmp_path / "again.json.gz"
    snapshot.write(back, again)
    assert snapshot.read(again).manifest == snap.manifest
    _frames_equal(snap, snapshot.read(again))


def test_version_1_documents_are_still_read(tmp_path: Path) -> None:
    snap = _small()
    v1 = tmp_path / "v1.json"
    v1.write_text(json.dumps(snap.to_json()))
    assert json.loads(v1.read_text())["version"] == 1
    _frames_equal(snap, snapshot.read(v1))
    pretty = tmp_path / "v1-pretty.json"
    pretty.write_text(json.dumps(snap.to_json(), indent=2))
    _frames_equal(snap, snapshot.read(pretty))


def test_reading_streams_large_files(tmp_path: Path) -> None:
    """A 42 MB snapshot of many answers is read holding about one block of its text at a time,
    never the whole file (a version 1 document needs several times its size)."""
    labels = [gpu_labels(uuid=f"GPU-{i}", gpu=str(i % 8), host=f"n{i // 8}") for i in range(400)]
    hours = 168
    times = [1_700_000_000 + 3600 * h for h in range(hours)]
    body = {
        "status": "success",
        "data": {
            "resultType": "matrix",
            "result": [
                {"metric": m, "values": [[t, str(0.25 + (j % 7) / 100)] for t in times]}
                for j, m in enumerate(labels)
            ],
        },
    }
    entry = {"query": "q", "params": {"start": times[0], "end": times[-1], "step": 3600}}
    chunks = [{**entry, "body": body} for _ in range(30)]
    man = _small().manifest
    big = snapshot.Snapshot(manifest=man, prometheus={"act_hourly": chunks}, kubernetes={})
    path = tmp_path / "big.json"
    snapshot.write(big, path)
    size = path.stat().st_size
    assert size > 40e6  # 30 answers of 1.4 MB
    del big, chunks, body
    tracemalloc.start()
    try:
        back = snapshot.read(path)
        kept, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(back.prometheus["act_hourly"]) == 30
    first = back.prometheus["act_hourly"][0]["answer"]
    assert len(first.ts) == 400 * hours
    assert np.allclose(first.vs[:3], [0.25, 0.25, 0.25])
    # What is kept is the parsed arrays (30 x 1 MB); on the way, memory held about one block of
    # text (8 MB) and one line's pieces beyond them, not the file.
    assert peak - kept < size / 2, (peak, kept, size)


def _lines(tmp_path: Path) -> list[bytes]:
    path = tmp_path / "s.json"
    snapshot.write(_small(), path)
    return path.read_bytes().splitlines(keepends=True)


def _read(tmp_path: Path, lines: list[bytes]) -> snapshot.Snapshot:
    path = tmp_path / "damaged.json"
    path.write_bytes(b"".join(lines))
    return snapshot.read(path)


def test_a_file_cut_at_a_line_boundary_is_refused(tmp_path: Path) -> None:
    lines = _lines(tmp_path)
    with pytest.raises(SnapshotError, match="truncated"):
        _read(tmp_path, lines[:-3])
    with pytest.raises(SnapshotError, match="truncated"):
        _read(tmp_path, lines[:-1])


def test_damaged_lines_are_one_clear_error(tmp_path: Path) -> None:
    lines = _lines(tmp_path)
    with pytest.raises(SnapshotError, match=r"line 3 is not valid JSON"):
        _read(tmp_path, [*lines[:2], b'{"prometheus": "act_sum", "body": {\n', *lines[3:]])
    with pytest.raises(SnapshotError, match="neither a Prometheus answer"):
        _read(tmp_path, [*lines[:2], b'{"something": 1}\n', *lines[2:]])
    with pytest.raises(SnapshotError, match="counts"):
        _read(tmp_path, [*lines[:2], *lines[3:]])
    with pytest.raises(SnapshotError, match="after the end line"):
        _read(tmp_path, [*lines, lines[1]])
    with pytest.raises(SnapshotError, match="status 'error'"):
        bad = json.loads(lines[-2])
        bad["body"] = {"status": "error", "error": "boom"}
        _read(tmp_path, [*lines[:-2], json.dumps(bad).encode() + b"\n", lines[-1]])


def test_the_size_limit_applies_while_streaming(tmp_path: Path) -> None:
    path = tmp_path / "s.json.gz"
    snapshot.write(_small(), path)
    with pytest.raises(SnapshotError, match="more than 1000 bytes"):
        snapshot.read(path, limit=1000)


def test_the_manifest_is_typed_and_keeps_what_it_does_not_hold(tmp_path: Path) -> None:
    """Known keys read into typed fields; unknown keys, and known keys of another type, are
    kept as they were: reading by key sees them, and writing gives them back. The keys that
    say how far the data can be trusted are the exception (see the next test)."""
    snap = _small()
    path = tmp_path / "s.json"
    snapshot.write(snap, path)
    lines = path.read_bytes().splitlines(keepends=True)
    head = json.loads(lines[0])
    head["manifest"].update(cluster=5, custom={"a": [1]}, complete=False)
    path.write_bytes(json.dumps(head).encode() + b"\n" + b"".join(lines[1:]))
    man = snapshot.read(path).manifest
    assert man.cluster == "" and man.warnings == () and man.complete is False
    assert man.unread == {"cluster": 5, "custom": {"a": [1]}}
    assert man["cluster"] == 5 and man["custom"] == {"a": [1]}
    assert man.window.start == snap.manifest.window.start and man["window"]["step"] == 3600
    again = tmp_path / "again.json"
    snapshot.write(snapshot.read(path), again)
    assert json.loads(again.read_bytes().splitlines()[0])["manifest"] == dict(man)


@pytest.mark.parametrize(
    ("changes", "complete", "warnings", "reasons"),
    [
        ({"complete": "false"}, False, (), ("not true or false",)),
        ({"complete": 1}, False, (), ("not true or false",)),
        ({"warnings": "one warning"}, True, ("one warning",), ()),
        ({"warnings": ["a", 5]}, True, ("a", "5"), ()),
        ({"incomplete_reasons": "cut short", "complete": False}, False, (), ("cut short",)),
    ],
)
def test_how_far_a_snapshot_can_be_trusted_is_never_misread(
    tmp_path: Path,
    changes: dict[str, object],
    complete: bool,
    warnings: tuple[str, ...],
    reasons: tuple[str, ...],
) -> None:
    """`"complete": "false"` is not true (the audit is incomplete, and says why); a `warnings`
    text is one warning, not one per letter; read by key, these keys give what the typed fields
    hold, never the file's malformed value."""
    path = tmp_path / "s.json"
    snapshot.write(_small(), path)
    lines = path.read_bytes().splitlines(keepends=True)
    head = json.loads(lines[0])
    head["manifest"].update(changes)
    path.write_bytes(json.dumps(head).encode() + b"\n" + b"".join(lines[1:]))
    snap = snapshot.read(path)
    man = snap.manifest
    assert man.complete is complete and man["complete"] is complete
    assert man.warnings == warnings and man["warnings"] == list(warnings)
    assert len(man.incomplete_reasons) == len(reasons)
    assert all(want in got for want, got in zip(reasons, man.incomplete_reasons, strict=True))
    inv = build(snap)
    assert inv.complete is complete and inv.warnings == warnings
    assert inv.incomplete_reasons == man.incomplete_reasons


def test_write_records_is_the_layout_of_write(tmp_path: Path) -> None:
    """The streaming entry point, given a snapshot's records, writes what `write` writes."""
    snap = _small()
    whole, streamed = tmp_path / "a.json.gz", tmp_path / "b.json.gz"
    snapshot.write(snap, whole)
    lines = gzip.decompress(whole.read_bytes()).splitlines()
    records = ([line[:10], line[10:]] for line in lines[1:-1])
    snapshot.write_records(streamed, snap.manifest, records)
    assert streamed.read_bytes() == whole.read_bytes()


def test_one_huge_line_is_refused_at_the_line_bound_with_bounded_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 20: a small gzip file whose one line inflates to 1.5 GiB was held whole (3.25 GB).
    The same attack scaled down: a 64 MiB line against a 4 MiB line bound is refused naming the
    line, holding about the bound, not the line."""
    monkeypatch.setenv("GPUAUDIT_SNAPSHOT_MAX_LINE_BYTES", str(4 << 20))
    path = tmp_path / "long.json.gz"
    head = json.dumps(
        {"format": "gpuaudit-snapshot", "manifest": _small().manifest.to_json(), "version": 2}
    )
    with gzip.open(path, "wb", compresslevel=1) as fh:
        fh.write(head.encode() + b'\n{"kubernetes":"pods","page":{"items":[],"pad":"')
        chunk = b"0" * (1 << 20)
        for _ in range(64):
            fh.write(chunk)
        fh.write(b'"}}\n{"end":1}\n')
    assert path.stat().st_size < 1 << 20
    tracemalloc.start()
    try:
        with pytest.raises(SnapshotError, match=r"line 2 is longer than 4194304 bytes"):
            snapshot.read(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 48 << 20  # the bound and a few read blocks, not the 64 MiB line


def test_a_first_line_past_the_bound_is_refused_too(tmp_path: Path) -> None:
    """A version 1 document on one line is one line: bounded like any other."""
    path = tmp_path / "v1.json"
    path.write_text(json.dumps(_small().to_json()))
    with pytest.raises(SnapshotError, match="line 1 is longer than 1000 bytes"):
        snapshot.read(path, line_limit=1000)
    assert snapshot.read(path).manifest.cluster == "test"


@pytest.mark.parametrize(
    ("window", "message"),
    [
        ({"start": -1e300}, "window.start -1e\\+300 is not a unix time"),
        ({"end": 1.7e12}, "window.end 1.7e\\+12 is not a unix time in seconds .*milliseconds"),
        ({"step": 0.5}, "window.step 0.5 must be a whole number of seconds"),
        ({"step": 1e300}, "window.step 1e\\+300 must be a whole number of seconds"),
        ({"step": 0}, "window.step 0 must be"),
        ({"start": "0"}, "window.start must be a finite number"),
        ({"step": True}, "window.step must be a finite number"),
        ({"start": 1, "step": 1}, "holds 1,700,0[0-9,]+ buckets of 1 s, more than the 200,000"),
    ],
)
def test_unusable_windows_are_one_clear_error_before_anything_is_allocated(
    tmp_path: Path, window: dict[str, object], message: str
) -> None:
    """Issue 20: a window start of -1e300, a step of 0.5 or 1e300, and a window of 10^12 s (an
    end in milliseconds, 18.9 GB) are refused as one line naming the key."""
    snap = _small()
    doc = snap.to_json()
    doc["manifest"]["window"].update(window)
    path = tmp_path / "w.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(SnapshotError, match=message):
        snapshot.read(path)


def test_the_bucket_bound_is_a_setting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "s.json.gz"
    snapshot.write(_small(), path)  # 6 buckets
    monkeypatch.setenv("GPUAUDIT_MAX_BUCKETS", "5")
    with pytest.raises(SnapshotError, match="6 buckets of 3600 s, more than the 5 allowed"):
        snapshot.read(path)
    monkeypatch.setenv("GPUAUDIT_MAX_BUCKETS", "lots")
    with pytest.raises(ConfigError, match="GPUAUDIT_MAX_BUCKETS='lots' is not a positive whole"):
        snapshot.read(path)
