"""The writer's side of a topic's arena: publish, delete, expire, commit, compact."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from sowdb.engine.arena.header import Header, State
from sowdb.engine.arena.keys import KeyTable, key_hash
from sowdb.engine.arena.segments import Segments
from sowdb.engine.arena.slots import LIVE, MAX_KEY_BYTES, MAX_SLOTS, Slots
from sowdb.engine.arena.view import ArenaView, Pin, StalePin

Times = int | Sequence[int] | NDArray[np.int64]


class TopicArena(ArenaView):
    """One topic's current records and the versions pins still see, in a directory of mapped files.

    The one writer of the directory: every change goes through it, with bookmarks that only
    grow. A change is visible to this object at once and to readers in other processes at the
    next :meth:`commit` (each method commits unless told not to).

    Attributes:
        last: the last bookmark applied; ``committed``: the last one published to readers.
        floor: pinned reads below it are gone (the last compaction's ``oldest_pinned``).
        live_count: live records; ``live_bytes``: their JSON's size.
        high: slot ids in use are below it; ``free``: freed ids, ascending, given out first.
    """

    def __init__(
        self,
        directory: Path | str,
        topic: str = "",
        *,
        segment_bytes: int = 1 << 20,
        max_segment_bytes: int = 64 << 20,
        slot_capacity: int = 1024,
        table_capacity: int = 1024,
    ) -> None:
        """Start an empty arena in ``directory``, replacing whatever was there (the arena is
        memory: RocksDB is the records' durable copy). Put it on a RAM file system
        (``/dev/shm``) unless the pages should be written back to a disk."""
        directory = Path(directory)
        if directory.exists():
            shutil.rmtree(directory)
        directory.mkdir(parents=True)
        self.directory, self.topic = directory, topic
        self.header = Header(directory / "header", create=True)
        self.slots = Slots(directory, 1, max(16, slot_capacity), create=True)
        mask = (1 << max(4, (table_capacity - 1).bit_length())) - 1
        self.table = KeyTable(directory, 1, mask, create=True)
        self.json = Segments(directory, "json", sep=b",", first_size=segment_bytes, max_size=max_segment_bytes)
        self.keys = Segments(directory, "key", first_size=segment_bytes, max_size=max_segment_bytes)
        self.last = self.committed = self.floor = self.gen = 0
        self.live_count = self.live_bytes = self.high = 0
        self.free: NDArray[np.int64] = np.empty(0, np.int64)
        self.written: NDArray[np.int64] = self.free  # the slots the last put_batch wrote, in its order
        self._looked: tuple[list[bytes], KeyTable, NDArray[np.int64], NDArray[np.int64]] | None = None
        self.retired: list[Path] = []
        self.commit()

    def check(self, pin: Pin) -> None:
        self.check_bookmark(pin.bookmark)

    def check_bookmark(self, at: int) -> None:
        if at < self.floor:
            raise StalePin(f"bookmark {at} is below the arena's floor {self.floor}")

    def pin(self, bookmark: int | None = None) -> Pin:
        """The records as of ``bookmark`` (default: the last applied), O(1).

        Raises:
            StalePin: below the floor.
        """
        pin = Pin(self, self.last if bookmark is None else bookmark, self.high)
        self.check(pin)
        return pin

    # ---------------------------------------------------------------------------------- changes

    def put_batch(
        self,
        keys: list[bytes],
        docs: list[bytes],
        bookmarks: Times,
        timestamps_us: Times,
        expiries_us: Times = 0,
        *,
        commit: bool = True,
        loading: bool = False,
    ) -> list[int]:
        """Publish: one new slot per message, each ending its key's live version (an earlier
        message of the batch when a key repeats: the last one stays live).

        Args:
            bookmarks: one per message, ascending, above :attr:`last`; an int is the first of
                consecutive ones (the writer numbers a batch's messages so).
            loading: the records read back at start, each key once, in any bookmark order
                (no pin exists yet, so no order is needed: :attr:`last` becomes the highest).
            timestamps_us, expiries_us: one per message, or one for all (expiry 0: never).

        Returns:
            The slot each message ended, or -1 where its key had no live version (the slots
            written are then in :attr:`written`).
        """
        n = len(keys)
        if n != len(docs):
            raise ValueError(f"{n} keys for {len(docs)} documents")
        if not n:
            return []
        marks = self._bookmarks(bookmarks, n, ordered=not loading)
        klens = np.fromiter(map(len, keys), np.int64, n)
        if int(klens.max()) > MAX_KEY_BYTES:
            raise ValueError(f"a key of {int(klens.max())} bytes is over the limit of {MAX_KEY_BYTES}")
        distinct = list(dict.fromkeys(keys))
        if len(distinct) == n:
            which = last_of = np.arange(n)
            previous = None
        else:
            which, last_of, previous = _repeats(keys, distinct)
        if self.table.crowded(len(distinct)):
            self._rehash(len(distinct))
        hashes = np.fromiter(map(key_hash, keys), np.uint32, n)
        looked, self._looked = self._looked, None
        if looked is not None and looked[1] is self.table and looked[0] == distinct:
            pos, heads = looked[2], looked[3]  # probed by new_keys, the table unchanged since
        else:
            pos, heads = self.table.probe(hashes[last_of], distinct, self.slots.khash, self.same_many)
        slots = self.written = self._allocate(n)
        s = self.slots
        lengths = np.fromiter(map(len, docs), np.int64, n)
        # the new versions, fully written before anything points at them; died last, after born
        s.off[slots] = self.json.append(docs)
        s.koff[slots] = self.keys.append(keys)
        s.length[slots], s.klen[slots], s.khash[slots] = lengths, klens, hashes
        s.ts[slots] = timestamps_us
        s.exp[slots] = expiries_us
        prevs = heads[which]
        if previous is not None:  # a repeated key's version follows the batch's previous one
            prevs = np.where(previous >= 0, slots[np.maximum(previous, 0)], prevs)
        s.prev[slots] = prevs
        s.born[slots] = marks
        s.died[slots] = LIVE
        has = prevs >= 0
        ending = has.copy()
        ending[has] = s.died[prevs[has]] == LIVE
        ended = prevs[ending]
        s.died[ended] = marks[ending]
        self.live_count += n - len(ended)
        self.live_bytes += int(lengths.sum()) - int(s.length[ended].sum())
        known = heads >= 0
        self.table.table[pos[known]] = slots[last_of[known]]
        self.table.place(pos[~known], slots[last_of[~known]])
        self.last = max(self.last, int(marks.max()))
        if commit:
            self.commit()
        return np.where(ending, prevs, -1).tolist()  # type: ignore[no-any-return]

    def new_keys(self, keys: list[bytes]) -> int:
        """How many distinct ``keys`` have no live version: the count a publish of them adds.
        The probe is kept for a :meth:`put_batch` of the same keys next (the writer counts
        before it writes, and puts after)."""
        distinct = list(dict.fromkeys(keys))
        if not distinct:
            return 0
        if self.table.crowded(len(distinct)):
            self._rehash(len(distinct))
        hashes = np.fromiter(map(key_hash, distinct), np.uint32, len(distinct))
        pos, heads = self.table.probe(hashes, distinct, self.slots.khash, self.same_many)
        self._looked = (distinct, self.table, pos, heads)
        has = heads >= 0
        live = np.zeros(len(distinct), bool)
        live[has] = self.slots.died[heads[has]] == LIVE
        return int(len(distinct) - live.sum())

    def delete(self, key: bytes, bookmark: int, *, commit: bool = True) -> int:
        """End ``key``'s live version at ``bookmark``; its slot, or -1 if it had none."""
        self._bookmarks(bookmark, 1)
        slot = self.get(key)
        if slot >= 0:
            self._end(np.array([slot]), np.array([bookmark]))
        self.last = bookmark
        if commit:
            self.commit()
        return slot

    def due(self, now_us: int) -> NDArray[np.int64]:
        """Live slots whose expiry has come, in the order they were written."""
        s, h = self.slots, self.high
        exp = s.exp[:h]
        slots = np.flatnonzero((s.died[:h] == LIVE) & (exp > 0) & (exp <= now_us))
        return slots[np.argsort(s.born[slots], kind="stable")]

    def expire(self, now_us: int, bookmark: int, *, commit: bool = True) -> list[int]:
        """End every live version whose expiry is at or before ``now_us``, in the order they
        were written, at ``bookmark``, ``bookmark + 1``, … (one bookmark each, as the writer
        journals expirations); their slots."""
        slots = self.due(now_us)
        if len(slots):
            marks = self._bookmarks(bookmark, len(slots))
            self._end(slots, marks)
            self.last = int(marks[-1])
        if commit:
            self.commit()
        return slots.tolist()  # type: ignore[no-any-return]

    def commit(self) -> None:
        """Publish every change so far to readers (the header, written last), then remove the
        files no reader needs any more."""
        self.committed = self.last
        self._publish()
        for path in (*self.retired, *self.json.retired, *self.keys.retired):
            path.unlink(missing_ok=True)
        self.retired.clear()
        self.json.retired.clear()
        self.keys.retired.clear()

    def compact(self, oldest_pinned: int, garbage: float = 0.5) -> int:
        """Free what no pin at or after ``oldest_pinned`` sees, and move the bytes of segments at
        least ``garbage`` garbage (a share) into a new one; the slots freed.

        Slot ids stay: a pin at or after ``oldest_pinned`` reads the same slots, their bytes
        from where they now are; a pin below it is stale from now on (:class:`StalePin`).
        """
        from sowdb.engine.arena.compaction import compact

        self._looked = None
        return compact(self, oldest_pinned, garbage)

    def close(self, *, remove: bool = False) -> None:
        """Stop writing; with ``remove``, delete the directory (readers keep what they mapped)."""
        if remove:
            shutil.rmtree(self.directory, ignore_errors=True)

    # ---------------------------------------------------------------------------------- inside

    def _publish(self) -> None:
        """Write the header: at commits, and at once when a file is replaced, so that a reader
        following a slot id it found maps the file that holds it."""
        s, t = self.slots, self.table
        self.header.write(
            State(
                self.committed, self.gen, s.number, s.capacity, self.high, t.number, t.mask, self.floor, self.live_count
            )
        )

    def _bookmarks(self, bookmarks: Times, n: int, *, ordered: bool = True) -> NDArray[np.int64]:
        if isinstance(bookmarks, int):
            marks = np.arange(bookmarks, bookmarks + n, dtype=np.int64)
        else:
            marks = np.asarray(bookmarks, np.int64)
            if marks.shape != (n,):
                raise ValueError(f"{marks.size} bookmarks for {n} messages")
        if ordered and (marks[0] <= self.last or (n > 1 and bool((np.diff(marks) <= 0).any()))):
            raise ValueError(f"bookmarks must ascend from above {self.last}")
        return marks

    def _end(self, slots: NDArray[np.int64], marks: NDArray[np.int64]) -> None:
        self.slots.died[slots] = marks
        self.live_count -= len(slots)
        self.live_bytes -= int(self.slots.length[slots].sum())

    def _allocate(self, n: int) -> NDArray[np.int64]:
        """``n`` slot ids: freed ones first (lowest first), then new ones (growing the file)."""
        reused, self.free = self.free[:n], self.free[n:]
        more = n - len(reused)
        if not more:
            return reused
        if self.high + more > MAX_SLOTS:
            raise OverflowError(f"an arena holds at most {MAX_SLOTS} slots")
        if self.high + more > self.slots.capacity:
            capacity = min(MAX_SLOTS + 1, 1 << (self.high + more - 1).bit_length())
            self.retired.append(self.slots.path)
            self.slots = self.slots.grown(max(capacity, 2 * self.slots.capacity), self.high)
            self._publish()
        fresh = np.arange(self.high, self.high + more, dtype=np.int64)
        self.high += more
        return np.concatenate((reused, fresh)) if len(reused) else fresh

    def _rehash(self, more: int) -> None:
        """Replace the key table by a larger one (or a clean one, after compactions)."""
        self.retired.append(self.table.path)
        self.table = self.table.rebuilt(more, self.slots.khash)
        self._publish()


def _repeats(keys: list[bytes], distinct: list[bytes]) -> tuple[NDArray[np.int64], ...]:
    """For a batch whose keys repeat: each message's place among the distinct keys, each
    distinct key's last message, and each message's previous message of its key (or -1)."""
    index = {k: i for i, k in enumerate(distinct)}
    which, previous, seen = [], [], [-1] * len(distinct)
    for i, key in enumerate(keys):
        d = index[key]
        which.append(d)
        previous.append(seen[d])
        seen[d] = i
    return np.array(which, np.int64), np.array(seen, np.int64), np.array(previous, np.int64)
