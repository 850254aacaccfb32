"""Append-only byte segments: the records' JSON (each followed by a comma) or their keys.

A segment is a file ``<family>.<number>`` of fixed size, mapped shared; the arena appends to the
newest one and starts another when it is full, each twice the last up to a maximum (or as large
as one item needs). Bytes once written never change, so a reader can map a segment at any time
and read what any slot it sees points at. A place in a segment is one int64,
``number << 40 | position``: one array holds where every slot's bytes are, whatever segment.

JSON records are written each followed by a comma, so a run of records that lie one after
another is a JSON array's body as it stands: ``b"[" + slice + b"]"`` decodes them in one call.
"""

from __future__ import annotations

import mmap
import os
from itertools import accumulate
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

SHIFT = 40
POSITION = (1 << SHIFT) - 1
"""A segment holds at most 1 TiB; its number takes the 23 bits above."""


def map_file(path: Path, size: int, *, create: bool) -> mmap.mmap:
    """``path`` mapped: made anew at ``size`` bytes and mapped read-write (the writer), or
    mapped read-only as it is (a reader; ``size`` 0: the whole file). Every file of the arena
    is opened this way, so a reader never maps one for writing."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644) if create else os.open(path, os.O_RDONLY)
    try:
        if create:
            os.ftruncate(fd, size)
            return mmap.mmap(fd, size)
        return mmap.mmap(fd, size, access=mmap.ACCESS_READ)
    finally:
        os.close(fd)


class Segments:
    """One family of segments in a directory.

    The writer's bookkeeping (``used``, ``live``) is its own: a reader only maps segments and
    slices them.

    Attributes:
        used: bytes appended to each segment (separators included).
        live: bytes of each segment that slots still in use point at (separators included).
    """

    def __init__(
        self,
        directory: Path,
        family: str,
        *,
        sep: bytes = b"",
        first_size: int = 1 << 20,
        max_size: int = 64 << 20,
    ) -> None:
        self.directory, self.family, self.sep = directory, family, sep
        self.first_size, self.max_size = first_size, max(first_size, max_size)
        self.maps: dict[int, mmap.mmap] = {}
        self.sizes: dict[int, int] = {}
        self.used: dict[int, int] = {}
        self.live: dict[int, int] = {}
        self.current = 0  # the segment appended to (0: none yet)
        self.numbered = 0  # the last number given: never reused, so a reader's cached mapping stays right
        self.next_size = first_size
        self.retired: list[Path] = []  # dropped segments' files, unlinked once the header no longer needs them

    def path(self, number: int) -> Path:
        return self.directory / f"{self.family}.{number:06d}"

    # ---------------------------------------------------------------------------------- reading

    def segment(self, number: int) -> mmap.mmap:
        """The mapped segment ``number`` (mapped on first use).

        Raises:
            FileNotFoundError: dropped by a compaction (a reader then starts over).
        """
        mm = self.maps.get(number)
        if mm is None:
            mm = self.maps[number] = map_file(self.path(number), 0, create=False)
        return mm

    def read(self, place: int, length: int) -> bytes:
        pos = place & POSITION
        return self.segment(place >> SHIFT)[pos : pos + length]

    def gather(self, places: NDArray[np.int64], lengths: NDArray[np.int64]) -> bytes:
        """The items at ``places`` joined by the separator: each run of items that lie one after
        another in a segment is one slice, so a freshly loaded topic is one slice a chunk (in
        any order: ascending places make fewer runs)."""
        n = len(places)
        if n == 0:
            return b""
        ends = places + lengths
        breaks = (np.flatnonzero(places[1:] != ends[:-1] + len(self.sep)) + 1).tolist()
        starts = [0, *breaks]
        stops = [*breaks, n]
        pieces = []
        for a, b in zip(starts, stops, strict=True):
            first, end = int(places[a]), int(ends[b - 1])
            pos = first & POSITION
            pieces.append(self.segment(first >> SHIFT)[pos : pos + end - first])
        return self.sep.join(pieces)

    def forget(self) -> None:
        """Drop the cached mappings (a reader, after a compaction dropped segments)."""
        self.maps.clear()

    # ---------------------------------------------------------------------------------- writing

    def append(self, items: list[bytes]) -> tuple[NDArray[np.int64], NDArray[np.int64], int]:
        """Write ``items``, each followed by the separator: their places, their lengths and the
        sum of those (a publish's batch usually fits the segment: one copy, four numpy steps)."""
        sep, k = self.sep, len(self.sep)
        lengths = np.fromiter(map(len, items), np.int64, len(items))
        blob = sep.join(items) + sep
        total = len(blob) - k * len(items)
        number = self.current
        start = self.used.get(number, 0)
        if number and len(blob) <= self.sizes[number] - start:
            self.maps[number][start : start + len(blob)] = blob
            self.used[number] += len(blob)
            self.live[number] += len(blob)
            steps = lengths + k
            return np.cumsum(steps) - steps + ((number << SHIFT) + start), lengths, total
        return self._append(memoryview(blob), lengths), lengths, total

    def append_each(self, items: list[bytes]) -> tuple[list[int], list[int], int]:
        """:meth:`append`, its answers as lists, without a numpy call where the items fit the
        segment (:mod:`~sowdb.engine.arena.small`)."""
        sep, k = self.sep, len(self.sep)
        blob = sep.join(items) + sep
        number = self.current
        start = self.used.get(number, 0)
        if not number or len(blob) > self.sizes[number] - start:
            at, sizes, total = self.append(items)
            return at.tolist(), sizes.tolist(), total
        self.maps[number][start : start + len(blob)] = blob
        self.used[number] += len(blob)
        self.live[number] += len(blob)
        lengths = list(map(len, items))
        places = list(accumulate(map(k.__add__, lengths) if k else lengths, initial=(number << SHIFT) + start))
        places.pop()  # where the next batch goes
        return places, lengths, len(blob) - k * len(items)

    def _append(self, blob: memoryview, lengths: NDArray[np.int64]) -> NDArray[np.int64]:
        """:meth:`append` across segments."""
        k, n = len(self.sep), len(lengths)
        ends = np.cumsum(lengths + k)  # of each item's separator, from the first item's start
        places = np.empty(n, np.int64)
        done = 0  # items written
        while done < n:
            base = int(ends[done - 1]) if done else 0
            room = self.sizes.get(self.current, 0) - self.used.get(self.current, 0)
            fit = int(np.searchsorted(ends, base + room, side="right"))
            if fit <= done or not self.current:
                self._start(int(lengths[done]) + k)
                continue
            number, start = self.current, self.used[self.current]
            stop = int(ends[fit - 1])
            self.maps[number][start : start + stop - base] = blob[base:stop]
            places[done:fit] = (number << SHIFT) + start + (ends[done:fit] - lengths[done:fit] - k - base)
            self.used[number] += stop - base
            self.live[number] += stop - base
            done = fit
        return places

    def seal(self) -> None:
        """Append to a new segment from now on (a compaction copies into it)."""
        if self.current and self.used[self.current]:
            self._start(0)

    def release(self, places: NDArray[np.int64], lengths: NDArray[np.int64]) -> None:
        """Slots pointing at these items were freed: their bytes are garbage."""
        if len(places):
            numbers = places >> SHIFT
            found, where = np.unique(numbers, return_inverse=True)
            freed = np.bincount(where, weights=lengths + len(self.sep))
            for number, size in zip(found.tolist(), freed.tolist(), strict=True):
                self.live[number] -= int(size)

    def compactable(self, garbage: float) -> list[int]:
        """Segments at least ``garbage`` (a share) garbage, the one appended to included."""
        return [n for n, used in self.used.items() if used and self.live[n] <= (1 - garbage) * used]

    def drop(self, number: int) -> None:
        """Forget a segment no slot points at; its file goes at the next commit."""
        self.maps.pop(number, None)  # unmapped once no slice refers to it
        del self.sizes[number], self.used[number], self.live[number]
        if number == self.current:
            self.current = 0
        self.retired.append(self.path(number))

    def _start(self, need: int) -> None:
        """A new segment to append to, twice the last (at most ``max_size``), or ``need`` bytes."""
        size = max(need, self.next_size)
        self.next_size = min(self.max_size, 2 * self.next_size)
        number = self.numbered = self.numbered + 1
        self.maps[number] = map_file(self.path(number), size, create=True)
        self.sizes[number], self.used[number], self.live[number] = size, 0, 0
        self.current = number
