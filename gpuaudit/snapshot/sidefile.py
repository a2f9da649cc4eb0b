"""The columnar side-file of a snapshot: the snapshot as the reader parsed it, written once
beside it (`FILE.columns`) so that later scans of the same file skip parsing its text.

The snapshot stays the record: it keeps the servers' raw answers, and the side-file is only a
faster way to the same `Snapshot`. It is an uncompressed `.npz` (a zip of `.npy` arrays, read
without pickle): one array holds a JSON header (the envelope, the Kubernetes pages, each
Prometheus entry's fields, the distinct label sets and each answer's sizes), the others the
answers' numbers, every answer's end to end. The header names the snapshot's size and BLAKE2b
digest; a side-file that names another file (the snapshot was rewritten), or that does not
add up (sizes, label numbers, offsets), is passed over and the snapshot read as usual, so a
stale or damaged side-file can make a scan slower, never different.

`gpuaudit snapshot index FILE` writes it (`write`); `reader.read` uses it when it is there
(`read`).
"""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from gpuaudit.snapshot.answers import Answer, Labels
from gpuaudit.snapshot.model import Snapshot

SUFFIX = ".columns"
NAME = "gpuaudit-columns"
VERSION = 1
_ARRAYS = ("metric", "values", "vts", "offsets", "ts", "vs")
_BLOCK = 1 << 23


class Stale(Exception):
    """The side-file is not a faithful copy of this snapshot: read the snapshot instead."""


def side_path(snapshot: Path) -> Path:
    """Where the side-file of `snapshot` lies."""
    return snapshot.with_name(snapshot.name + SUFFIX)


def digest(path: Path) -> str:
    """The BLAKE2b digest of a file's bytes."""
    h = hashlib.blake2b(digest_size=32)
    with open(path, "rb") as fh:
        while block := fh.read(_BLOCK):
            h.update(block)
    return h.hexdigest()


def write(snap: Snapshot, envelope: dict[str, Any], snapshot: Path) -> Path:
    """Write the side-file of `snap`, read from the file `snapshot` whose first line is
    `envelope`; returns its path. Raises `Stale` when `snap` holds an answer not parsed into
    arrays (nothing then to gain)."""
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
    st = snapshot.stat()
    header = {
        "format": NAME,
        "version": VERSION,
        "snapshot": {"size": st.st_size, "digest": digest(snapshot)},
        "envelope": envelope,
        "kubernetes": snap.kubernetes,
        "labels": labels,
        "prometheus": entries,
    }
    out = side_path(snapshot)
    tmp = out.with_name(out.name + ".tmp")
    data = {
        k: _joined(v, np.int64 if k in ("metric", "offsets") else np.float64)
        for k, v in parts.items()
    }
    with open(tmp, "wb") as fh:
        np.savez(fh, header=np.frombuffer(orjson.dumps(header), dtype=np.uint8), **data)
    tmp.replace(out)
    return out


def _joined(arrays: list[Any], dtype: Any) -> Any:
    return np.concatenate(arrays).astype(dtype, copy=False) if arrays else np.empty(0, dtype)


Parts = tuple[dict[str, Any], dict[str, list[dict[str, Any]]], dict[str, list[Any]]]
"""A snapshot's envelope (its first line), Prometheus entries and Kubernetes pages."""


def read(snapshot: Path, limit: int) -> Parts | None:
    """What the side-file of `snapshot` holds; None when there is none, or it is stale or
    damaged (then read the snapshot itself). `limit` bounds the side-file's arrays in bytes,
    as it bounds a snapshot's text."""
    path = side_path(snapshot)
    if not path.is_file():
        return None
    try:
        return _read(path, snapshot, limit)
    except (Stale, OSError, ValueError, KeyError, TypeError, IndexError, zipfile.BadZipFile):
        return None


def _read(path: Path, snapshot: Path, limit: int) -> Parts:
    with zipfile.ZipFile(path) as z:
        infos = z.infolist()
        if sum(i.file_size for i in infos) > limit or any(
            i.compress_type != zipfile.ZIP_STORED for i in infos
        ):
            raise Stale("too large, or compressed")
    from concurrent.futures import ThreadPoolExecutor

    # The snapshot's digest is worked out beside the header's parse (hashing lets go of the
    # interpreter while it reads, and a large fleet's snapshot takes a while to hash).
    with ThreadPoolExecutor(max_workers=1) as pool:
        hashed = pool.submit(digest, snapshot)
        members = _mapped(path, ("header", *_ARRAYS))
        if members is None:
            with np.load(path, allow_pickle=False) as z:
                members = {k: z[k] for k in ("header", *_ARRAYS)}
        header = orjson.loads(members["header"].tobytes())
        if not isinstance(header, dict) or header.get("format") != NAME:
            raise Stale("not a side-file")
        if header.get("version") != VERSION:
            raise Stale("another version")
        named = header["snapshot"]
        if named["size"] != snapshot.stat().st_size or named["digest"] != hashed.result():
            raise Stale("written for another file")
    return _rebuild(header, {k: members[k] for k in _ARRAYS})


_LOCAL_HEADER = 30
"""Bytes of a zip member's local header before its name and extra field."""


def _mapped(path: Path, names: tuple[str, ...]) -> dict[str, Any] | None:
    """The members `names` (`NAME.npy`, stored uncompressed) of the side-file as arrays over a
    private copy-on-write map of the file, read in place: no copy of the arrays, and no fresh
    memory to fill (a large fleet's side-file holds its whole hourly table). None where a
    member is not laid out as `np.savez` writes it, or the file cannot be mapped: then
    `np.load` reads it."""
    import mmap

    from numpy.lib import format as npy

    if not hasattr(mmap, "MAP_PRIVATE"):  # not a POSIX system: np.load reads it
        return None
    try:
        with path.open("rb") as fh, zipfile.ZipFile(fh) as z:
            size = fh.seek(0, 2)
            if size == 0:
                return None
            mm = mmap.mmap(
                fh.fileno(), 0, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE
            )
            out: dict[str, Any] = {}
            for name in names:
                info = z.getinfo(name + ".npy")
                at = info.header_offset
                local = mm[at : at + _LOCAL_HEADER]
                if len(local) != _LOCAL_HEADER or local[:4] != b"PK\x03\x04":
                    return None
                skip = int.from_bytes(local[26:28], "little") + int.from_bytes(
                    local[28:30], "little"
                )
                start = at + _LOCAL_HEADER + skip
                fh.seek(start)
                version = npy.read_magic(fh)
                if version == (1, 0):
                    shape, fortran, dtype = npy.read_array_header_1_0(fh)
                elif version in ((2, 0), (3, 0)):
                    shape, fortran, dtype = npy.read_array_header_2_0(fh)
                else:
                    return None
                if len(shape) != 1 or dtype.hasobject:
                    return None
                offset = fh.tell()
                if offset + shape[0] * dtype.itemsize > min(start + info.file_size, size):
                    return None
                out[name] = np.frombuffer(mm, dtype=dtype, count=shape[0], offset=offset)
            return out
    except (OSError, ValueError, KeyError, zipfile.BadZipFile):
        return None


def _rebuild(header: dict[str, Any], arrays: dict[str, Any]) -> Parts:
    for k in _ARRAYS:
        want = np.int64 if k in ("metric", "offsets") else np.float64
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
