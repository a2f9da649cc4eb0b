"""Prometheus TSDB blocks written directly from sample arrays, for backfilling fleet-size
scenarios.

promtool reads OpenMetrics text, which repeats every label on every sample: a week of 10,000
GPUs at 60 s is some 0.9 TB of text and hours of parsing. This writes the block's files
itself (format v2 index, chunk segments of XOR chunks, `meta.json`) from arrays, vectorised
with numpy, so the same week is minutes of work and a few GB of disk.

The formats are Prometheus' own (`tsdb/docs/format/index.md`, `chunks.md`; the XOR encoding of
`tsdb/chunkenc/xor.go`). Every chunk is a valid XOR chunk of at most 120 samples, as the head
cuts them; values that change always open a new leading/trailing-zero window (the `11` control
bits), which the decoder accepts as well as the reuse a Go appender would choose, at some bits
of size. `tests/test_tsdbblocks.py` proves the blocks equal to promtool's: the same samples under
`promtool tsdb dump`, and the same audit served by a real Prometheus.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import crc32c
import numpy as np

Arr = np.ndarray[Any, np.dtype[Any]]
SAMPLES_PER_CHUNK = 120
SEGMENT_BYTES = 512 << 20
_MAGIC_CHUNKS = 0x85BD40DD
_MAGIC_INDEX = 0xBAAAD700
_U64 = np.uint64
_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def _crc(data: bytes | bytearray | memoryview) -> bytes:
    return int(crc32c.crc32c(data)).to_bytes(4, "big")


def _uvarint(x: int) -> bytes:
    out = bytearray()
    while x >= 0x80:
        out.append((x & 0x7F) | 0x80)
        x >>= 7
    out.append(x)
    return bytes(out)


def _varint(x: int) -> bytes:
    return _uvarint((x << 1) ^ (x >> 63) if x >= 0 else ((-x - 1) << 1) | 1)


def _ulid() -> str:
    n = (int(time.time() * 1000) << 80) | secrets.randbits(80)
    return "".join(_CROCKFORD[(n >> (5 * i)) & 31] for i in range(25, -1, -1))


# ---- XOR chunks ------------------------------------------------------------------------------


def _bit_length(x: Arr) -> Arr:
    """Bit length of every uint64."""
    n = np.zeros(len(x), dtype=np.int64)
    y = x.copy()
    for s in (32, 16, 8, 4, 2, 1):
        big = y >= _U64(1 << s)
        n[big] += s
        y[big] >>= _U64(s)
    n += (y > 0).astype(np.int64)
    return n


def _varint_field(x: Arr) -> tuple[Arr, Arr]:
    """(bits, value) of the uvarint of every uint64 below 2^56, its bytes as one big-endian
    number."""
    nbytes = np.maximum(1, (_bit_length(x) + 6) // 7)
    val = np.zeros(len(x), dtype=_U64)
    for i in range(8):
        byte = (x >> _U64(7 * i)) & _U64(0x7F)
        more = i < nbytes - 1
        byte = np.where(more, byte | _U64(0x80), byte)
        at = nbytes - 1 - i
        val |= np.where(i < nbytes, byte << (_U64(8) * at.clip(0).astype(_U64)), _U64(0))
    return nbytes * 8, val


def _pack(chunk: Arr, bits: Arr, vals: Arr, n_chunks: int) -> tuple[bytes, Arr, Arr]:
    """Pack fields (`bits` wide, `vals` right-aligned, each chunk's fields consecutive and in
    order) MSB first, each chunk from a 64-bit word boundary. Returns the bytes, each chunk's
    first byte and its length in bytes."""
    keep = bits > 0
    chunk, bits, vals = chunk[keep], bits[keep].astype(np.int64), vals[keep]
    per_chunk = np.bincount(chunk, weights=bits, minlength=n_chunks).astype(np.int64)
    words = (per_chunk + 63) // 64
    word0 = np.zeros(n_chunks, dtype=np.int64)
    np.cumsum(words[:-1], out=word0[1:])
    ends = np.cumsum(bits)
    inner = ends - bits  # from the first field, the whole stream
    chunk_first = np.zeros(n_chunks, dtype=np.int64)
    np.cumsum(per_chunk[:-1], out=chunk_first[1:])
    pos = word0[chunk] * 64 + inner - chunk_first[chunk]
    w = pos // 64
    s = pos % 64
    over = s + bits - 64  # > 0: spills into the next word
    spill = over > 0
    head = np.where(
        spill,
        vals >> np.where(spill, over, 0).astype(_U64),
        vals << np.where(spill, 0, -over).astype(_U64),
    )
    out = np.zeros(int(words.sum()) + 1, dtype=_U64)
    starts = np.flatnonzero(np.r_[True, w[1:] != w[:-1]])
    out[w[starts]] = np.bitwise_or.reduceat(head, starts)
    sw = w[spill]
    out[sw + 1] |= vals[spill] << (_U64(64) - over[spill].astype(_U64))
    data = out[:-1].astype(">u8").tobytes()
    return data, word0 * 8, (per_chunk + 7) // 8


def encode_chunks(off: Arr, t: Arr, v: Arr) -> tuple[bytes, Arr, Arr, Arr, Arr]:
    """XOR chunks of at most `SAMPLES_PER_CHUNK` samples of many series at once (series i's
    samples are [off[i], off[i + 1]), ascending in time). Returns the bytes, each chunk's
    first byte and length in them, its series, and its first and last timestamps."""
    n = len(t)
    lens = np.diff(off)
    per_series = (lens + SAMPLES_PER_CHUNK - 1) // SAMPLES_PER_CHUNK
    n_chunks = int(per_series.sum())
    series = np.repeat(np.arange(len(lens)), lens)
    q = np.arange(n) - off[:-1][series]  # index in its series
    first_chunk = np.zeros(len(lens), dtype=np.int64)
    np.cumsum(per_series[:-1], out=first_chunk[1:])
    chunk = first_chunk[series] + q // SAMPLES_PER_CHUNK
    q %= SAMPLES_PER_CHUNK
    count = np.bincount(chunk, minlength=n_chunks)
    t = t.astype(np.int64)
    vb = np.ascontiguousarray(v, dtype=np.float64).view(_U64)
    dt = np.zeros(n, dtype=np.int64)
    dt[1:] = t[1:] - t[:-1]
    dod = np.zeros(n, dtype=np.int64)
    dod[1:] = dt[1:] - dt[:-1]
    xor = np.zeros(n, dtype=_U64)
    xor[1:] = vb[1:] ^ vb[:-1]
    first, second, rest = q == 0, q == 1, q >= 2
    if (
        (t[first] >= 1 << 54).any()
        or (t[first] < -(1 << 54)).any()
        or (dt[second] >= 1 << 56).any()
    ):
        raise ValueError("timestamps out of range")
    fields = np.zeros((n, 5), dtype=np.int64)  # bit widths
    vals = np.zeros((n, 5), dtype=_U64)
    # 0: the sample count (first sample of a chunk)
    fields[first, 0] = 16
    vals[first, 0] = count[chunk[first]].astype(_U64)
    # 1: the first timestamp (varint), the first delta (uvarint), or the delta of deltas
    zig = np.where(t >= 0, t << 1, ((-t - 1) << 1) | 1).astype(_U64)
    fields[first, 1], vals[first, 1] = _varint_field(zig[first])
    fields[second, 1], vals[second, 1] = _varint_field(dt[second].astype(_U64))
    moved = rest & (dod != 0)
    fields[rest, 1] = np.where(dod[rest] != 0, 4, 1)
    vals[moved, 1] = _U64(0b1111)
    fields[moved, 2] = 64
    vals[moved, 2] = dod[moved].astype(_U64)
    # 3, 4: the first value whole; after it, `0` (same value) or `11`, leading zeros,
    # significant bits and the significant bits of the xor
    fields[first, 3] = 64
    vals[first, 3] = vb[first]
    later = ~first
    changed = later & (xor != 0)
    fields[later, 3] = np.where(xor[later] != 0, 13, 1)
    x = xor[changed]
    lead = np.minimum(64 - _bit_length(x), 31)
    trail = _bit_length(x & (~x + _U64(1))) - 1
    sig = 64 - lead - trail
    vals[changed, 3] = (
        (_U64(0b11) << _U64(11)) | (lead.astype(_U64) << _U64(6)) | (sig.astype(_U64) & _U64(63))
    )
    fields[changed, 4] = sig
    vals[changed, 4] = x >> trail.astype(_U64)
    data, start, size = _pack(np.repeat(chunk, 5), fields.ravel(), vals.ravel(), n_chunks)
    last = np.zeros(n_chunks, dtype=np.int64)
    np.cumsum(count, out=last)
    chunk_series = np.repeat(np.arange(len(lens)), per_series)
    return data, start, size, chunk_series, np.stack([t[last - count], t[last - 1]], axis=1)


# ---- a block ---------------------------------------------------------------------------------


class BlockWriter:
    """One block over [mint, maxt) milliseconds. `add` series in any order (each series once),
    then `close`. Encoded chunks are held in memory until `close` writes them in the order of
    the series' label sets, as the index requires."""

    def __init__(self, tsdb: Path, mint: int, maxt: int) -> None:
        self.ulid = _ulid()
        self.dir = tsdb / self.ulid
        self.mint, self.maxt = mint, maxt
        self.keys: list[tuple[tuple[str, str], ...]] = []
        self.framed: list[bytes] = []
        """Per series: its chunks as the segment file holds them."""
        self.metas: list[Arr] = []
        """Per series: (mint, maxt, offset in `framed`) of each chunk."""
        self.samples = 0

    def add(self, name: str, labels: list[dict[str, str]], off: Arr, t: Arr, v: Arr) -> None:
        if not len(labels):
            return
        if len(t) and (t.min() < self.mint or t.max() >= self.maxt):
            raise ValueError("samples outside the block")
        data, start, size, chunk_series, times = encode_chunks(off, t, v)
        if not len(chunk_series):
            return
        self.samples += len(t)
        mv = memoryview(data)
        bounds = np.flatnonzero(np.r_[True, chunk_series[1:] != chunk_series[:-1], True])
        starts, sizes = start.tolist(), size.tolist()
        for k in range(len(bounds) - 1):
            a, b = int(bounds[k]), int(bounds[k + 1])
            parts: list[bytes] = []
            rel = []
            pos = 0
            for c in range(a, b):
                body = b"\x01" + mv[starts[c] : starts[c] + sizes[c]]
                frame = _uvarint(sizes[c]) + body + _crc(body)
                rel.append(pos)
                pos += len(frame)
                parts.append(frame)
            i = int(chunk_series[a])
            lab = {"__name__": name, **{x: y for x, y in labels[i].items() if y}}
            self.keys.append(tuple(sorted(lab.items())))
            self.framed.append(b"".join(parts))
            self.metas.append(np.column_stack([times[a:b], np.array(rel, dtype=np.int64)]))

    def close(self) -> Path:
        tmp = self.dir.with_name(self.ulid + ".tmp")
        (tmp / "chunks").mkdir(parents=True)
        order = sorted(range(len(self.keys)), key=self.keys.__getitem__)
        for a, b in zip(order, order[1:], strict=False):
            if self.keys[a] == self.keys[b]:
                raise ValueError(f"series added twice: {dict(self.keys[a])}")
        refs: list[Arr] = [np.zeros(0)] * len(self.keys)
        seg, fh, pos = -1, None, SEGMENT_BYTES
        chunks = 0
        for i in order:
            body = self.framed[i]
            if pos + len(body) > SEGMENT_BYTES and pos > 8:
                if fh is not None:
                    fh.close()
                seg += 1
                fh = open(tmp / "chunks" / f"{seg + 1:06d}", "wb")  # noqa: SIM115
                fh.write(_MAGIC_CHUNKS.to_bytes(4, "big") + b"\x01\x00\x00\x00")
                pos = 8
            assert fh is not None
            fh.write(body)
            refs[i] = (seg << 32) + pos + self.metas[i][:, 2]
            pos += len(body)
            chunks += len(self.metas[i])
            self.framed[i] = b""
        if fh is not None:
            fh.close()
        _write_index(
            tmp / "index",
            [self.keys[i] for i in order],
            [self.metas[i] for i in order],
            [refs[i] for i in order],
        )
        meta = {
            "ulid": self.ulid,
            "minTime": self.mint,
            "maxTime": self.maxt,
            "stats": {"numSamples": self.samples, "numSeries": len(order), "numChunks": chunks},
            "compaction": {"level": 1, "sources": [self.ulid]},
            "version": 1,
        }
        (tmp / "meta.json").write_text(json.dumps(meta, indent="\t"))
        os.replace(tmp, self.dir)
        return self.dir


def _section(body: bytes | bytearray) -> bytes:
    """`len <4b>`, the body, its CRC32."""
    return len(body).to_bytes(4, "big") + bytes(body) + _crc(body)


def _write_index(
    path: Path,
    keys: list[tuple[tuple[str, str], ...]],
    metas: list[Arr],
    refs: list[Arr],
) -> None:
    symbols = sorted({s for key in keys for pair in key for s in pair})
    sym = {s: i for i, s in enumerate(symbols)}
    out = bytearray(_MAGIC_INDEX.to_bytes(4, "big") + b"\x02")
    toc_symbols = len(out)
    body = bytearray(len(symbols).to_bytes(4, "big"))
    for s in symbols:
        b = s.encode()
        body += _uvarint(len(b)) + b
    out += _section(body)
    postings: dict[tuple[str, str], list[int]] = {}
    out += b"\x00" * (-len(out) % 16)
    toc_series = len(out)
    for key, meta, ref in zip(keys, metas, refs, strict=True):
        out += b"\x00" * (-len(out) % 16)
        sid = len(out) // 16
        postings.setdefault(("", ""), []).append(sid)
        entry = bytearray(_uvarint(len(key)))
        for name, value in key:
            entry += _uvarint(sym[name]) + _uvarint(sym[value])
            postings.setdefault((name, value), []).append(sid)
        rows = meta[:, :2].tolist()
        rs = ref.tolist()
        entry += _uvarint(len(rows))
        prev_t = prev_ref = 0
        for j, ((lo, hi), r) in enumerate(zip(rows, rs, strict=True)):
            if j == 0:
                entry += _varint(lo) + _uvarint(hi - lo) + _uvarint(r)
            else:
                entry += _uvarint(lo - prev_t) + _uvarint(hi - lo) + _varint(r - prev_ref)
            prev_t, prev_ref = hi, r
        out += _uvarint(len(entry)) + entry + _crc(entry)
    out += b"\x00" * (-len(out) % 4)
    toc_postings = len(out)
    table = bytearray()
    for (name, value), ids in sorted(postings.items()):
        out += b"\x00" * (-len(out) % 4)
        at = len(out)
        out += _section(len(ids).to_bytes(4, "big") + np.array(ids, dtype=">u4").tobytes())
        table += _uvarint(2)
        for s in (name, value):
            b = s.encode()
            table += _uvarint(len(b)) + b
        table += _uvarint(at)
    toc_table = len(out)
    out += _section(len(postings).to_bytes(4, "big") + table)
    toc = b"".join(
        x.to_bytes(8, "big") for x in (toc_symbols, toc_series, 0, 0, toc_postings, toc_table)
    )
    out += toc + _crc(toc)
    path.write_bytes(out)


def write_blocks(
    tsdb: Path,
    spans: Iterable[tuple[int, int, Iterable[tuple[str, list[dict[str, str]], Arr, Arr, Arr]]]],
) -> list[Path]:
    """A block per (mint, maxt, batches) of `spans`, each batch (name, labels, offsets,
    milliseconds, values) a metric's series."""
    out = []
    tsdb.mkdir(parents=True, exist_ok=True)
    for mint, maxt, batches in spans:
        w = BlockWriter(tsdb, mint, maxt)
        for name, labels, off, t, v in batches:
            w.add(name, labels, off, t, v)
        out.append(w.close())
    return out


def write_scenario(
    sc: Any,
    tsdb: Path,
    style: str = "helm",
    phase_ms: int | None = None,
    block_hours: int = 24,
    progress: Any = None,
) -> tuple[int, int]:
    """A scenario's raw series (`emit.openmetrics_samples`, the samples `write_openmetrics`
    writes) and, with `phase_ms`, the series the recording rules would record over them
    (`recorded.recorded_families`), as blocks of `block_hours` from the window's start, each
    holding the raw and recorded series of its hours (so that no blocks overlap). Returns the
    number of raw and recorded samples. `progress(block, blocks)` is called after each block."""
    from gpuaudit.scenario.emit import openmetrics_samples  # noqa: PLC0415
    from gpuaudit.scenario.recorded import recorded_families  # noqa: PLC0415
    from gpuaudit.scenario.series import Table  # noqa: PLC0415

    hours = Table(sc, style).hours
    top = int(hours.max()) + 1 if len(hours) else 0
    step = block_hours * 3_600_000
    blocks = max(1, -(-top // block_hours))
    if phase_ms is not None:  # the last evaluation may fall after the last raw sample
        end = sc.end * 1000
        last = end - (end - phase_ms) % 300_000
        blocks = max(blocks, (last - sc.start * 1000) // step + 1)
    raw = rec = 0
    tsdb.mkdir(parents=True, exist_ok=True)
    for k in range(blocks):
        lo = sc.start * 1000 + k * step
        w = BlockWriter(tsdb, lo, lo + step)
        for name, labels, off, t, v in openmetrics_samples(
            sc, style, (k * block_hours, (k + 1) * block_hours)
        ):
            w.add(name, labels, off, t, v)
        before = w.samples
        raw += before
        if phase_ms is not None and lo <= sc.end * 1000:
            span = (lo, min(lo + step, sc.end * 1000 + 1))
            for name, batches in recorded_families(sc, style, phase_ms, span):
                for labels, off, t, v in batches:
                    w.add(name, labels, off, t, v)
            rec += w.samples - before
        w.close()
        if progress is not None:
            progress(k + 1, blocks)
    return raw, rec
