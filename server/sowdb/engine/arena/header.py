"""The arena's header: the few numbers a reader needs to see one consistent state.

Everything else in the directory is written before the header names it, so a reader that reads
the header first and checks it again afterwards never acts on a half-written slot. The header is
a seqlock: the writer makes its sequence odd, writes the fields, makes it even again; a reader
copies the fields between two reads of an even, equal sequence.
"""

from __future__ import annotations

import time
from array import array
from pathlib import Path
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from sowdb.engine.arena.segments import map_file

MAGIC = 0x414E_4552_4157_4F53  # "SOWARENA", little-endian
VERSION = 1
SIZE = 4096
_MAGIC, _VERSION, _SEQ = 0, 1, 2  # the fields of State follow, from _FIRST
_FIRST = 3


class State(NamedTuple):
    """One consistent reading of the header.

    Attributes:
        committed: the last bookmark whose changes a reader may see.
        gen: compactions started and finished, twice each: odd while one runs (it may free
            slots and drop segments, so a reader's work across a change of ``gen`` is void).
        slots_file: the number of the per-slot arrays' file (a larger one replaces it on growth).
        slots_cap: its capacity in slots.
        high: slot ids in use are below this.
        table_file: the number of the key table's file (a larger one replaces it on growth).
        table_mask: its size less one (a power of two).
        floor: pinned reads below this bookmark are gone (the last compaction's ``oldest_pinned``).
        live: live records at ``committed``.
    """

    committed: int
    gen: int
    slots_file: int
    slots_cap: int
    high: int
    table_file: int
    table_mask: int
    floor: int
    live: int


class Header:
    """The header file, mapped: read-write by the writer, read-only by readers."""

    def __init__(self, path: Path, *, create: bool) -> None:
        self.path = path
        self._map = map_file(path, SIZE, create=create)
        self.fields: NDArray[np.int64] = np.frombuffer(self._map, np.int64, SIZE // 8)
        self.cells = memoryview(self._map).cast("q")
        if create:
            self.fields[_MAGIC], self.fields[_VERSION] = MAGIC, VERSION
        elif int(self.fields[_MAGIC]) != MAGIC or int(self.fields[_VERSION]) != VERSION:
            raise ValueError(f"{path} is not a version {VERSION} arena header")

    def write(self, state: State) -> None:
        """Publish ``state`` (the writer's one process)."""
        f = self.cells  # a memoryview: a publish writes it each batch, numpy costs ~10x as much
        f[_SEQ] += 1  # odd: being written
        f[_FIRST : _FIRST + len(state)] = array("q", state)
        f[_SEQ] += 1

    def read(self) -> State:
        """A consistent copy, waiting out a write in progress (a few field stores long)."""
        f = self.fields
        while True:
            seq = int(f[_SEQ])
            if not seq & 1:
                values = f[_FIRST : _FIRST + len(State._fields)].tolist()
                if int(f[_SEQ]) == seq:
                    return State(*values)
            time.sleep(0)
