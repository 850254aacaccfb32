"""The per-slot arrays: where each version's bytes are, its key, its bookmarks and times.

A slot is one version of one record. All arrays of one capacity live in one mapped file,
``slots.<number>``, each in its own page-aligned region, so another process maps the same
numbers without copying them. Growing makes a file of twice the capacity, copies the slots in
use and retires the old file; the pages past the slots in use are never touched, so capacity
costs address space, not memory.

A slot is visible at bookmark B when ``born <= B < died``: ``died`` is :data:`LIVE` while the
version is current, the bookmark that replaced, deleted or expired it afterwards, and 0 for a
slot not in use (free, or never used), which no bookmark sees.
"""

from __future__ import annotations

import mmap
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from sowdb.engine.arena.segments import map_file

LIVE = int(np.iinfo(np.int64).max)
"""``died`` of the current version of a record."""
MAX_SLOTS = 2**31 - 1
"""Slot ids are int32 in the chains and the key table: at most this many slots in use at once
(freed slots are reused)."""
MAX_KEY_BYTES = 2**16 - 1

FIELDS: tuple[tuple[str, type[np.generic]], ...] = (
    ("off", np.int64),  # the JSON's place in the JSON segments
    ("koff", np.int64),  # the key's place in the key segments
    ("born", np.int64),  # the bookmark that wrote this version
    ("died", np.int64),  # the bookmark that ended it, LIVE, or 0 (not in use)
    ("ts", np.int64),  # timestamp, µs since the epoch
    ("exp", np.int64),  # expiry, µs since the epoch; 0 = never
    ("length", np.uint32),  # of the JSON
    ("prev", np.int32),  # the key's previous version still kept, or -1: the history chain
    ("khash", np.uint32),  # the key's hash (keys.key_hash)
    ("klen", np.uint16),  # of the key
)
_PAGE = mmap.PAGESIZE


def _layout(capacity: int) -> tuple[list[int], int]:
    """Each field's byte offset in a file of ``capacity`` slots, and the file's size."""
    offsets, size = [], 0
    for _, dtype in FIELDS:
        offsets.append(size)
        size += -(-capacity * np.dtype(dtype).itemsize // _PAGE) * _PAGE
    return offsets, size


class Scalars:
    """The same arrays as memoryviews, for reading one slot: indexing one gives an ``int`` in
    ~60 ns where ``int(array[i])`` takes ~300 (a point read reads several)."""

    __slots__ = tuple(name for name, _ in FIELDS)

    def __init__(self, slots: Slots) -> None:
        for name, _ in FIELDS:
            setattr(self, name, memoryview(getattr(slots, name)))

    off: memoryview
    koff: memoryview
    born: memoryview
    died: memoryview
    ts: memoryview
    exp: memoryview
    length: memoryview
    prev: memoryview
    khash: memoryview
    klen: memoryview


class Slots:
    """The arrays of one slots file (read-write for the writer, read-only for a reader);
    ``one`` has them as memoryviews (:class:`Scalars`)."""

    off: NDArray[np.int64]
    koff: NDArray[np.int64]
    born: NDArray[np.int64]
    died: NDArray[np.int64]
    ts: NDArray[np.int64]
    exp: NDArray[np.int64]
    length: NDArray[np.uint32]
    prev: NDArray[np.int32]
    khash: NDArray[np.uint32]
    klen: NDArray[np.uint16]

    def __init__(self, directory: Path, number: int, capacity: int, *, create: bool = False) -> None:
        self.directory, self.number, self.capacity = directory, number, capacity
        self.path = directory / f"slots.{number:06d}"
        offsets, size = _layout(capacity)
        mm = map_file(self.path, size, create=create)
        for (name, dtype), offset in zip(FIELDS, offsets, strict=True):
            setattr(self, name, np.frombuffer(mm, dtype, capacity, offset))
        self.one = Scalars(self)

    def grown(self, capacity: int, high: int) -> Slots:
        """A new file of ``capacity`` slots holding a copy of slots ``[0, high)``."""
        bigger = Slots(self.directory, self.number + 1, capacity, create=True)
        for name, _ in FIELDS:
            getattr(bigger, name)[:high] = getattr(self, name)[:high]
        return bigger
