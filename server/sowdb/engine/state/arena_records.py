"""A topic's current records in its arena (:mod:`sowdb.engine.arena`), read as
:class:`~sowdb.engine.records.StoredRecord` objects made when a path asks for one.

Why: a record kept as a Python object costs ~3x its JSON (issue 39); in the arena it costs its
JSON and ~70 bytes of numpy arrays, and another process can map it. The rest of the engine
still handles records as ``StoredRecord``: :class:`ArenaRecords` answers the questions a
``dict`` of them answered (``len``, ``in``, ``get``, ``values``) by reading the arena, and a
snapshot is a :class:`PinnedRecords`, the slots visible at one bookmark, whose records are
made a slice at a time as a scan reaches them.

Pins: a snapshot registers its bookmark until it is dropped, and compaction never frees a slot
a registered bookmark still sees (:meth:`ArenaRecords.oldest_pinned`).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator, Sequence
from itertools import repeat
from pathlib import Path
from typing import Any, overload

import numpy as np
from numpy.typing import NDArray

from sowdb.engine.arena import LIVE, TopicArena
from sowdb.engine.records import StoredRecord

GARBAGE = 0.5
"""The share of a topic's slots or bytes that may be dead before the upkeep compacts it."""
MIN_COMPACT_SLOTS = 4096
"""Below this many dead slots a compaction is not worth its pass over the arrays."""


class ArenaRecords:
    """The current records of one topic, in a :class:`TopicArena` the topic owns.

    Attributes:
        arena: the records' bytes and metadata; every change goes through this object.
    """

    def __init__(self, topic: str, directory: Path) -> None:
        self.topic = topic
        self.arena = TopicArena(directory, topic)
        self._pins: dict[int, int] = {}  # bookmark -> snapshots holding it

    # ------------------------------------------------------------------ the dict's questions

    def __len__(self) -> int:
        return self.arena.live_count

    def __contains__(self, sow_key: object) -> bool:
        return isinstance(sow_key, str) and self.arena.get(sow_key.encode()) >= 0

    def get(self, sow_key: str, default: StoredRecord | None = None) -> StoredRecord | None:
        slot = self.arena.get(sow_key.encode())
        return default if slot < 0 else self.record(slot)

    def __getitem__(self, sow_key: str) -> StoredRecord:
        slot = self.arena.get(sow_key.encode())
        if slot < 0:
            raise KeyError(sow_key)
        return self.record(slot)

    def slot(self, sow_key: str) -> int:
        """The live slot of ``sow_key``, or -1."""
        return self.arena.get(sow_key.encode())

    def values(self) -> PinnedRecords:
        return self.snapshot()

    def keys(self) -> Iterator[str]:
        return (r.sow_key for r in self.snapshot())

    def items(self) -> Iterator[tuple[str, StoredRecord]]:
        return ((r.sow_key, r) for r in self.snapshot())

    def __iter__(self) -> Iterator[str]:
        return self.keys()

    @property
    def stored_bytes(self) -> int:
        return self.arena.live_bytes

    # ------------------------------------------------------------------ records from slots

    def record(self, slot: int) -> StoredRecord:
        """The version in ``slot``, made now (not kept)."""
        rec = self.arena.record(slot)
        rec.slot = slot
        return rec

    def records(self, slots: NDArray[np.int64] | Sequence[int], docs: list[Any] | None = None) -> list[StoredRecord]:
        """The versions in ``slots``, in that order: the arrays read a few vector reads at a
        time; with ``docs``, their documents already decoded (kept while recent)."""
        arr = np.asarray(slots, np.int64)
        if not len(arr):
            return []
        arena = self.arena
        s = arena.slots
        read, kread, topic = arena.json.read, arena.keys.read, self.topic
        out: list[StoredRecord] = []
        append = out.append
        for slot, doc, off, n, koff, kn, born, ts, exp in zip(
            arr.tolist(),
            docs if docs is not None else repeat(None),
            s.off[arr].tolist(),
            s.length[arr].tolist(),
            s.koff[arr].tolist(),
            s.klen[arr].tolist(),
            s.born[arr].tolist(),
            s.ts[arr].tolist(),
            s.exp[arr].tolist(),
            strict=False,  # ``repeat(None)`` is endless
        ):
            rec = StoredRecord(topic, kread(koff, kn).decode(), doc, read(off, n), born, ts, exp)
            rec.slot = slot
            append(rec)
        return out

    def live_slots(self) -> NDArray[np.int64]:
        """The slots of the current records, in slot order."""
        a = self.arena
        return np.flatnonzero(a.slots.died[: a.high] == LIVE)

    def live_mask(self, n: int) -> NDArray[np.bool_]:
        """Whether each of the first ``n`` slots holds a current record."""
        live: NDArray[np.bool_] = self.arena.slots.died[:n] == LIVE
        return live

    def snapshot(self) -> PinnedRecords:
        """Every current record, as of now: their slots, pinned until the snapshot is dropped."""
        return PinnedRecords(self, self.live_slots(), self.arena.last)

    def pinned(self, slots: NDArray[np.int64] | Sequence[int]) -> PinnedRecords:
        """Some current records (the planner's candidates), pinned like a snapshot."""
        return PinnedRecords(self, np.asarray(slots, np.int64), self.arena.last)

    # ------------------------------------------------------------------ changes

    def put_many(self, recs: Sequence[StoredRecord]) -> list[int]:
        """Write each version (its ``slot`` set), ending its key's current one; the slot each
        ended (-1 for a new key). Bookmarks ascend, as the writer gives them."""
        if not recs:
            return []
        ended = self.arena.put_batch(
            [r.sow_key.encode() for r in recs],
            [r.raw for r in recs],
            [r.bookmark for r in recs],
            [r.timestamp_us for r in recs],
            [r.expiry_us for r in recs],
        )
        self._number(recs)
        return ended

    def load(self, recs: Sequence[StoredRecord]) -> None:
        """Records read back at start: each key once, bookmarks in any order."""
        if not recs:
            return
        self.arena.put_batch(
            [r.sow_key.encode() for r in recs],
            [r.raw for r in recs],
            [r.bookmark for r in recs],
            [r.timestamp_us for r in recs],
            [r.expiry_us for r in recs],
            loading=True,
        )
        self._number(recs)

    def _number(self, recs: Sequence[StoredRecord]) -> None:
        """Tell each new version its slot."""
        for rec, slot in zip(recs, self.arena.written.tolist(), strict=True):
            rec.slot = slot

    def remove(self, sow_key: str, bookmark: int) -> int:
        """End the key's current version at ``bookmark``; its slot, or -1."""
        return self.arena.delete(sow_key.encode(), bookmark)

    # ------------------------------------------------------------------ pins and compaction

    def pin(self, bookmark: int) -> None:
        self._pins[bookmark] = self._pins.get(bookmark, 0) + 1

    def unpin(self, bookmark: int) -> None:
        left = self._pins.get(bookmark, 0) - 1
        if left > 0:
            self._pins[bookmark] = left
        else:
            self._pins.pop(bookmark, None)

    def oldest_pinned(self) -> int:
        """The oldest bookmark a snapshot still reads at (the last applied when none does)."""
        return min(self._pins, default=self.arena.last)

    def compact(self, *, force: bool = False) -> int:
        """Free the versions no snapshot sees and move the live bytes out of mostly dead
        segments, when enough is dead (:data:`GARBAGE`); the slots freed."""
        arena = self.arena
        dead = arena.high - len(arena.free) - arena.live_count
        if not force and (dead < MIN_COMPACT_SLOTS or dead < GARBAGE * arena.high):
            return 0
        return arena.compact(self.oldest_pinned(), GARBAGE)

    def close(self) -> None:
        self.arena.close(remove=True)


class PinnedRecords(Sequence[StoredRecord]):
    """Records at one bookmark, as slots: indexing or slicing makes the records asked for.

    Holding it keeps its bookmark pinned (compaction spares what it sees); dropping it unpins.
    """

    def __init__(self, owner: ArenaRecords, slots: NDArray[np.int64], bookmark: int) -> None:
        self.owner, self.slots, self.bookmark = owner, slots, bookmark
        owner.pin(bookmark)
        weakref.finalize(self, owner.unpin, bookmark)

    def __len__(self) -> int:
        return len(self.slots)

    @overload
    def __getitem__(self, i: int) -> StoredRecord: ...

    @overload
    def __getitem__(self, i: slice) -> list[StoredRecord]: ...

    def __getitem__(self, i: int | slice) -> StoredRecord | list[StoredRecord]:
        if isinstance(i, slice):
            return self.owner.records(self.slots[i])
        return self.owner.record(int(self.slots[i]))

    def __iter__(self) -> Iterator[StoredRecord]:
        for start in range(0, len(self.slots), 1024):
            yield from self.owner.records(self.slots[start : start + 1024])

    def __bool__(self) -> bool:
        return len(self.slots) > 0
