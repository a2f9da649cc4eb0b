"""The columnar side-file of a snapshot: the snapshot as the reader parsed it, written once
beside it (`FILE.columns`) so that later scans of the same file skip parsing its text.

The snapshot stays the record: it keeps the servers' raw answers, and the side-file is only a
faster way to the same `Snapshot`. A cache is derived data, so it is used only where it is
proven to be what this user's gpuaudit derived from these very bytes; anything else is passed
over, the snapshot's text is read and the reader says so.

**How it is proven.** Whoever can write the side-file can compute any digest of its content
again, so a digest alone proves nothing (a side-file re-saved with valid checksums once hid
every idle GPU while the snapshot stayed pristine). Nor can a side-file be checked against the
snapshot more cheaply than by parsing the snapshot, which is what it saves: the numbers are in
the answers' text, and comparing a sample of them would leave the rest unproven. Who owns the
file proves nothing either (unpacking someone else's archive makes its files one's own). What
does prove it is a MAC: when `gpuaudit snapshot index` (or `snapshot save`, or `scenario`) has
parsed the snapshot, it seals the side-file with a BLAKE2b digest keyed with a secret of this
user (`sidekey`: 32 random bytes in a file only this user can read) over everything the
side-file holds, the snapshot's size and digest among it. A reader recomputes the seals over the
bytes it read and the digest of the snapshot as it is now; only a side-file that this user's
gpuaudit wrote from this snapshot, unchanged since by so much as a bit, passes. A side-file
written by another user or on another machine is therefore read as text (`snapshot index`
writes one of one's own), and so is every side-file when the key is gone.

**What it costs.** The side-file is read whole into memory (not mapped: a file that is
truncated under a map kills the process with SIGBUS) and hashed once with the key, beside the
snapshot's own digest (which was taken before too), on a thread of its own: about 1 s per GB of
side-file on one core (100 MB for 10,000 GPUs over 7 days, 1 GB for 100,000), against the
minutes that parsing the text of 100,000 GPUs takes (`benchmarks/README.md`).

**Format** (version 2; a version 1 side-file, an `.npz`, is passed over): a preamble of 128
bytes (`_PREAMBLE`: the magic `gpuaudit-columns`, the version, the snapshot's size and raw
BLAKE2b-256 digest, the header's length and each array's number of items), two seals of 32
bytes (the first over the preamble and the header, the second over everything), the JSON header
(the envelope, the Kubernetes pages, each Prometheus entry's fields, the distinct label sets and
each answer's sizes) padded with zeros to 8 bytes, then the arrays of `_ARRAYS` end to end
(every answer's, in order) as little-endian 8-byte items. Nothing is parsed, and nothing the
size of the arrays is held, before it is proven: the preamble's sizes are checked against the
file's size, the header's length against `limits.SIDE_FILE_HEADER_BYTES` and the whole against
the bound on a snapshot; then the header is read and its seal checked, and only then the arrays
(whose sizes the sealed preamble states) are read and the whole seal checked.

`gpuaudit snapshot index FILE` writes it (`write`); `reader.read` uses it when it is proven
(`read`).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import io
import os
import stat
import struct
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any

import numpy as np
import orjson

from gpuaudit.core import limits
from gpuaudit.snapshot import sidekey
from gpuaudit.snapshot.answers import Answer, Labels
from gpuaudit.snapshot.model import Snapshot

SUFFIX = ".columns"
MAGIC = b"gpuaudit-columns"
VERSION = 2
_ARRAYS = ("metric", "values", "vts", "offsets", "ts", "vs")
_INTS = frozenset({"metric", "offsets"})
_PREAMBLE = struct.Struct("<16sIIQ32sQ6Q8x")
"""Magic, version, reserved (0), the snapshot's size and digest, the header's length, the items
of each of `_ARRAYS`, 8 reserved bytes: 128 bytes."""
_SEAL = 32
_START = _PREAMBLE.size + 2 * _SEAL
"""Where the header begins: after the preamble, the seal of the preamble and header, and the
seal of the whole."""
_ITEM = 8
_BLOCK = 1 << 23


class Stale(Exception):
    """The side-file is not proven to be a faithful copy of this snapshot: why, as a phrase.
    Read the snapshot instead."""


def side_path(snapshot: Path) -> Path:
    """Where the side-file of `snapshot` lies."""
    return snapshot.with_name(snapshot.name + SUFFIX)


def fingerprint(path: Path) -> tuple[int, bytes]:
    """The size of a file and the BLAKE2b-256 digest of its bytes, read in one pass."""
    h = hashlib.blake2b(digest_size=32)
    size = 0
    with open(path, "rb") as fh:
        while block := fh.read(_BLOCK):
            h.update(block)
            size += len(block)
    return size, h.digest()


def _sealer(key: bytes) -> Any:
    return hashlib.blake2b(key=key, digest_size=_SEAL, person=MAGIC)


def _padded(n: int) -> int:
    return -(-n // _ITEM) * _ITEM


def _dtype(name: str) -> np.dtype[Any]:
    return np.dtype("<i8" if name in _INTS else "<f8")


def write(
    snap: Snapshot,
    envelope: dict[str, Any],
    snapshot: Path,
    source: tuple[int, bytes],
    key: bytes,
) -> Path:
    """Write the side-file of `snap`, read from the file `snapshot` whose first line is
    `envelope` and whose size and digest are `source` (`fingerprint`), sealed with `key`;
    returns its path. Raises `Stale` when `snap` holds an answer not parsed into arrays
    (nothing then to gain).

    It is written under a fresh name in the same folder (created exclusively, mode 0600, never
    through a link), then renamed into place: a planted `FILE.columns.tmp`, link or not, is
    never written through, and a reader never sees half a side-file."""
    labels: list[Labels] = []
    number: dict[int, int] = {}
    parts: dict[str, list[Any]] = {k: [] for k in _ARRAYS}
    entries: list[tuple[str, list[list[Any]], dict[str, Any]]] = []
    for qid, records in snap.prometheus.items():
        for record in records:
            answer = record.get("answer")
            if not isinstance(answer, Answer):
                raise Stale("an answer is not held as arrays")
            idx = []
            for m in answer.metrics:
                at = number.get(id(m))
                if at is None:
                    at = number[id(m)] = len(labels)
                    labels.append(m)
                idx.append(at)
            arrays = {
                "metric": np.array(idx, dtype=np.int64),
                "values": answer.values,
                "vts": answer.ts if answer.rtype == "vector" else np.empty(0),
                "offsets": answer.offsets,
                "ts": answer.ts if answer.rtype == "matrix" else np.empty(0),
                "vs": answer.vs,
            }
            for k, a in arrays.items():
                parts[k].append(a)
            fields = [[k, None if k == "answer" else v] for k, v in record.items()]
            sizes: dict[str, Any] = {k: len(a) for k, a in arrays.items()}
            meta: dict[str, Any] = {
                "rtype": answer.rtype,
                "dropped": answer.dropped,
                "malformed": answer.malformed,
            }
            entries.append((qid, fields, {**meta, **sizes}))
    header = orjson.dumps(
        {
            "envelope": envelope,
            "kubernetes": snap.kubernetes,
            "labels": labels,
            "prometheus": entries,
        }
    )
    lengths = [sum(len(a) for a in parts[k]) for k in _ARRAYS]
    preamble = _PREAMBLE.pack(MAGIC, VERSION, 0, source[0], source[1], len(header), *lengths)
    seal = _sealer(key)
    seal.update(preamble)
    out = side_path(snapshot)
    fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=out.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(bytes(_START))  # the preamble and seals, written once the seals are known
            text = header + bytes(_padded(len(header)) - len(header))
            fh.write(text)
            seal.update(text)
            sealed = seal.digest()
            for a in _arrays(parts):
                fh.write(a)
                seal.update(a)
            fh.seek(0)
            fh.write(preamble + sealed + seal.digest())
        os.replace(tmp, out)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return out


def _arrays(parts: dict[str, list[Any]]) -> Iterator[Any]:
    """What follows the header, a piece at a time: every array, as it is stored."""
    for k in _ARRAYS:
        dtype = _dtype(k)
        for a in parts[k]:
            if len(a):
                yield np.ascontiguousarray(a, dtype=dtype)


Parts = tuple[dict[str, Any], dict[str, list[dict[str, Any]]], dict[str, list[Any]]]
"""A snapshot's envelope (its first line), Prometheus entries and Kubernetes pages."""


def read(snapshot: Path, limit: int) -> Parts | None:
    """What the side-file of `snapshot` holds; None when there is none. `Stale`, saying why,
    when there is one that is not proven to be this user's copy of this snapshot (then read the
    snapshot itself). `limit` bounds the side-file in bytes, as it bounds a snapshot's text."""
    path = side_path(snapshot)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise Stale(f"it cannot be opened ({exc.strerror or exc})") from None
    with open(fd, "rb", buffering=0) as fh:
        try:
            return _read(fh, snapshot, limit)
        except OSError as exc:
            raise Stale(f"it could not be read ({exc.strerror or exc})") from None
        except (ValueError, KeyError, TypeError, IndexError):
            # Only reached past the seal: what this gpuaudit wrote does not read back.
            raise Stale("its content does not add up") from None


def _read(fh: io.FileIO, snapshot: Path, limit: int) -> Parts:
    st = os.fstat(fh.fileno())
    if not stat.S_ISREG(st.st_mode):
        raise Stale("it is not a plain file")
    head = _exactly(fh, _START)
    if head[:4] == b"PK\x03\x04":
        raise Stale("it was written by an older gpuaudit (side-file version 1)")
    if len(head) < _START or head[:16] != MAGIC:
        raise Stale("it is not a gpuaudit side-file")
    _, version, _, size, digest, header_n, *lengths = _PREAMBLE.unpack_from(head)
    if version != VERSION:
        raise Stale(f"it is side-file version {version}; this gpuaudit reads version {VERSION}")
    most = limits.SIDE_FILE_HEADER_BYTES.value()
    if header_n > most:
        raise Stale(
            f"its header would be {header_n:,} bytes, more than {most:,} "
            f"({limits.SIDE_FILE_HEADER_BYTES.env})"
        )
    items = _ITEM * sum(lengths)
    if _START + _padded(header_n) + items > limit:
        raise Stale(f"it holds more than {limit:,} bytes, the bound on a snapshot")
    if _START + _padded(header_n) + items != st.st_size:
        raise Stale("its size is not the one it states (it was cut short or added to)")
    if size != snapshot.stat().st_size:
        raise Stale(_OTHER_BYTES)
    try:
        key = sidekey.load()
    except sidekey.Unavailable as exc:
        raise Stale(f"there is no key to prove it with: {exc}") from None
    sealed, whole = head[_PREAMBLE.size : _PREAMBLE.size + _SEAL], head[-_SEAL:]
    # The snapshot's digest is worked out beside the side-file's read and seal (hashing and
    # reading let go of the interpreter, and a large fleet's files take a while to hash).
    with ThreadPoolExecutor(max_workers=1) as pool:
        hashed = pool.submit(fingerprint, snapshot)
        seal = _sealer(key)
        seal.update(head[: _PREAMBLE.size])
        # The header is proven before the arrays are read: what it states (and the preamble's
        # sizes) is this gpuaudit's own, so nothing is held for sizes someone else planted.
        text = np.empty(_padded(header_n), dtype=np.uint8)
        if _fill(fh, text, seal) != len(text):
            raise Stale(_CUT)
        if not hmac.compare_digest(seal.digest(), sealed):
            raise Stale(_NOT_OURS)
        arrays = np.empty(items, dtype=np.uint8)
        if _fill(fh, arrays, seal) != items:
            raise Stale(_CUT)
        if not hmac.compare_digest(seal.digest(), whole):
            raise Stale(_NOT_OURS)
        if hashed.result() != (size, digest):
            raise Stale(_OTHER_BYTES)
    header = orjson.loads(text[:header_n].data)
    del text
    if not isinstance(header, dict):
        raise Stale("its header is not an object")
    columns: dict[str, Any] = {}
    at = 0
    for name, n in zip(_ARRAYS, lengths, strict=True):
        a = arrays[at : at + _ITEM * n].view(_dtype(name))
        columns[name] = a if a.dtype.isnative else a.astype(a.dtype.newbyteorder("="))
        at += _ITEM * n
    return _rebuild(header, columns)


_OTHER_BYTES = "it was written for other bytes than the snapshot's (the snapshot changed since)"
_CUT = "it was cut short while it was read"
_NOT_OURS = (
    "its content is not what this user's gpuaudit wrote for this snapshot (it was damaged or "
    "changed since, or written by another user or on another machine)"
)


def _exactly(fh: IO[bytes], n: int) -> bytes:
    """Up to `n` bytes from where `fh` is (fewer only at its end)."""
    parts, got = [], 0
    while got < n and (part := fh.read(n - got)):
        parts.append(part)
        got += len(part)
    return b"".join(parts)


def _fill(fh: io.FileIO, buf: Any, seal: Any) -> int:
    """Read into `buf` from where `fh` is, feeding `seal` as it goes; how many bytes came."""
    view = memoryview(buf)
    got = 0
    while got < len(view):
        n = fh.readinto(view[got : got + _BLOCK])
        if not n:
            break
        seal.update(view[got : got + n])
        got += n
    return got


def _rebuild(header: dict[str, Any], arrays: dict[str, Any]) -> Parts:
    for k in _ARRAYS:
        want = np.int64 if k in _INTS else np.float64
        if arrays[k].dtype != want or arrays[k].ndim != 1:
            raise Stale(f"{k} is not a column of {want}")
    labels = header["labels"]
    if not isinstance(labels, list) or not all(
        isinstance(m, dict) and all(isinstance(v, str) for v in m.values()) for m in labels
    ):
        raise Stale("label sets")
    metric = arrays["metric"]
    if len(metric) and (metric.min() < 0 or metric.max() >= len(labels)):
        raise Stale("label numbers")
    at = dict.fromkeys(_ARRAYS, 0)
    prometheus: dict[str, list[dict[str, Any]]] = {}
    for qid, fields, meta in header["prometheus"]:
        cut = {}
        for k in _ARRAYS:
            n = int(meta[k])
            if n < 0 or at[k] + n > len(arrays[k]):
                raise Stale("sizes")
            cut[k] = arrays[k][at[k] : at[k] + n]
            at[k] += n
        answer = _answer(meta, cut, [labels[i] for i in cut["metric"].tolist()])
        record = {k: answer if k == "answer" else v for k, v in fields}
        prometheus.setdefault(str(qid), []).append(record)
    if any(at[k] != len(arrays[k]) for k in _ARRAYS):
        raise Stale("sizes")
    envelope, kube = header["envelope"], header["kubernetes"]
    if not isinstance(envelope, dict) or not isinstance(kube, dict):
        raise Stale("envelope")
    return envelope, prometheus, kube


def _answer(meta: dict[str, Any], cut: dict[str, Any], metrics: list[Any]) -> Answer:
    rtype = meta["rtype"]
    dropped, malformed = int(meta["dropped"]), int(meta["malformed"])
    offsets = cut["offsets"]
    if rtype == "vector":
        if len(metrics) != len(cut["values"]) or len(cut["vts"]) != len(cut["values"]):
            raise Stale("a vector's sizes")
        return Answer(
            "vector",
            metrics,
            values=cut["values"],
            offsets=offsets,
            ts=cut["vts"],
            vs=cut["vs"],
            dropped=dropped,
            malformed=malformed,
            numbers=cut["metric"],
        )
    if rtype != "matrix" or len(offsets) != len(metrics) + 1 or len(cut["ts"]) != len(cut["vs"]):
        raise Stale("a matrix's sizes")
    if offsets[0] != 0 or offsets[-1] != len(cut["ts"]) or (np.diff(offsets) < 0).any():
        raise Stale("a matrix's offsets")
    return Answer(
        "matrix",
        metrics,
        values=cut["values"],
        offsets=offsets,
        ts=cut["ts"],
        vs=cut["vs"],
        dropped=dropped,
        malformed=malformed,
        numbers=cut["metric"],
    )
