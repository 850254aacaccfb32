"""Giving the C allocator's free memory back to the system after a pass that allocated much
and freed it (issue 39).

Why: glibc's malloc keeps what a process frees for its next allocations. After a numpy
temporary of a few MB is freed, its mmap threshold rises to that size, so the next such
temporaries come from the heap, and a heap freed in the middle is not returned on its own.
Loading a million records at start-up (a ``StoredRecord`` and a decoded document per record,
dropped as the arena takes them) and the scans and column builds of the first queries left
15-25 MB free but held (~20 B a record at a million records). ``malloc_trim`` hands the free
pages back (a few milliseconds), so it runs once such a pass is over, never per request.
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
    return trim  # type: ignore[no-any-return]


_TRIM = _malloc_trim()


def release_free_memory() -> bool:
    """Return the allocator's free pages to the system; whether any were (False where the C
    library cannot)."""
    return _TRIM is not None and bool(_TRIM(0))
