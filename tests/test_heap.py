"""`gpuaudit.cli.heap`: the console script keeps the memory it frees, so that row-long arrays made
after others were freed reuse their pages instead of faulting in fresh ones."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

from gpuaudit import cli
from gpuaudit.cli import heap
from gpuaudit.console import style

# An array above glibc's largest mmap threshold (32 MB): mapped apart unless told otherwise.
_PROBE = """
import ctypes, sys
import numpy as np
from gpuaudit.cli import heap

class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]

libc = ctypes.CDLL(None)
libc.mallinfo2.restype = Info
kept = heap.keep_freed_memory() if sys.argv[1] == "keep" else False
a = np.ones(48 * 2**20 // 8)
mapped_apart = libc.mallinfo2().hblkhd >= a.nbytes
del a
after_free = libc.mallinfo2().arena
print(kept, mapped_apart, after_free >= 48 * 2**20)
"""


def _probe(mode: str) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, mode], capture_output=True, text=True, check=True
    )
    return out.stdout.split()


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's malloc only")
def test_freed_arrays_stay_in_the_heap_for_reuse() -> None:
    # By default a 48 MB array is a mapping of its own, given back when freed.
    assert _probe("default") == ["False", "True", "False"]
    # Kept: it comes from the heap, and the heap keeps its pages once it is freed.
    assert _probe("keep") == ["True", "False", "True"]


def test_the_console_script_keeps_freed_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    def kept() -> bool:
        calls.append("kept")
        return True

    monkeypatch.setattr(heap, "keep_freed_memory", kept)
    monkeypatch.setattr(style, "run", lambda app: calls.append("ran"))
    cli.main()
    assert calls == ["kept", "ran"]
