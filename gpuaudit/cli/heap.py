"""Keeping freed memory in the process for the rest of a command.

glibc's malloc gives every allocation above its mmap threshold (32 MB at most, so every
row-long array of a large audit) a mapping of its own, and unmaps it when it is freed: the next
array as long starts again from fresh pages, and the kernel faults each of them in (in a virtual
machine, often the host as well). An audit makes and frees such arrays all the time, and at
fleet scale those faults take a large share of its time (`benchmarks/README.md` has the
figures). A command is one short process, so `keep_freed_memory` asks malloc to take every
allocation from its heap and to keep what is freed for the next one (`mallopt`): freed pages
are reused as they are, and given back when the process ends.
"""

from __future__ import annotations

import ctypes
import sys

_M_TRIM_THRESHOLD = -1
_M_MMAP_MAX = -4
_KEEP = 2**31 - 1
"""Free memory at the top of the heap kept rather than given back: `mallopt` takes an int."""


def keep_freed_memory() -> bool:
    """Serve every allocation from malloc's heap and keep freed memory for reuse, where the C
    library is glibc (True); elsewhere nothing changes (False). For a process that ends when
    its command does (`gpuaudit.cli.main`), never for one that lives on."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # noqa: B018 (glibc's own: musl's mallopt does nothing)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_MMAP_MAX, 0)) and bool(mallopt(_M_TRIM_THRESHOLD, _KEEP))
