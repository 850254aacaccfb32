"""Reading an arena: point reads, version chains, pins and chunked scans.

The writer (:class:`~sowdb.engine.arena.store.TopicArena`) and a reader in another process
(:class:`~sowdb.engine.arena.reader.ArenaReader`) read the same way, through the arrays and
segments they have mapped; they differ in what makes a pin stale (:meth:`ArenaView.check`).
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import repeat
from typing import Any

import numpy as np
import orjson
from numpy.typing import NDArray

from sowdb.engine.arena.keys import KeyTable, key_hash
from sowdb.engine.arena.segments import Segments
from sowdb.engine.arena.slots import LIVE, Slots
from sowdb.engine.records import StoredRecord

CHUNK = 4096
"""Slots a scan decodes in one ``orjson.loads`` (the measured sweet spot, ~0.66x the cost of a
record at a time)."""


class StalePin(RuntimeError):
    """The pin's bookmark is below the arena's floor (a compaction freed what it saw), or, in a
    reader, a compaction ran while it read."""


class Pin:
    """The records as of one bookmark: the slots with ``born <= bookmark < died``.

    Taking one is O(1): nothing is copied. It stays valid while the arena is compacted only at
    or below its bookmark (slots keep their ids; compaction moves bytes, never a visible slot).

    Attributes:
        bookmark: the point it sees.
        high: slot ids in use when it was taken; slots given out later are born after it.
        gen: the reader's compaction generation when taken (the writer's pins ignore it).
    """

    __slots__ = ("bookmark", "gen", "high", "view")

    def __init__(self, view: ArenaView, bookmark: int, high: int, gen: int = 0) -> None:
        self.view, self.bookmark, self.high, self.gen = view, bookmark, high, gen

    def chunks(self, size: int = CHUNK) -> Iterator[NDArray[np.int64]]:
        """The visible slots in ascending order, at most ``size`` at a time."""
        return self.view.chunks(self, size)

    def __iter__(self) -> Iterator[int]:
        for chunk in self.chunks():
            yield from chunk.tolist()

    def count(self) -> int:
        return sum(len(c) for c in self.chunks(1 << 16))

    def scan(self, chunk: int = CHUNK) -> Iterator[tuple[NDArray[np.int64], list[Any]]]:
        return self.view.scan(self, chunk)

    def __repr__(self) -> str:
        return f"Pin(bookmark={self.bookmark})"


class ArenaView:
    """What reads an arena needs: the mapped slots, key table and segments, and the topic name
    the records it makes carry."""

    topic: str
    slots: Slots
    table: KeyTable
    json: Segments
    keys: Segments

    def check(self, pin: Pin) -> None:
        """Raise :class:`StalePin` if ``pin`` no longer sees what it saw."""
        raise NotImplementedError

    def check_bookmark(self, at: int) -> None:
        """Raise :class:`StalePin` if a read at ``at`` can no longer be answered."""
        raise NotImplementedError

    # ---------------------------------------------------------------------------------- by key

    def same(self, slot: int, key: bytes) -> bool:
        """Whether ``slot`` holds ``key`` (after its hash matched)."""
        one = self.slots.one
        return one.klen[slot] == len(key) and self.keys.read(one.koff[slot], len(key)) == key

    def same_many(self, slots: NDArray[np.int64], keys: list[bytes]) -> NDArray[np.bool_]:
        """Whether each of ``slots`` holds the key at the same place of ``keys`` (after their
        hashes matched): in one gather and one comparison when they all do, the usual case
        (a publish's keys found), key by key otherwise."""
        s = self.slots
        lens = np.fromiter(map(len, keys), np.int64, len(keys))
        ok: NDArray[np.bool_] = s.klen[slots] == lens
        # in the batch's order: a batch that repeats an earlier one's keys finds them in one run
        if ok.all() and self.keys.gather(s.koff[slots], lens) == b"".join(keys):
            return ok  # equal lengths and equal concatenations: each key equal
        same = self.same
        return np.fromiter((same(sl, k) for sl, k in zip(slots.tolist(), keys, strict=True)), bool, len(keys))

    def find_many(self, keys: list[bytes]) -> NDArray[np.int64]:
        """The newest kept slot of each key (live or ended), or -1: one vector probe for all."""
        if not keys:
            return np.empty(0, np.int64)
        hashes = np.fromiter(map(key_hash, keys), np.uint32, len(keys))
        s = self.slots
        return self.table.probe(hashes, keys, s.khash, self.same_many, self.same, s.one.khash)[1]

    def get_many(self, keys: list[bytes]) -> NDArray[np.int64]:
        """The live slot of each key, or -1."""
        found = self.find_many(keys)
        has = found >= 0
        found[has] = np.where(self.slots.died[found[has]] == LIVE, found[has], -1)
        return found

    def head(self, key: bytes) -> int:
        """The newest slot of ``key`` still kept (live or ended), or -1."""
        return self.table.find(key_hash(key), key, self.slots.one.khash, self.same)

    def get(self, key: bytes, at: int | None = None) -> int:
        """The slot of ``key`` live now, or at bookmark ``at``; -1 if none."""
        s = self.head(key)
        if s < 0:
            return -1
        one = self.slots.one
        if at is None:
            return s if one.died[s] == LIVE else -1
        self.check_bookmark(at)
        born, prev = one.born, one.prev
        while s >= 0 and born[s] > at:
            s = prev[s]
        return s if s >= 0 and at < one.died[s] else -1

    def versions(self, key: bytes) -> list[int]:
        """The slots of ``key`` still kept, newest first (ended ones included)."""
        out: list[int] = []
        s, prev = self.head(key), self.slots.one.prev
        while s >= 0:
            out.append(s)
            s = prev[s]
        return out

    # ---------------------------------------------------------------------------------- by slot

    def raw(self, slot: int) -> bytes:
        """The version's JSON."""
        one = self.slots.one
        return self.json.read(one.off[slot], one.length[slot])

    def key(self, slot: int) -> bytes:
        one = self.slots.one
        return self.keys.read(one.koff[slot], one.klen[slot])

    def bookmark(self, slot: int) -> int:
        """The bookmark that wrote the version."""
        born: int = self.slots.one.born[slot]
        return born

    def ended(self, slot: int) -> int:
        """The bookmark that replaced, deleted or expired it; :data:`LIVE` while current."""
        died: int = self.slots.one.died[slot]
        return died

    def timestamp(self, slot: int) -> int:
        ts: int = self.slots.one.ts[slot]
        return ts

    def expiry(self, slot: int) -> int:
        exp: int = self.slots.one.exp[slot]
        return exp

    def record(self, slot: int) -> StoredRecord:
        """The version as the rest of the engine handles records, made now (not kept)."""
        one = self.slots.one
        return StoredRecord(
            self.topic,
            ArenaView.key(self, slot).decode(),  # not a reader's retrying override: its caller retries
            None,
            ArenaView.raw(self, slot),
            one.born[slot],
            one.ts[slot],
            one.exp[slot],
        )

    def make_records(self, slots: NDArray[np.int64], docs: list[Any] | None = None) -> list[StoredRecord]:
        """The versions in ``slots``, in that order, made now, their arrays read a few vector
        reads at a time (``docs``: their documents, decoded already; each record's ``slot`` set)."""
        s = self.slots
        read, kread, topic = self.json.read, self.keys.read, self.topic
        out: list[StoredRecord] = []
        append = out.append
        for slot, doc, off, n, koff, kn, born, ts, exp in zip(
            slots.tolist(),
            docs if docs is not None else repeat(None),
            s.off[slots].tolist(),
            s.length[slots].tolist(),
            s.koff[slots].tolist(),
            s.klen[slots].tolist(),
            s.born[slots].tolist(),
            s.ts[slots].tolist(),
            s.exp[slots].tolist(),
            strict=False,  # ``repeat(None)`` is endless
        ):
            rec = StoredRecord(topic, kread(koff, kn).decode(), doc, read(off, n), born, ts, exp)
            rec.slot = slot
            append(rec)
        return out

    # ---------------------------------------------------------------------------------- pins, scans

    def chunks(self, pin: Pin, size: int) -> Iterator[NDArray[np.int64]]:
        """:meth:`Pin.chunks`: windows of slot ids read a few arrays at a time."""
        at, start, high = pin.bookmark, 0, pin.high
        pending: list[NDArray[np.int64]] = []
        held = 0
        self.check(pin)
        while start < high:
            if start:
                self.check(pin)
            stop = min(high, start + max(size, 1024))
            s = self.slots
            died = s.died[start:stop].copy()  # died before born: a slot being reused shows as unborn
            born = s.born[start:stop]
            seen = np.flatnonzero((born <= at) & (died > at)) + start
            start = stop
            if seen.size:
                pending.append(seen)
                held += seen.size
            while held >= size or (held and start >= high):
                joined = np.concatenate(pending) if len(pending) > 1 else pending[0]
                yield joined[:size]
                rest = joined[size:]
                pending, held = ([rest], rest.size) if rest.size else ([], 0)

    def decode(self, slots: NDArray[np.int64]) -> tuple[NDArray[np.int64], list[Any]]:
        """The documents of ``slots``, decoded in one call; the slots reordered as their bytes
        lie (runs of adjacent records are sliced whole)."""
        s = self.slots
        places = s.off[slots]
        order = np.argsort(places, kind="stable")
        slots, places = slots[order], places[order]
        body = self.json.gather(places, s.length[slots].astype(np.int64))
        return slots, orjson.loads(b"[" + body + b"]")

    def scan(self, pin: Pin, chunk: int = CHUNK) -> Iterator[tuple[NDArray[np.int64], list[Any]]]:
        """The records ``pin`` sees, ``chunk`` at a time: (slots, their decoded documents)."""
        for slots in self.chunks(pin, chunk):
            try:
                out = self.decode(slots)
            except FileNotFoundError:  # a reader's segment dropped by a compaction
                self.check(pin)
                raise
            self.check(pin)
            yield out
