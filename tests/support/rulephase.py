"""Where Prometheus puts a rule group's evaluations: at an offset from a hash of the group's name
and file (`rules.Group.EvalTimestamp`), which `promtool tsdb create-blocks-from rules` uses too.
Tests choose a rule file name whose offset is what they need (a whole second, not on the hour).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from tests.support.servers import require

_M = (1 << 64) - 1
_P1, _P2, _P3 = 11400714785074694791, 14029467366897019727, 1609587929392839161
_P4, _P5 = 9650029242287828579, 2870177450012600261


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _M


def _round(acc: int, lane: int) -> int:
    return (_rotl((acc + lane * _P2) & _M, 31) * _P1) & _M


def xxh64(data: bytes) -> int:
    """XXH64 with seed 0 (what Prometheus' `labels.Hash` uses)."""
    n, i = len(data), 0
    if n >= 32:
        v = [(_P1 + _P2) & _M, _P2, 0, (-_P1) & _M]
        while i + 32 <= n:
            for j in range(4):
                v[j] = _round(v[j], int.from_bytes(data[i + 8 * j : i + 8 * j + 8], "little"))
            i += 32
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M
        for x in v:
            h = ((h ^ _round(0, x)) * _P1 + _P4) & _M
    else:
        h = _P5
    h = (h + n) & _M
    while i + 8 <= n:
        lane = int.from_bytes(data[i : i + 8], "little")
        h = (_rotl(h ^ _round(0, lane), 27) * _P1 + _P4) & _M
        i += 8
    if i + 4 <= n:
        h = (_rotl(h ^ (int.from_bytes(data[i : i + 4], "little") * _P1 & _M), 23) * _P2 + _P3) & _M
        i += 4
    while i < n:
        h = (_rotl(h ^ (data[i] * _P5 & _M), 11) * _P1) & _M
        i += 1
    h ^= h >> 33
    h = h * _P2 & _M
    h ^= h >> 29
    h = h * _P3 & _M
    return h ^ (h >> 32)


def group_offset_ns(name: str, file: str, interval_s: int) -> int:
    """The offset of a group's evaluations from the interval's grid, in nanoseconds."""
    key = b"file\xff" + file.encode() + b"\xffname\xff" + name.encode() + b"\xff"
    return xxh64(key) % (interval_s * 10**9)


def whole_second_file(folder: Path, name: str, interval_s: int) -> tuple[Path, int]:
    """A rule file path in `folder` whose group `name` evaluates on a whole second (to the
    millisecond the server rounds the time to) that is not on the interval's grid; the path
    and the offset in seconds."""
    for i in range(1_000_000):
        path = folder / f"rules-{i}.yml"
        ns = group_offset_ns(name, str(path), interval_s)
        if ns % 10**9 < 400_000 and ns // 10**9 > 0:
            return path, ns // 10**9
    raise AssertionError("no rule file name gives a whole-second phase")


def evaluated(rules: Path, start: int, end: int, url: str, tsdb: Path, tmp: Path) -> Path:
    """A copy of the TSDB folder `tsdb` with the rule file `rules` evaluated by promtool from
    `start` to `end` over the Prometheus at `url` (`tsdb create-blocks-from rules`), in `tmp`."""
    blocks = tmp / "blocks"
    subprocess.run(
        [
            require("promtool"),
            "tsdb",
            "create-blocks-from",
            "rules",
            "-q",
            f"--start={start}",
            f"--end={end}",
            f"--url={url}",
            f"--output-dir={blocks}",
            str(rules),
        ],
        check=True,
        capture_output=True,
    )
    both = tmp / "tsdb"
    shutil.copytree(tsdb, both)
    for block in blocks.iterdir():
        shutil.copytree(block, both / block.name)
    return both
