"""The one snapshot reader. A version 2 file is streamed: one line at a time, each Prometheus
answer parsed into arrays as it is read (`gpuaudit.snapshot.answers`), so memory holds the parsed
data and one line, never the whole text; a file cut short at a line boundary is refused by its
missing end line. A version 1 file (one JSON document) is read whole. gzip is detected by its
magic bytes. The decompressed size and the length of one line are bounded
(`limits.SNAPSHOT_BYTES`, `limits.SNAPSHOT_LINE_BYTES`), so a gzip bomb or one huge line is
refused before it is held in memory.
"""

from __future__ import annotations

import gzip
import os
import queue
import sys
import threading
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from gpuaudit.core import limits
from gpuaudit.core.errors import SnapshotError
from gpuaudit.core.gcpause import without_gc
from gpuaudit.snapshot import sidefile as columns
from gpuaudit.snapshot import sidekey
from gpuaudit.snapshot.answers import Interner, from_record_line, parse
from gpuaudit.snapshot.format import FORMAT_NAME, READABLE_VERSIONS
from gpuaudit.snapshot.manifest import Manifest
from gpuaudit.snapshot.model import Snapshot

MAX_BYTES = limits.SNAPSHOT_BYTES.default
"""Largest decompressed snapshot accepted by default (`GPUAUDIT_SNAPSHOT_MAX_BYTES` sets it);
a bigger one (or a gzip bomb) is refused."""

_GZIP_MAGIC = b"\x1f\x8b"


class _ReadAhead:
    """Blocks of a stream read (for gzip: decompressed) on a thread of their own, a couple of
    blocks ahead of the parsing. zlib lets go of the GIL, so on two cores the decompression
    overlaps the parsing instead of adding to it."""

    def __init__(self, stream: IO[bytes] | gzip.GzipFile, block: int, depth: int = 2) -> None:
        self._q: queue.Queue[bytes | BaseException] = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(stream, block), daemon=True)
        self._thread.start()

    def _run(self, stream: IO[bytes] | gzip.GzipFile, block: int) -> None:
        try:
            while not self._stop.is_set():
                chunk = stream.read(block)
                self._put(chunk)
                if not chunk:
                    return
        except BaseException as exc:  # noqa: BLE001 - raised again in the reading thread
            self._put(exc)

    def _put(self, item: bytes | BaseException) -> None:
        # Waits in short steps, so that `close` is never left waiting on a reader nobody reads.
        while not self._stop.is_set() and not self._offer(item):
            pass

    def _offer(self, item: bytes | BaseException) -> bool:
        try:
            self._q.put(item, timeout=0.1)
        except queue.Full:
            return False
        return True

    def read(self, _size: int = -1) -> bytes:
        """The next block; empty at the end (read no further after that)."""
        item = self._q.get()
        if isinstance(item, BaseException):
            raise item
        return item

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


class _Lines:
    """Lines of a stream, read in large blocks, refusing to go past `limit` bytes in all or
    `line_limit` bytes in one line."""

    BLOCK = 1 << 23

    def __init__(
        self,
        stream: IO[bytes] | gzip.GzipFile | _ReadAhead,
        limit: int,
        name: str,
        line_limit: int | None = None,
        on_block: Callable[[], None] | None = None,
    ) -> None:
        self.stream, self.limit, self.name, self.total = stream, limit, name, 0
        self.line_limit = limit if line_limit is None else line_limit
        self.lines = 0
        self._buf = b""
        self._eof = False
        self._on_block = on_block

    def _too_big(self) -> SnapshotError:
        return SnapshotError(
            f"snapshot {self.name} decompresses to more than {self.limit} bytes; refusing it "
            f"(raise {limits.SNAPSHOT_BYTES.env} if it is genuine)"
        )

    def _too_long(self) -> SnapshotError:
        return SnapshotError(
            f"snapshot {self.name} line {self.lines + 1} is longer than {self.line_limit} "
            f"bytes; refusing it (raise {limits.SNAPSHOT_LINE_BYTES.env} if it is genuine)"
        )

    def _more(self) -> bool:
        if self._eof:
            return False
        chunk = self.stream.read(self.BLOCK)
        if not chunk:
            self._eof = True
            return False
        self.total += len(chunk)
        if self.total > self.limit:
            raise self._too_big()
        if self._on_block is not None:
            self._on_block()
        self._buf = self._buf + chunk if self._buf else chunk
        return True

    def readline(self) -> bytes:
        """The next line with its newline (the last may lack one); empty at the end."""
        nl = self._buf.find(b"\n")
        if nl >= 0:
            line, self._buf = self._buf[: nl + 1], self._buf[nl + 1 :]
            return self._counted(line)
        # A line longer than what is buffered: gather blocks until its end turns up, never
        # more than the line limit (so one huge line is refused holding about that much).
        parts = [self._buf]
        held = len(self._buf)
        self._buf = b""
        while self._more():
            nl = self._buf.find(b"\n")
            if nl >= 0:
                parts.append(self._buf[: nl + 1])
                self._buf = self._buf[nl + 1 :]
                return self._counted(b"".join(parts))
            parts.append(self._buf)
            held += len(self._buf)
            self._buf = b""
            if held > self.line_limit:
                raise self._too_long()
        return self._counted(b"".join(parts))

    def _counted(self, line: bytes) -> bytes:
        if len(line) > self.line_limit + 1:  # the newline is not counted
            raise self._too_long()
        self.lines += 1
        return line

    def rest(self) -> bytes:
        """Everything not read yet."""
        parts = [self._buf]
        self._buf = b""
        while self._more():
            parts.append(self._buf)
            self._buf = b""
        return b"".join(parts)


def _loads(data: bytes) -> Any:
    import orjson

    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise ValueError(str(exc)) from None


@without_gc
def read(
    path: Path,
    limit: int | None = None,
    line_limit: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    side_file: bool = True,
    note: Callable[[str], None] | None = None,
) -> Snapshot:
    """Read and validate a snapshot file. Raises `SnapshotError` with one clear line.

    When the file has a columnar side-file (`columns`, written by `index`) that is proven to be
    this user's copy of it, the answers are taken from there instead of being parsed from the
    text again (`side_file` False: never). A side-file that is there but not proven is passed
    over, and `note` is told so in one sentence (None: a line on stderr).

    A version 2 file is streamed: one line at a time, each Prometheus answer parsed into arrays
    as it is read, so memory holds the parsed data and one line, never the whole text. A
    version 1 file (one JSON document) is read whole. `limit` bounds the decompressed size and
    `line_limit` one line (a version 1 document on one line included); None takes the
    settings (`limits.SNAPSHOT_BYTES`, `limits.SNAPSHOT_LINE_BYTES`). `progress` gets (bytes of the
    file read, its size) after every block."""
    name = str(path)
    limit = limits.SNAPSHOT_BYTES.value() if limit is None else limit
    line_limit = limits.SNAPSHOT_LINE_BYTES.value() if line_limit is None else line_limit
    if side_file:
        snap = _from_side_file(path, limit, name, note or _on_stderr)
        if snap is not None:
            if progress is not None:
                size = path.stat().st_size
                progress(size, size)
            return snap
    try:
        with open(path, "rb") as fh:
            head = fh.read(2)
            fh.seek(0)
            tick = None
            if progress is not None:
                size = os.fstat(fh.fileno()).st_size

                def tick() -> None:
                    progress(min(fh.tell(), size), size)

            if head == _GZIP_MAGIC:
                with gzip.GzipFile(fileobj=fh, mode="rb") as gz:
                    ahead = _ReadAhead(gz, _Lines.BLOCK)
                    try:
                        return _read_stream(_Lines(ahead, limit, name, line_limit, tick), name)
                    finally:
                        ahead.close()
            return _read_stream(_Lines(fh, limit, name, line_limit, tick), name)
    except FileNotFoundError:
        raise SnapshotError(f"snapshot {name} does not exist") from None
    except IsADirectoryError:
        raise SnapshotError(f"snapshot {name} is a directory, not a file") from None
    except (OSError, EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise SnapshotError(f"snapshot {name} could not be read: {exc}") from None


def _from_side_file(
    path: Path, limit: int, name: str, note: Callable[[str], None]
) -> Snapshot | None:
    """The snapshot as its side-file holds it; None when it has none, or one that is not
    proven to be this user's copy of it (`note` is told why)."""
    try:
        parts = columns.read(path, limit)
    except columns.Stale as exc:
        why = str(exc)
    except OSError as exc:
        why = f"it could not be read ({exc.strerror or exc})"
    else:
        if parts is None:
            return None
        envelope, prom, kube = parts
        if _streamed(envelope):
            return from_json({**envelope, "prometheus": prom, "kubernetes": kube}, name)
        why = "it does not hold a version 2 snapshot"
    side = _shown(str(columns.side_path(path)))
    note(
        f"the side-file {side} was not used: {why}. The snapshot's text is read instead, "
        f"which is slower; `gpuaudit snapshot index {_shown(name)}` writes the side-file again."
    )
    return None


def _on_stderr(text: str) -> None:
    sys.stderr.write(f"gpuaudit: note: {text}\n")


def _shown(text: str) -> str:
    """`text` with every character that is not printable (escape codes, newlines) escaped: a
    file name is data, not terminal control."""
    if text.isprintable():
        return text[:300]
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)[:300]


def index(path: Path) -> Path:
    """Write the columnar side-file of the version 2 snapshot `path` (`columns`), sealed with
    this user's key (`sidekey`), so that later reads of it skip parsing its text; returns the
    side-file's path. Raises `SnapshotError` with one clear line."""
    name = str(path)
    try:
        key = sidekey.ensure()
    except sidekey.Unavailable as exc:
        raise SnapshotError(
            f"cannot write the side-file of {name}: there is no key to seal it with: {exc}. "
            "Set XDG_CACHE_HOME to a folder only you can write, or go without the side-file "
            "(--no-side-file)"
        ) from None
    before = _fingerprint(path, name)
    snap = read(path, side_file=False)
    envelope = _envelope(path, name)
    if not _streamed(envelope) or _fingerprint(path, name) != before:
        raise SnapshotError(
            f"snapshot {name} is format version 1 or changed while it was read; only a "
            "version 2 snapshot gets a side-file (write it again with `gpuaudit snapshot save`)"
        )
    assert isinstance(envelope, dict)
    try:
        return columns.write(snap, envelope, path, before, key)
    except columns.Stale as exc:
        raise SnapshotError(f"snapshot {name} cannot have a side-file: {exc}") from None
    except OSError as exc:
        raise SnapshotError(
            f"cannot write the side-file {columns.side_path(path)}: {exc.strerror or exc}"
        ) from None


def _fingerprint(path: Path, name: str) -> tuple[int, bytes]:
    try:
        return columns.fingerprint(path)
    except FileNotFoundError:
        raise SnapshotError(f"snapshot {name} does not exist") from None
    except IsADirectoryError:
        raise SnapshotError(f"snapshot {name} is a directory, not a file") from None
    except OSError as exc:
        raise SnapshotError(f"snapshot {name} could not be read: {exc}") from None


def _envelope(path: Path, name: str) -> Any:
    """The first line of a snapshot file, parsed (None when it is not JSON)."""
    limit = limits.SNAPSHOT_LINE_BYTES.value()
    try:
        with open(path, "rb") as fh:
            if fh.read(2) == _GZIP_MAGIC:
                fh.seek(0)
                with gzip.GzipFile(fileobj=fh, mode="rb") as gz:
                    first = _Lines(gz, limit, name, limit).readline()
            else:
                fh.seek(0)
                first = _Lines(fh, limit, name, limit).readline()
        return _loads(first)
    except (OSError, EOFError, zlib.error, ValueError):
        return None


def _streamed(doc: Any) -> bool:
    """Whether a first line is the envelope of a streamed (version 2) snapshot."""
    return (
        isinstance(doc, dict)
        and doc.get("version") == 2
        and "prometheus" not in doc
        and "kubernetes" not in doc
    )


def _read_stream(lines: _Lines, name: str) -> Snapshot:
    first = lines.readline()
    try:
        doc = _loads(first)
    except ValueError:
        doc = None
    streamed = _streamed(doc)
    if not streamed:
        # Version 1 (or not a snapshot at all): one document, perhaps over several lines.
        data = first + lines.rest() if doc is None else first
        if doc is None:
            try:
                doc = _loads(data)
            except ValueError as exc:
                raise SnapshotError(f"snapshot {name} is not valid JSON: {exc}") from None
        return from_json(doc, name)
    assert isinstance(doc, dict)
    snap = from_json({**doc, "prometheus": {}, "kubernetes": {}}, name)
    intern = Interner()
    n = records = 1
    end: Any = None
    while True:
        line = lines.readline()
        if not line:
            break
        n += 1
        if not line.strip():
            continue
        if end is not None:
            raise SnapshotError(f"{name} line {n}: data after the end line")
        if line.startswith(b'{"end":'):
            try:
                end = _loads(line)["end"]
            except (ValueError, TypeError, KeyError):
                raise SnapshotError(f"{name} line {n}: the end line is not valid JSON") from None
            continue
        _add_record(snap, line, f"{name} line {n}", intern)
        records += 1
    if end is None:
        raise SnapshotError(
            f"snapshot {name} is truncated: it has no end line after its {records - 1} records"
        )
    if end != records - 1:
        raise SnapshotError(
            f"snapshot {name} is damaged: its end line counts {end!r} records, it holds "
            f"{records - 1}"
        )
    return snap


def _add_record(snap: Snapshot, line: bytes, where: str, intern: Interner) -> None:
    record = from_record_line(line, intern)
    if record is None:
        try:
            record = _loads(line)
        except ValueError as exc:
            raise SnapshotError(f"{where} is not valid JSON: {exc}") from None
    if not isinstance(record, dict):
        raise SnapshotError(f"{where} is not a JSON object")
    qid, res = record.get("prometheus"), record.get("kubernetes")
    if isinstance(qid, str):
        entries = snap.prometheus.setdefault(qid, [])
        if "answer" not in record:
            if "body" not in record:
                raise SnapshotError(f'{where}: the answer to {qid} has no "body"')
            record["answer"] = parse(
                record.pop("body"), f"prometheus.{qid}[{len(entries)}]", intern
            )
        del record["prometheus"]
        entries.append(record)
    elif isinstance(res, str) and isinstance(record.get("page"), dict):
        snap.kubernetes.setdefault(res, []).append(record["page"])
    else:
        raise SnapshotError(
            f'{where} is neither a Prometheus answer ("prometheus": id) nor a Kubernetes '
            'list page ("kubernetes": resource, "page": {...})'
        )


def from_json(doc: Any, name: str = "<snapshot>") -> Snapshot:
    """Validate the envelope of a parsed snapshot document."""
    if not isinstance(doc, dict) or doc.get("format") != FORMAT_NAME:
        raise SnapshotError(f'{name} is not a gpuaudit snapshot (no "format": "{FORMAT_NAME}")')
    version = doc.get("version")
    if version not in READABLE_VERSIONS or isinstance(version, bool):
        raise SnapshotError(
            f"{name} is snapshot format version {version!r}; this gpuaudit reads versions "
            + " and ".join(str(v) for v in READABLE_VERSIONS)
        )
    manifest = doc.get("manifest")
    prom = doc.get("prometheus", {})
    kube = doc.get("kubernetes", {})
    if not isinstance(manifest, dict):
        raise SnapshotError(f"{name} has no manifest object")
    if not isinstance(prom, dict) or not all(isinstance(v, list) for v in prom.values()):
        raise SnapshotError(f'{name}: "prometheus" must map query ids to lists of answers')
    if not isinstance(kube, dict) or not all(isinstance(v, list) for v in kube.values()):
        raise SnapshotError(f'{name}: "kubernetes" must map resources to lists of pages')
    return Snapshot(manifest=Manifest.from_json(manifest, name), prometheus=prom, kubernetes=kube)
