"""Giving the C allocator's free memory back to the system after a pass that allocated much
and freed it (issue 39).

Why: glibc's malloc keeps what a process frees for its next allocations. After a numpy
temporary of a few MB is freed, its mmap threshold rises to that size, so the next such
temporaries come from the heap, and a heap freed in the middle is not returned on its own.
Loading a million records at start-up (a ``StoredRecord`` and a decoded document per record,
dropped as the arena takes them) and the scans and column builds of the first queries left
15-25 MB free but held (~20 B a record at a million records). Two remedies:
:func:`map_large_allocations` fixes the threshold at :data:`MMAP_THRESHOLD`, so every large
block (a column, a mask over a million slots) is mapped on its own, given back when freed, and
its untouched pages (a column's numbers where it holds strings) never become memory; and
``malloc_trim`` hands the free pages of the heap back (a few milliseconds), once such a pass
is over, never per request. Measured at a million orders: 227 -> 214 B a record after loading,
280 -> 265 after the peer queries.
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Callable


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or None where the C library has none (macOS, musl)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


_TRIM = _malloc_trim()
MMAP_THRESHOLD = 4 << 20
"""Blocks of at least this many bytes are mapped on their own (glibc's default starts at 128 KiB
and rises to the largest block freed, up to 32 MiB). 4 MiB, not 1: RocksDB's memtable blocks
(2 MiB) and a mask over a million slots (1 MiB) stay in the heap, reused without page faults;
1 MiB measured the same memory and publish 0.91x (median of 10 alternating pairs, noisy)."""
_M_MMAP_THRESHOLD = -3  # mallopt's parameter (malloc.h)


def map_large_allocations() -> bool:
    """Fix the allocator's mmap threshold at :data:`MMAP_THRESHOLD` for this process; whether
    it could (glibc only)."""
    if _TRIM is None:
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD))


def release_free_memory() -> bool:
    """Return the allocator's free pages to the system; whether any were (False where the C
    library cannot)."""
    return _TRIM is not None and bool(_TRIM(0))
