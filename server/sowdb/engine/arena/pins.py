"""The pins other processes hold on an arena: the oldest bookmark each reader process reads at.

A compaction frees the versions that no pin at or after its floor sees. The writer's own pins
are in its memory (``ArenaRecords``); a reader process's are in this file, the arena's
``pins``, one int64 per reader process (0: none), which the writer's compaction reads before it
frees anything.

The two sides meet as in Dekker's algorithm, each writing its own word and then reading the
other's: the writer makes the header's generation odd (a compaction runs) and then reads the
pins; a reader writes its pin and then reads the header. Either the compaction sees the pin
(and spares what it sees), or the reader sees the odd or newer generation (and checks the
compaction's floor before it reads). x86-64 may let a load pass an earlier store to another
place, so each side puts a full fence between the two (:func:`fence`).
"""

from __future__ import annotations

import mmap
import os
import threading
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

SLOTS = 64
"""Reader processes that can pin an arena at once (a group has one per core, less its writer)."""
_LOCK = threading.Lock()


def fence() -> None:
    """A full memory fence: taking a lock is an atomic read-modify-write (``lock cmpxchg`` on
    x86-64), which no load or store crosses."""
    with _LOCK:
        pass


class SharedPins:
    """The ``pins`` file of an arena directory, mapped read-write by the writer (which makes it)
    and by every reader process (each writes only its own slot)."""

    def __init__(self, directory: Path, *, create: bool) -> None:
        path = directory / "pins"
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644) if create else os.open(path, os.O_RDWR)
        try:
            if create:
                os.ftruncate(fd, SLOTS * 8)
            self._map = mmap.mmap(fd, SLOTS * 8)
        finally:
            os.close(fd)
        self.values: NDArray[np.int64] = np.frombuffer(self._map, np.int64)

    def oldest(self) -> int | None:
        """The oldest bookmark a reader process reads at, or None (the writer, after the header
        says a compaction runs)."""
        fence()
        held = self.values[self.values > 0]
        return int(held.min()) if held.size else None

    def hold(self, slot: int, bookmark: int) -> None:
        """Reader ``slot`` reads at ``bookmark`` and later (0: at nothing); then the fence, so
        that the header read next is read after the pin is seen."""
        self.values[slot] = bookmark
        fence()

    def close(self) -> None:
        del self.values
        self._map.close()
