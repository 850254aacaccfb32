"""The allocator's free memory goes back to the system (:mod:`sowdb.engine.state.heap`, issue 39)."""

from __future__ import annotations

import os
import sys

import pytest

from sowdb.engine.state import release_free_memory

MIB = 1 << 20


def _rss() -> int:
    with open(f"/proc/{os.getpid()}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_free_memory_held_inside_the_heap_goes_back() -> None:
    """Blocks freed between blocks still in use stay with the process (free() returns only the
    heap's top); releasing hands their pages back: RSS falls by a good part of them."""
    pairs = [(bytearray(100_000), bytearray(1_000)) for _ in range(600)]  # ~60 MB, the small ones after each
    kept = [small for _, small in pairs]
    del pairs
    held = _rss()
    assert release_free_memory()
    assert _rss() < held - 20 * MIB  # a third: the rest of the freed blocks may be reused already
    assert len(kept) == 600
