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


def _varint_field(x: Arr) -> tuple[Arr, Arr]:
    """(bits, value) of the uvarint of every uint64 below 2^56, its bytes as one big-endian
    number."""
    nbytes = np.maximum(1, (_bits(x) + 6) // 7)
    val = np.zeros(len(x), dtype=_U64)
    for i in range(8):
        byte = (x >> _U64(7 * i)) & _U64(0x7F)
        more = i < nbytes - 1
        byte = np.where(more, byte | _U64(0x80), byte)
        at = nbytes - 1 - i
        val |= np.where(i < nbytes, byte << (_U64(8) * at.clip(0).astype(_U64)), _U64(0))
    return nbytes * 8, val


def _varint_bytes(x: Arr) -> tuple[Arr, Arr]:
    """The uvarints of every uint64, one after the other (uint8), and each one's length."""
    nb = np.maximum(1, (_bits(x) + 6) // 7)
    at = np.cumsum(nb) - nb
    out = np.empty(int(nb.sum()), dtype=np.uint8)
    for i in range(10):
        m = nb > i
        if not m.any():
            break
        byte = (x[m] >> _U64(7 * i)) & _U64(0x7F)
        byte |= np.where(nb[m] - 1 > i, _U64(0x80), _U64(0))
        out[at[m] + i] = byte
    return out, nb


def _zigzag(x: Arr) -> Arr:
    x = x.astype(np.int64)
    return np.where(x >= 0, x << 1, ((-x - 1) << 1) | 1).astype(_U64)


def _gather(src: Arr, start: Arr, size: Arr, dst: Arr, out: Arr) -> None:
    """Copy src[start[i] : start[i] + size[i]] to out[dst[i] : ...] for every i."""
    total = int(size.sum())
    if not total:
        return
    first = np.cumsum(size) - size
    shift = np.repeat(start - first, size)
    idx = np.arange(total, dtype=np.int64)
    out[np.repeat(dst - first, size) + idx] = src[shift + idx]


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


def _bits(x: Arr) -> Arr:
    """Bit length of every uint64 (through float64's exponent, corrected where the conversion
    rounded up to the next power of two)."""
    bl = np.minimum(np.frexp(x.astype(np.float64))[1], 64).astype(np.int64)
    high = (x >> np.maximum(bl - 1, 0).astype(_U64)) != 0
    return np.where((bl > 0) & ~high, bl - 1, bl)


def encode_chunks(off: Arr, t: Arr, v: Arr) -> tuple[bytes, Arr, Arr, Arr, Arr]:
    """XOR chunks of at most `SAMPLES_PER_CHUNK` samples of many series at once (series i's
    samples are [off[i], off[i + 1]), ascending in time). Returns the bytes, each chunk's
    first byte and length in them, its series, and its first and last timestamps."""
    n = len(t)
    lens = np.diff(off)
    per_series = (lens + SAMPLES_PER_CHUNK - 1) // SAMPLES_PER_CHUNK
    n_chunks = int(per_series.sum())
    first_chunk = np.cumsum(per_series) - per_series
    q = np.arange(n, dtype=np.int64) - np.repeat(off[:-1], lens)  # index in its series
    chunk = np.repeat(first_chunk, lens) + q // SAMPLES_PER_CHUNK
    q %= SAMPLES_PER_CHUNK
    count = np.bincount(chunk, minlength=n_chunks)
    t = t.astype(np.int64)
    vb = np.ascontiguousarray(v, dtype=np.float64).view(_U64)
    dt = np.empty(n, dtype=np.int64)
    dt[0] = 0
    np.subtract(t[1:], t[:-1], out=dt[1:])
    dod = np.empty(n, dtype=np.int64)
    dod[0] = 0
    np.subtract(dt[1:], dt[:-1], out=dod[1:])
    xor = np.empty(n, dtype=_U64)
    xor[0] = 0
    np.bitwise_xor(vb[1:], vb[:-1], out=xor[1:])
    i_first = np.flatnonzero(q == 0)
    i_second = np.flatnonzero(q == 1)
    if (np.abs(t[i_first]) >= 1 << 47).any() or (dt[i_second] >= 1 << 56).any():
        raise ValueError("timestamps out of range")
    # Field a: the delta of deltas (`0` or `1111`); the first sample's count and the second's
    # delta are set below. Field b: a delta of deltas that is not 0, whole.
    moved = dod != 0
    wa = np.where(moved, 4, 1)
    va = np.where(moved, _U64(0b1111), _U64(0))
    wb = np.where(moved, 64, 0)
    vb_ = dod.astype(_U64)
    # Field c: `0` for a repeated value, else `11`, leading zeros, significant bits and (when
    # they fit) the significant bits of the xor; field d: those bits when they do not fit.
    changed = xor != 0
    lead = np.minimum(64 - _bits(xor), 31)
    trail = _bits(xor & (~xor + _U64(1))) - 1
    sig = np.where(changed, 64 - lead - trail, 0)
    body = xor >> np.maximum(trail, 0).astype(_U64)
    head = (_U64(0b11) << _U64(11)) | (lead.astype(_U64) << _U64(6)) | (sig.astype(_U64) & _U64(63))
    fits = sig <= 51
    wc = np.where(changed, np.where(fits, 13 + sig, 13), 1)
    vc = np.where(
        changed, np.where(fits, (head << np.where(fits, sig, 0).astype(_U64)) | body, head), _U64(0)
    )
    wd = np.where(changed & ~fits, sig, 0)
    vd = body
    # The first sample of a chunk: its count, its timestamp (varint) and its value whole.
    wa[i_first] = 16
    va[i_first] = count[chunk[i_first]].astype(_U64)
    wb[i_first], vb_[i_first] = _varint_field(_zigzag(t[i_first]))
    wc[i_first] = 64
    vc[i_first] = vb[i_first]
    wd[i_first] = 0
    # The second: its delta (uvarint) in field a.
    wa[i_second], va[i_second] = _varint_field(dt[i_second].astype(_U64))
    wb[i_second] = 0
    # Most samples fit in one field: a and c together.
    join = (wb == 0) & (wa + wc <= 64)
    va = np.where(join, (va << np.where(join, wc, 0).astype(_U64)) | vc, va)
    wa = np.where(join, wa + wc, wa)
    wc = np.where(join, 0, wc)
    widths = np.stack([wa, wb, wc, wd], axis=1).ravel()
    values = np.stack([va, vb_, vc, vd], axis=1).ravel()
    data, start, size = _pack(np.repeat(chunk, 4), widths, values, n_chunks)
    last = np.cumsum(count)
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
        src = np.frombuffer(data, dtype=np.uint8)
        hdr, hlen = _varint_bytes(size.astype(_U64))
        flen = hlen + 1 + size + 4
        fpos = np.cumsum(flen) - flen
        buf = np.empty(int(flen.sum()), dtype=np.uint8)
        _gather(hdr, np.cumsum(hlen) - hlen, hlen, fpos, buf)
        buf[fpos + hlen] = 1  # XOR encoding
        _gather(src, start, size, fpos + hlen + 1, buf)
        mv = memoryview(buf.data)
        body_at = (fpos + hlen).tolist()
        ends = (fpos + hlen + 1 + size).tolist()
        crcs = np.array(
            [crc32c.crc32c(mv[a:b]) for a, b in zip(body_at, ends, strict=True)], dtype=">u4"
        )
        cat = np.array(ends, dtype=np.int64)
        crc_bytes = crcs.view(np.uint8).reshape(-1, 4)
        for j in range(4):
            buf[cat + j] = crc_bytes[:, j]
        bounds = np.flatnonzero(np.r_[True, chunk_series[1:] != chunk_series[:-1], True])
        fpos_l = np.r_[fpos, len(buf)].tolist()
        for k in range(len(bounds) - 1):
            a, b = int(bounds[k]), int(bounds[k + 1])
            i = int(chunk_series[a])
            lab = {"__name__": name, **{x: y for x, y in labels[i].items() if y}}
            self.keys.append(tuple(sorted(lab.items())))
            self.framed.append(bytes(mv[fpos_l[a] : fpos_l[b]]))
            self.metas.append(np.column_stack([times[a:b], fpos[a:b] - fpos_l[a]]))

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
    # Every chunk's (mint, maxt, ref) as the series entries encode them, all at once.
    counts = np.array([len(m) for m in metas], dtype=np.int64)
    if len(metas):
        times = np.concatenate([m[:, :2] for m in metas]).astype(np.int64)
        ref = np.concatenate(refs).astype(np.int64)
    else:
        times, ref = np.zeros((0, 2), dtype=np.int64), np.zeros(0, dtype=np.int64)
    first = np.zeros(len(ref), dtype=bool)
    first[(np.cumsum(counts) - counts)[counts > 0]] = True
    prev_t = np.r_[0, times[:-1, 1]]
    prev_ref = np.r_[0, ref[:-1]]
    cols = np.empty((len(ref), 3), dtype=_U64)
    cols[:, 0] = np.where(first, _zigzag(times[:, 0]), (times[:, 0] - prev_t).astype(_U64))
    cols[:, 1] = (times[:, 1] - times[:, 0]).astype(_U64)
    cols[:, 2] = np.where(first, ref.astype(_U64), _zigzag(ref - prev_ref))
    enc, enc_len = _varint_bytes(cols.ravel())
    per_chunk = enc_len.reshape(-1, 3).sum(axis=1)
    series_bytes = np.zeros(len(metas) + 1, dtype=np.int64)
    np.cumsum(
        np.bincount(np.repeat(np.arange(len(metas)), counts), per_chunk, len(metas)),
        out=series_bytes[1:],
    )
    bounds = series_bytes.tolist()
    enc_b = enc.tobytes()
    pair_bytes: dict[tuple[str, str], bytes] = {}
    for i, key in enumerate(keys):
        out += b"\x00" * (-len(out) % 16)
        sid = len(out) // 16
        postings.setdefault(("", ""), []).append(sid)
        entry = bytearray(_uvarint(len(key)))
        for pair in key:
            refs_of = pair_bytes.get(pair)
            if refs_of is None:
                refs_of = pair_bytes[pair] = _uvarint(sym[pair[0]]) + _uvarint(sym[pair[1]])
            entry += refs_of
            postings.setdefault(pair, []).append(sid)
        entry += _uvarint(int(counts[i])) + enc_b[bounds[i] : bounds[i + 1]]
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


_JOB: dict[str, Any] = {}
"""The scenario and settings of `write_scenario`'s worker processes (inherited at fork)."""


def write_scenario(
    sc: Any,
    tsdb: Path,
    style: str = "helm",
    phase_ms: int | None = None,
    block_hours: int = 24,
    progress: Any = None,
    workers: int = 1,
) -> tuple[int, int]:
    """A scenario's raw series (`emit.openmetrics_samples`, the samples `write_openmetrics`
    writes) and, with `phase_ms`, the series the recording rules would record over them
    (`recorded.recorded_families`), as blocks of `block_hours` from the window's start, each
    holding the raw and recorded series of its hours (so that no blocks overlap), written by
    `workers` processes. Returns the number of raw and recorded samples. `progress(block,
    blocks)` is called as each block is done."""
    from gpuaudit.scenario.series import Table  # noqa: PLC0415

    hours = Table(sc, style).hours
    top = int(hours.max()) + 1 if len(hours) else 0
    step = block_hours * 3_600_000
    blocks = max(1, -(-top // block_hours))
    if phase_ms is not None:  # the last evaluation may fall after the last raw sample
        end = sc.end * 1000
        last = end - (end - phase_ms) % 300_000
        blocks = max(blocks, (last - sc.start * 1000) // step + 1)
    tsdb.mkdir(parents=True, exist_ok=True)
    _JOB.update(sc=sc, tsdb=tsdb, style=style, phase_ms=phase_ms, block_hours=block_hours)
    raw = rec = 0
    try:
        if workers > 1:
            import multiprocessing  # noqa: PLC0415

            with multiprocessing.get_context("fork").Pool(workers) as pool:
                for done, (r, c) in enumerate(pool.imap_unordered(_block, range(blocks)), 1):
                    raw, rec = raw + r, rec + c
                    if progress is not None:
                        progress(done, blocks)
        else:
            for k in range(blocks):
                r, c = _block(k)
                raw, rec = raw + r, rec + c
                if progress is not None:
                    progress(k + 1, blocks)
    finally:
        _JOB.clear()
    return raw, rec


def _block(k: int) -> tuple[int, int]:
    """Block `k` of `_JOB`'s scenario: (raw, recorded) samples written."""
    from gpuaudit.scenario.emit import openmetrics_samples  # noqa: PLC0415
    from gpuaudit.scenario.recorded_series import recorded_families  # noqa: PLC0415

    sc, style, phase_ms, bh = _JOB["sc"], _JOB["style"], _JOB["phase_ms"], _JOB["block_hours"]
    step = bh * 3_600_000
    lo = sc.start * 1000 + k * step
    w = BlockWriter(_JOB["tsdb"], lo, lo + step)
    for name, labels, off, t, v in openmetrics_samples(sc, style, (k * bh, (k + 1) * bh)):
        w.add(name, labels, off, t, v)
    raw = w.samples
    if phase_ms is not None and lo <= sc.end * 1000:
        span = (lo, min(lo + step, sc.end * 1000 + 1))
        for name, batches in recorded_families(sc, style, phase_ms, span):
            for labels, off, t, v in batches:
                w.add(name, labels, off, t, v)
    w.close()
    return raw, w.samples - raw
