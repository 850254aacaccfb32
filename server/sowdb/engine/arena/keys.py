"""The key table: open addressing with linear probing, key hash -> the key's newest slot.

Why not a ``dict``: a dict's keys and values are Python objects (~100 B a record, issue 39), and
its hash of a ``str`` is salted per process, so another process could not use it. Here the table
is an int32 array in a mapped file, and the hash is :func:`key_hash`, the same everywhere.

The hash is CRC-32 (``zlib.crc32``): 65 ns a key where a 64-bit ``blake2b`` takes 800 and
CRC-32 joined with Adler-32 into 64 bits 210 (100k decimal keys, this machine), and it spreads
sequential keys over the table at least as evenly as a random function does. 32 bits are
enough: a table never has 2^31 entries, and a probe compares the key's bytes after its hash,
so two keys of the same hash cost one more comparison, never a wrong answer. It is no defence
against keys crafted to collide (neither is any hash without a secret); see the package docstring.

Entries: a slot id (the newest version of its key, live or not: a pinned read walks back from
it), :data:`EMPTY`, or :data:`GONE` where a compaction removed a key (probes go past it; a
rehash clears them). A batch probes all its keys at once: one numpy step settles most, the rest
walk on one at a time.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from sowdb.engine.arena.segments import map_file

EMPTY, GONE = -1, -2
WALK = 8
"""A probe's vector steps stop when this many keys or fewer are left: each of them walks on
alone (:meth:`KeyTable.walk`), for less than another step costs."""

key_hash = zlib.crc32
"""The stable hash of a key's bytes."""


class KeyTable:
    """One table file, ``table.<number>``, of ``mask + 1`` entries.

    Attributes:
        keys: entries holding a slot (the writer's count).
        gone: :data:`GONE` entries (the writer's count).
    """

    def __init__(self, directory: Path, number: int, mask: int, *, create: bool = False) -> None:
        self.directory, self.number, self.mask = directory, number, mask
        self.path = directory / f"table.{number:06d}"
        size = (mask + 1) * 4
        mm = map_file(self.path, size, create=create)
        self.table: NDArray[np.int32] = np.frombuffer(mm, np.int32, mask + 1)
        self.cells = memoryview(mm).cast("i")  # one entry at a time: an int, without numpy's scalars
        if create:
            self.table[:] = EMPTY
        self.keys = self.gone = 0

    def find(self, h: int, key: bytes, khash: memoryview, same: Callable[[int, bytes], bool]) -> int:
        """The slot of ``key``'s entry, or -1 (``khash``: the slots' hashes, as a memoryview)."""
        cells, mask = self.cells, self.mask
        j = h & mask
        while True:
            s: int = cells[j]
            if s == EMPTY:
                return -1
            if s >= 0 and khash[s] == h and same(s, key):
                return s
            j = (j + 1) & mask

    def probe(
        self,
        hashes: NDArray[np.uint32],
        keys: list[bytes],
        khash: NDArray[np.uint32],
        same_many: Callable[[NDArray[np.int64], list[bytes]], NDArray[np.bool_]],
        same: Callable[[int, bytes], bool],
        khash_one: memoryview,
    ) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """For distinct ``keys``: (entry position, slot), or for a key not in the table
        (first empty position on its path, -1). ``same_many`` tells which slots whose hash
        matched hold the key (:meth:`ArenaView.same_many`), ``same`` whether one does;
        ``khash_one``: the slots' hashes as a memoryview.

        Vector steps, one entry further for every key left each, settle most keys in the first
        step or two; once :data:`WALK` or fewer are left, each walks on alone (:meth:`walk`):
        a step's ~15 numpy calls cost ~1 µs each whatever their size, and the longest probe
        of a publish of 100 keys is ~10 entries.
        """
        table, mask = self.table, self.mask
        pos = hashes.astype(np.int64) & mask
        heads = np.full(len(keys), -1, np.int64)
        todo = None  # the keys not settled yet (None: all)
        while True:
            p = pos if todo is None else pos[todo]
            s = table[p].astype(np.int64)
            h = hashes if todo is None else hashes[todo]
            # s < 0 (EMPTY, GONE) reads khash[-1] or [-2]: any value, dropped by the first test
            hit = (s >= 0) & (khash[s] == h)
            if hit.any():
                at = np.flatnonzero(hit)
                which = at if todo is None else todo[at]
                ok = same_many(s[at], [keys[k] for k in which.tolist()])
                if not ok.all():  # a hash shared by two keys
                    hit[at[~ok]] = False
                    which = which[ok]
                heads[which] = s[hit]
            left = np.flatnonzero(~hit & (s != EMPTY))
            todo = left if todo is None else todo[left]
            pos[todo] = (pos[todo] + 1) & mask
            if todo.size <= WALK:
                break
        if todo.size:
            walk, hs = self.walk, hashes.tolist()
            for i in todo.tolist():
                pos[i], heads[i] = walk(int(pos[i]), hs[i], keys[i], khash_one, same)
        return pos, heads

    def walk(
        self, j: int, h: int, key: bytes, khash: memoryview, same: Callable[[int, bytes], bool]
    ) -> tuple[int, int]:
        """:meth:`probe` for one key from entry ``j`` on: (entry position, slot), or (first empty
        position, -1)."""
        cells, mask = self.cells, self.mask
        while True:
            s: int = cells[j]
            if s == EMPTY:
                return j, -1
            if s >= 0 and khash[s] == h and same(s, key):
                return j, s
            j = (j + 1) & mask

    def place(self, pos: NDArray[np.int64], slots: NDArray[np.int64]) -> None:
        """Enter keys not in the table, each at its first empty position (:meth:`probe`); keys
        that found the same one take the next empty ones."""
        table, mask = self.table, self.mask
        self.keys += len(pos)
        while pos.size:
            taken, first = np.unique(pos, return_index=True)
            table[taken] = slots[first]
            rest = np.ones(pos.size, bool)
            rest[first] = False
            pos, slots = (pos[rest] + 1) & mask, slots[rest]
            while pos.size and (busy := table[pos] != EMPTY).any():
                pos[busy] = (pos[busy] + 1) & mask

    def forget(self, freed: NDArray[np.bool_]) -> None:
        """Remove the entries whose slot a compaction freed (by slot: ``freed[slot]``); a key's
        newest version is freed only with all its older ones, so the key is gone."""
        table = self.table
        held = np.flatnonzero(table >= 0)
        slots = table[held]
        inside = slots < len(freed)
        drop = held[inside][freed[slots[inside]]]
        table[drop] = GONE
        self.keys -= len(drop)
        self.gone += len(drop)

    def crowded(self, more: int) -> bool:
        """Whether ``more`` keys would fill over half the table."""
        return 2 * (self.keys + self.gone + more) > self.mask + 1

    def rebuilt(self, more: int, khash: NDArray[np.uint32]) -> KeyTable:
        """A new table file, over a quarter and at most half full with ``more`` keys added, without
        :data:`GONE` entries."""
        size = 1 << max(4, (2 * (self.keys + more)).bit_length())
        new = KeyTable(self.directory, self.number + 1, size - 1, create=True)
        heads = self.table[self.table >= 0].astype(np.int64)
        new.place(khash[heads].astype(np.int64) & new.mask, heads)
        return new
