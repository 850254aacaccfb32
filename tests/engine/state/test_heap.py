"""The allocator's free memory goes back to the system (:mod:`sowdb.engine.state.heap`, issue 39)."""

from __future__ import annotations

import os
import subprocess
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


_LARGE = """
import numpy as np
from sowdb.engine.state.heap import map_large_allocations

def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 >> 20

fixed = map_large_allocations()
for _ in range(3):
    block = np.ones(8 << 20, np.uint8)  # freed next round: glibc would raise its threshold to it
    del block
held = rss()
zeros = np.zeros(6 << 20, np.uint8)  # below the 8 MB glibc would have raised its threshold to
untouched = rss() - held
zeros[: 3 << 20] = 1
written = rss() - held
del zeros
print(fixed, untouched, written, rss() - held)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_a_large_block_is_mapped_on_its_own_untouched_pages_free_and_freed_at_once() -> None:
    """With the threshold fixed (the topics fix it), a large block is mapped on its own even
    after larger blocks were freed (glibc's own threshold would have risen to them and taken
    the next from the heap): its pages become memory only when written (as a column's numbers
    where it holds strings) and go back when it is freed. In a process of its own: the
    allocator's state is the process's."""
    code = _LARGE
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    fixed, untouched, written, freed = run.stdout.split()
    assert fixed == "True"
    assert int(untouched) <= 1
    assert 2 <= int(written) <= 4
    assert int(freed) <= 1
