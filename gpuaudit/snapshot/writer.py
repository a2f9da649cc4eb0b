"""The one snapshot writer: version 2, JSON Lines, gzip-compressed when the file name ends in
`.gz`. Identical content gives identical bytes.

`write` writes a `Snapshot`; `write_records` is the streaming entry point under it, for writers
that produce the answers as they go (the scenario generator): the envelope with the manifest,
then one line per record, then the end line that counts them.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import queue
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

from gpuaudit.snapshot.format import FORMAT_NAME, FORMAT_VERSION
from gpuaudit.snapshot.manifest import Manifest
from gpuaudit.snapshot.model import Snapshot, with_body

BLOCK = 1 << 22
"""About how many bytes go to the file (or the compressor) at a time."""


def encode(obj: Any) -> bytes:
    """The JSON text of every line of the file: compact, keys sorted, ASCII."""
    return json.dumps(obj, separators=(",", ":"), sort_keys=True).encode()


def write(snapshot: Snapshot, path: Path) -> None:
    """Write a snapshot (version 2, one JSON document per line); gzip-compressed when the name
    ends in `.gz`. Kubernetes pages come first, by resource, then the Prometheus answers by
    query id, each in its recorded order."""
    write_records(path, snapshot.manifest, _records(snapshot))


def write_records(path: Path, manifest: Manifest, records: Iterable[Iterable[bytes]]) -> None:
    """Write a version 2 snapshot file from its parts: the envelope with `manifest`, one line per
    record of `records` (each given as the pieces of its JSON text, as `encode` writes it, with
    no newline), then the end line that counts the records. The records must come in the
    order `write` gives them. gzip is compressed on a thread of its own (zlib lets go of the
    GIL) while the records are produced."""
    blocks = _blocks(_lines(manifest, records))
    if path.name.endswith(".gz"):
        with _GzipWriter(path) as gz:
            for block in blocks:
                gz.write(block)
    else:
        with open(path, "wb") as fh:
            for block in blocks:
                fh.write(block)


def _lines(manifest: Manifest, records: Iterable[Iterable[bytes]]) -> Iterator[bytes]:
    head = {"format": FORMAT_NAME, "version": FORMAT_VERSION, "manifest": manifest.to_json()}
    yield encode(head) + b"\n"
    n = 0
    for record in records:
        yield from record
        yield b"\n"
        n += 1
    yield encode({"end": n}) + b"\n"


def _records(snapshot: Snapshot) -> Iterator[tuple[bytes, ...]]:
    for res in sorted(snapshot.kubernetes):
        for page in snapshot.kubernetes[res]:
            yield (encode({"kubernetes": res, "page": page}),)
    for qid in sorted(snapshot.prometheus):
        for entry in snapshot.prometheus[qid]:
            raw = entry.get("raw")
            if isinstance(raw, bytes) and "body" not in entry:
                # The answer's bytes as the server sent them; `body` sorts before every other
                # key, so the line is what `encode` would write around it.
                rest = {k: v for k, v in entry.items() if k not in ("raw", "answer")}
                yield b'{"body":', raw, b",", encode({**rest, "prometheus": qid})[1:]
            else:
                yield (encode({**with_body(entry), "prometheus": qid}),)


def _blocks(chunks: Iterator[bytes], size: int = BLOCK) -> Iterator[bytes]:
    """The text in blocks of about `size` bytes; a chunk that large on its own goes as it is
    (no copy of an answer's bytes)."""
    buf: list[bytes] = []
    n = 0
    for c in chunks:
        if len(c) >= size:
            if buf:
                yield b"".join(buf)
                buf, n = [], 0
            yield c
            continue
        buf.append(c)
        n += len(c)
        if n >= size:
            yield b"".join(buf)
            buf, n = [], 0
    if buf:
        yield b"".join(buf)


class _GzipWriter:
    """A gzip stream (mtime 0, level 6: identical content gives identical bytes), compressed on
    a thread of its own while the text is produced."""

    def __init__(self, path: Path) -> None:
        self._raw = open(path, "wb")  # noqa: SIM115 - closed in close()
        self._gz = gzip.GzipFile(
            filename="", mode="wb", fileobj=self._raw, mtime=0, compresslevel=6
        )
        self._q: queue.Queue[bytes | None] = queue.Queue(maxsize=4)
        self._err: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            data = self._q.get()
            if data is None:
                return
            if self._err is None:
                try:
                    self._gz.write(data)
                except BaseException as exc:  # noqa: BLE001 - raised again by the writer
                    self._err = exc

    def write(self, data: bytes) -> None:
        if self._err is not None:
            raise self._err
        self._q.put(data)

    def close(self, ok: bool = True) -> None:
        """Finish the stream (`ok`), or just let go of everything after an error."""
        self._q.put(None)
        self._thread.join()
        try:
            if ok and self._err is not None:
                raise self._err
            if ok:
                self._gz.close()
        finally:
            if not self._gz.closed:
                with contextlib.suppress(Exception):
                    self._gz.close()
            self._raw.close()

    def __enter__(self) -> _GzipWriter:
        return self

    def __exit__(
        self,
        et: type[BaseException] | None,
        ev: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close(ok=et is None)
