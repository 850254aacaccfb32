"""The writer's side of a topic's arena: publish, delete, expire, commit, compact."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from sowdb.engine.arena import small
from sowdb.engine.arena.header import Header, State
from sowdb.engine.arena.keys import KeyTable, key_hash
from sowdb.engine.arena.pins import SharedPins
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
        self.pins = SharedPins(directory, create=True)  # reader processes' pins, read by compact()
        self.slots = Slots(directory, 1, max(16, slot_capacity), create=True)
        mask = (1 << max(4, (table_capacity - 1).bit_length())) - 1
        self.table = KeyTable(directory, 1, mask, create=True)
        self.json = Segments(directory, "json", sep=b",", first_size=segment_bytes, max_size=max_segment_bytes)
        self.keys = Segments(directory, "key", first_size=segment_bytes, max_size=max_segment_bytes)
        self.last = self.committed = self.floor = self.gen = 0
        self.live_count = self.live_bytes = self.high = 0
        self.free: NDArray[np.int64] = np.empty(0, np.int64)
        self.written: list[int] = []  # the slots the last put_batch wrote, in its order
        self._looked: _Looked | small.Each | None = None
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
        if (longest := max(map(len, keys))) > MAX_KEY_BYTES:
            raise ValueError(f"a key of {longest} bytes is over the limit of {MAX_KEY_BYTES}")
        looked, self._looked = self._looked, None
        if (
            n <= small.SMALL
            and isinstance(bookmarks, int)
            and isinstance(timestamps_us, int)
            and isinstance(expiries_us, int)
        ):
            if bookmarks <= self.last and not loading:
                raise ValueError(f"bookmarks must ascend from above {self.last}")
            done = small.put(self, keys, docs, bookmarks, timestamps_us, expiries_us, _each(looked))
            if done is not None:
                if commit:
                    self.commit()
                return done
        if isinstance(looked, small.Each):  # a small probe for a batch that takes this path
            e = looked
            looked = _Looked(
                e.keys, e.table, np.array(e.hashes, np.uint32), np.array(e.pos), np.array(e.heads), np.array(e.live)
            )
        marks = self._bookmarks(bookmarks, n, ordered=not loading)
        previous = which = last_of = None
        if looked is not None and looked.table is self.table and looked.keys == keys:
            hashes, pos, heads, live = looked.hashes, looked.pos, looked.heads, looked.live  # by new_keys
        else:
            distinct = list(dict.fromkeys(keys))
            if len(distinct) < n:
                which, last_of, previous = _repeats(keys, distinct)
            if self.table.crowded(len(distinct)):
                self.rehash(len(distinct))
            hashes = np.fromiter(map(key_hash, keys), np.uint32, n)
            if looked is not None and looked.table is self.table and looked.keys == distinct:
                pos, heads, live = looked.pos, looked.heads, looked.live
            else:
                pos, heads = self._probe(hashes if last_of is None else hashes[last_of], distinct)
                live = self._live(heads)
        slots, at = self._allocate(n)
        self.written = slots.tolist()
        s = self.slots
        # the new versions, fully written before anything points at them; died last, after born
        places, lengths, total = self.json.append(docs)
        s.off[at] = places
        s.koff[at], s.klen[at], _ = self.keys.append(keys)
        s.length[at] = lengths
        s.khash[at] = hashes
        s.ts[at] = timestamps_us
        s.exp[at] = expiries_us
        entered = slots  # the slot each distinct key's entry gets: its last message's
        if which is None or last_of is None or previous is None:
            prevs, ending = heads, live
        else:  # a repeated key's version follows (and ends) the batch's previous one
            later = previous >= 0
            prevs = np.where(later, slots[np.maximum(previous, 0)], heads[which])
            ending = later | live[which]
            entered = slots[last_of]
        s.prev[at] = prevs
        s.born[at] = marks
        s.died[at] = LIVE
        ends = int(np.count_nonzero(ending))
        if ends:
            ended = prevs if ends == n else prevs[ending]
            s.died[ended] = marks if ends == n else marks[ending]
            total -= int(s.length[ended].sum())
        self.live_count += n - ends
        self.live_bytes += total
        known = heads >= 0
        found = int(np.count_nonzero(known))
        if found == len(heads):
            self.table.table[pos] = entered
        elif not found:
            self.table.place(pos, entered)
        else:
            self.table.table[pos[known]] = entered[known]
            self.table.place(pos[~known], entered[~known])
        self.last = max(self.last, bookmarks + n - 1 if isinstance(bookmarks, int) else int(marks.max()))
        if commit:
            self.commit()
        if ends == n:
            return prevs.tolist()  # type: ignore[no-any-return]
        return np.where(ending, prevs, -1).tolist()  # type: ignore[no-any-return]

    def new_keys(self, keys: list[bytes]) -> int:
        """How many distinct ``keys`` have no live version: the count a publish of them adds.
        The probe is kept for a :meth:`put_batch` of the same keys next (the writer counts
        before it writes, and puts after)."""
        distinct = list(dict.fromkeys(keys))
        if not distinct:
            return 0
        if self.table.crowded(len(distinct)):
            self.rehash(len(distinct))
        if len(distinct) <= small.SMALL:
            each = self._looked = small.probe(self, distinct)
            return len(distinct) - sum(each.live)
        hashes = np.fromiter(map(key_hash, distinct), np.uint32, len(distinct))
        pos, heads = self._probe(hashes, distinct)
        live = self._live(heads)
        self._looked = _Looked(distinct, self.table, hashes, pos, heads, live)
        return len(distinct) - int(np.count_nonzero(live))

    def delete(self, key: bytes, bookmark: int, *, commit: bool = True) -> int:
        """End ``key``'s live version at ``bookmark``; its slot, or -1 if it had none."""
        self._bookmarks(bookmark, 1)
        self._looked = None
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
            self._looked = None
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

    def _probe(self, hashes: NDArray[np.uint32], distinct: list[bytes]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        s = self.slots
        return self.table.probe(hashes, distinct, s.khash, self.same_many, self.same, s.one.khash)

    def _live(self, heads: NDArray[np.int64]) -> NDArray[np.bool_]:
        """Whether each of ``heads`` (slots, or -1) is live; ``died[-1]`` is read and dropped."""
        live: NDArray[np.bool_] = (heads >= 0) & (self.slots.died[heads] == LIVE)
        return live

    def _bookmarks(self, bookmarks: Times, n: int, *, ordered: bool = True) -> NDArray[np.int64]:
        if isinstance(bookmarks, int):
            if ordered and bookmarks <= self.last:
                raise ValueError(f"bookmarks must ascend from above {self.last}")
            return np.arange(bookmarks, bookmarks + n, dtype=np.int64)
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

    def _allocate(self, n: int) -> tuple[NDArray[np.int64], NDArray[np.int64] | slice]:
        """``n`` slot ids: freed ones first (lowest first), then new ones (growing the file); and
        the same as a slice where they are consecutive (numpy writes a slice faster)."""
        reused, self.free = self.free[:n], self.free[n:]
        more = n - len(reused)
        if not more:
            first = int(reused[0])
            return reused, slice(first, first + n) if int(reused[-1]) - first == n - 1 else reused
        if self.high + more > MAX_SLOTS:
            raise OverflowError(f"an arena holds at most {MAX_SLOTS} slots")
        if self.high + more > self.slots.capacity:
            capacity = min(MAX_SLOTS + 1, 1 << (self.high + more - 1).bit_length())
            self.retired.append(self.slots.path)
            self.slots = self.slots.grown(max(capacity, 2 * self.slots.capacity), self.high)
            self._publish()
        fresh = np.arange(self.high, self.high + more, dtype=np.int64)
        self.high += more
        if len(reused):
            slots = np.concatenate((reused, fresh))
            return slots, slots
        return fresh, slice(self.high - more, self.high)

    def run(self, n: int) -> int:
        """The first of ``n`` consecutive slot ids, now given out (freed ones first, then new
        ones), or -1 where the freed ones first in line are not consecutive (nothing is given)."""
        free = self.free
        if len(free):
            if len(free) < n or int(free[n - 1]) - int(free[0]) != n - 1:
                return -1
            self.free = free[n:]
            return int(free[0])
        first = self.high
        if first + n > self.slots.capacity:
            return int(self._allocate(n)[0][0])  # grows the file
        self.high += n
        return first

    def rehash(self, more: int) -> None:
        """Replace the key table by a larger one (or a clean one, after compactions)."""
        self.retired.append(self.table.path)
        self.table = self.table.rebuilt(more, self.slots.khash)
        self._publish()


class _Looked(NamedTuple):
    """A probe :meth:`TopicArena.new_keys` made, for the :meth:`~TopicArena.put_batch` after it."""

    keys: list[bytes]  # distinct
    table: KeyTable  # the table probed (a rehash makes the probe void)
    hashes: NDArray[np.uint32]
    pos: NDArray[np.int64]
    heads: NDArray[np.int64]
    live: NDArray[np.bool_]


def _each(looked: _Looked | small.Each | None) -> small.Each | None:
    return looked if isinstance(looked, small.Each) else None


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
