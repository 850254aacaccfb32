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
from collections import deque
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from sowdb.engine.arena import LIVE, SlotRecords, TopicArena
from sowdb.engine.records import StoredRecord

GARBAGE = 0.5
"""The share of a topic's slots or bytes that may be dead before the upkeep compacts it."""
RECENT_RECORDS = 65536
"""Records made from the arena that stay made (as many as keep their encodings,
``records.RECENT_WIRE``): a repeated query of up to this many records reuses them."""
_Many = int | list[int]  # one value per message, or an int (bookmarks: the first of consecutive ones)
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
        self._made: dict[int, StoredRecord] = {}  # the records made last, by slot (_remember)
        self._order: deque[int] = deque()
        self._looked: tuple[list[str], list[bytes]] | None = None  # new_keys' keys, encoded

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
        """The version in ``slot`` (the one made last, while it is among the recent ones)."""
        rec = self._made.get(slot)
        if rec is None:
            rec = self.arena.record(slot)
            rec.slot = slot
            self._remember([rec])
        return rec

    def ended(self, slots: list[int], sow_keys: list[str]) -> list[StoredRecord | None]:
        """The versions of ``sow_keys`` that a change ended, in ``slots`` (-1: none): made from
        their slots without reading their keys, and not kept among the recent records (an ended
        version is read again only through a snapshot that pinned it, which makes it again);
        one kept already is given as it is, with what it keeps."""
        made, topic = self._made, self.topic
        arena = self.arena
        one, read = arena.slots.one, arena.json.read
        off, length, born, ts, exp = one.off, one.length, one.born, one.ts, one.exp
        out: list[StoredRecord | None] = []
        add = out.append
        for slot, key in zip(slots, sow_keys, strict=True):
            if slot < 0:
                add(None)
                continue
            rec = made.get(slot)
            if rec is None:
                rec = StoredRecord(topic, key, None, read(off[slot], length[slot]), born[slot], ts[slot], exp[slot])
                rec.slot = slot
            add(rec)
        return out

    def records(self, slots: NDArray[np.int64] | Sequence[int], docs: list[Any] | None = None) -> list[StoredRecord]:
        """The versions in ``slots``, in that order: those made recently as they were (with the
        encodings and documents they keep), the others made now, their arrays read a few
        vector reads at a time; ``docs``: their documents, already decoded."""
        arr = np.asarray(slots, np.int64)
        if not len(arr):
            return []
        made = self._made
        found = list(map(made.get, arr.tolist()))
        missing = [i for i, r in enumerate(found) if r is None]
        if not missing:
            return found  # type: ignore[return-value]
        if len(missing) < len(found):
            fresh = self._make(arr[missing], None if docs is None else [docs[i] for i in missing])
            for i, rec in zip(missing, fresh, strict=True):
                found[i] = rec
            return found  # type: ignore[return-value]
        return self._make(arr, docs)

    def made(self, slots: NDArray[np.int64]) -> list[StoredRecord] | None:
        """The records of ``slots`` when every one is among those made recently, else None."""
        made = self._made
        found = list(map(made.get, slots.tolist()))
        return None if None in found else found  # type: ignore[return-value]

    def _make(self, arr: NDArray[np.int64], docs: list[Any] | None) -> list[StoredRecord]:
        out = self.arena.make_records(arr, docs)
        self._remember(out)
        return out

    def _remember(self, recs: list[StoredRecord]) -> None:
        """Keep the last :data:`RECENT_RECORDS` records made, by slot: a repeated query gets the
        same objects, with the encodings they keep (``StoredRecord.wire``), as a topic of
        objects gives. A slot's version never changes until a compaction frees it (which
        forgets them all)."""
        made, order = self._made, self._order
        slots = [r.slot for r in recs]
        made.update(zip(slots, recs, strict=True))
        order.extend(slots)  # a slot made again after a compaction may be listed twice: it goes early
        while len(order) > RECENT_RECORDS:
            made.pop(order.popleft(), None)

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
        first, last = recs[0], recs[-1]
        n = len(recs)
        # one publish's batch: consecutive bookmarks (they ascend), one time and expiry, in as
        # many stamps as 256-bookmark windows it spans
        stamps = {r.stamp for r in recs}
        stamp = first.stamp
        same = len(stamps) == 1 or len({(t.timestamp_us, t.expiry_us) for t in stamps}) == 1
        consecutive = last.bookmark - first.bookmark == n - 1
        ended = self._put(
            [r.sow_key for r in recs],
            [r.raw for r in recs],
            first.bookmark if consecutive else [r.bookmark for r in recs],
            stamp.timestamp_us if same else [r.timestamp_us for r in recs],
            stamp.expiry_us if same else [r.expiry_us for r in recs],
        )
        self._number(recs)
        return ended

    def put_docs(
        self, sow_keys: list[str], raws: list[bytes], first: int, timestamp_us: int
    ) -> tuple[list[int], list[int]]:
        """:meth:`put_many` of a publish from its parts (bookmarks ``first``, ``first + 1``, …,
        one time, no expiry): no ``StoredRecord`` is read. The slots written, in order, and
        the slot each message ended (as :meth:`put_many`'s)."""
        if not raws:
            return [], []
        ended = self._put(sow_keys, raws, first, timestamp_us, 0)
        return self.arena.written, ended

    def _put(self, sow_keys: list[str], raws: list[bytes], marks: _Many, ts: _Many, exp: _Many) -> list[int]:
        looked, self._looked = self._looked, None
        keys = looked[1] if looked is not None and looked[0] == sow_keys else [k.encode() for k in sow_keys]
        return self.arena.put_batch(keys, raws, marks, ts, exp)

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
        for rec, slot in zip(recs, self.arena.written, strict=True):
            rec.slot = slot

    def new_keys(self, sow_keys: list[str]) -> int:
        """How many distinct ``sow_keys`` hold no record now (:meth:`TopicArena.new_keys`); their
        bytes are kept for the :meth:`put_many` of the same keys next."""
        encoded = [k.encode() for k in sow_keys]
        self._looked = (sow_keys, encoded)
        return self.arena.new_keys(encoded)

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
        self._made.clear()  # freed slots are given to new versions
        self._order.clear()
        return arena.compact(self.oldest_pinned(), GARBAGE)

    def close(self) -> None:
        self.arena.close(remove=True)


class PinnedRecords(SlotRecords):
    """Records at one bookmark, as slots: indexing or slicing makes the records asked for.

    Holding it keeps its bookmark pinned (compaction spares what it sees); dropping it unpins.
    """

    def __init__(self, owner: ArenaRecords, slots: NDArray[np.int64], bookmark: int) -> None:
        self.owner, self.slots, self.bookmark = owner, slots, bookmark
        owner.pin(bookmark)
        weakref.finalize(self, owner.unpin, bookmark)

    def make(self, slots: NDArray[np.int64], docs: list[Any] | None = None) -> list[StoredRecord]:
        return self.owner.records(slots, docs)

    def one(self, slot: int) -> StoredRecord:
        return self.owner.record(slot)

    def made(self, slots: NDArray[np.int64]) -> list[StoredRecord] | None:
        return self.owner.made(slots)

    def decode(self, slots: NDArray[np.int64]) -> tuple[NDArray[np.int64], list[Any]]:
        return self.owner.arena.decode(slots)
