"""Journal range reads for pipelines (SPEC §9: journal export, streaming reads).

A range ``(after, upto]`` of the journal is read back in chunks, yielding to the event loop
between them (like the replay of :mod:`sowdb.engine.journal.replay`), as the entries themselves: each
with its bookmark, timestamp, topic, SowKey, operation and data — for a publish, the record
after the change (the writer merges a delta before journaling, so the entry is the whole
record); for a delete or an expiration, the record's last state. The storage scan is checked
(:func:`~sowdb.storage.store.checked_scan`), so a damaged journal is ``DATA_LOSS``, never a
shorter read.

:meth:`JournalReads.describe` answers what a streaming reader's offsets need: the retained
range, and where a batch of at most N matching entries after a bookmark ends (admission
control), found by a scan that decodes only the topic of each entry.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass

import orjson

from sowdb.config import is_regex_topic
from sowdb.engine.bookmarks import Point
from sowdb.engine.filters import request_filter
from sowdb.engine.journal.journal import Journal, Position
from sowdb.engine.journal.replay import check_retained
from sowdb.engine.records import StoredRecord
from sowdb.engine.state import check_topic_name, compile_topic_pattern
from sowdb.errors import InvalidArgument
from sowdb.storage import Store
from sowdb.storage import keys as k

READ_CHUNK = 2000
"""Journal entries read between two yields to the event loop."""
DEFAULT_READ_BATCH = 10_000
MAX_READ_BATCH = 100_000
OPERATIONS = (k.OP_PUBLISH, k.OP_DELETE, k.OP_EXPIRE)

Entry = k.JournalEntry


@dataclass(frozen=True)
class JournalRange:
    """What :meth:`JournalReads.describe` answers."""

    trimmed: int
    last: int
    end: int
    entries: int


def topic_matcher(topic: str) -> Callable[[bytes], bool] | None:
    """A test of a journal entry's topic (as UTF-8 bytes): a name, a regex, or None for all.

    Raises:
        InvalidArgument: a bad name or regex.
    """
    if not topic:
        return None
    if is_regex_topic(topic):
        rx = compile_topic_pattern(topic)

        def search(name: bytes) -> bool:
            return rx.search(name.decode("utf-8", "replace"))

        return search
    check_topic_name(topic)
    wanted = topic.encode()
    return wanted.__eq__


def _topic_of(value: bytes) -> bytes:
    head = k.JOURNAL_HEAD.size
    return value[head : head + k.JOURNAL_LENGTHS.unpack_from(value, k.JOURNAL_LENGTHS_AT)[0]]


class JournalReads:
    """Range reads of the journal."""

    def __init__(self, store: Store, journal: Journal, writer: Position) -> None:
        self.store = store
        self.journal = journal
        self.writer = writer

    def _range(self, after: int, upto: int, field: str = "from_bookmark") -> tuple[int, int]:
        """(after, upto) checked: ``after`` 0 is the retained journal's start, ``upto`` 0 the
        latest bookmark.

        Raises:
            OutOfRange: ``after`` is older than the retained journal.
            InvalidArgument: ``after`` is after the latest bookmark.
        """
        start = self.journal.replay_start(Point(seq=after), field)
        last = self.writer.last_seq
        end = last if upto == 0 else min(upto, last)
        return start, end

    def read(
        self,
        after: int,
        upto: int = 0,
        *,
        topic: str = "",
        operations: Sequence[int] = (),
        filter: str = "",
        batch_size: int = 0,
    ) -> AsyncIterator[list[Entry]]:
        """The entries ``(after, upto]`` of ``topic`` (a name, a regex; empty for every topic)
        with one of ``operations`` (empty for all) whose data matches ``filter``, in batches of
        at most ``batch_size`` entries.

        Everything is checked before the first entry is read.

        Raises:
            OutOfRange: ``after`` is older than the retained journal (the oldest bookmark in it);
                also from the first batch, when retention trimmed past ``after`` between this
                call and the first read (:func:`~sowdb.engine.journal.replay.check_retained`): a read
                never silently starts later than it was asked to.
            InvalidArgument: a bad topic, operation, filter or batch size.
        """
        matches = topic_matcher(topic)
        for i, op in enumerate(operations):
            if op not in OPERATIONS:
                raise InvalidArgument(f"operations[{i}] is not publish, delete or expire", field=f"operations[{i}]")
        if not 0 <= batch_size <= MAX_READ_BATCH:
            raise InvalidArgument(f"batch_size must be between 1 and {MAX_READ_BATCH}", field="batch_size")
        flt = request_filter(filter)
        start, end = self._range(after, upto)
        ops = frozenset(operations or OPERATIONS)
        return self._entries(start, end, matches, ops, flt.matches if flt else None, batch_size or DEFAULT_READ_BATCH)

    async def _entries(
        self,
        start: int,
        end: int,
        matches: Callable[[bytes], bool] | None,
        ops: frozenset[int],
        match: Callable[..., object] | None,
        batch_size: int,
    ) -> AsyncIterator[list[Entry]]:
        decode = k.decode_journal
        op_at = 8  # a journal value starts timestamp_us u64 | op u8 (keys.JOURNAL_HEAD)
        all_ops = len(ops) == len(OPERATIONS)
        out: list[Entry] = []
        if start >= end:
            return
        check_retained(self.store, start, "from_bookmark")  # a trim since read() checked the range
        for read, (key, value) in enumerate(self.store.iter_journal_raw(start), 1):
            if k.decode_seq(key) > end:
                break
            if (matches is None or matches(_topic_of(value))) and (all_ops or value[op_at] in ops):
                e = decode(key, value)
                if match is None or match(orjson.loads(e.payload or b"{}"), _context(e)):
                    out.append(e)
                    if len(out) >= batch_size:
                        yield out
                        out = []
            if read % READ_CHUNK == 0:
                await asyncio.sleep(0)
        if out:
            yield out

    async def describe(self, after: int = 0, max_entries: int = 0, topic: str = "") -> JournalRange:
        """The retained range and, with ``max_entries``, the bookmark that ends a batch of at most
        that many entries of ``topic`` after ``after`` (the latest bookmark when fewer match).
        A reader at ``after`` learns here whether the journal still holds what follows it.

        Raises:
            OutOfRange: ``after`` is older than the retained journal.
            InvalidArgument: a bad topic.
        """
        matches = topic_matcher(topic)
        trimmed = self.store.journal_trimmed()
        last = self.writer.last_seq
        start, end = self._range(after, 0, "after_bookmark") if after or max_entries else (0, last)
        if not max_entries:
            return JournalRange(trimmed, last, last, 0)
        count = 0
        for read, (key, value) in enumerate(self.store.iter_journal_raw(start), 1):
            seq = k.decode_seq(key)
            if seq > end:
                break
            if matches is None or matches(_topic_of(value)):
                count += 1
                if count >= max_entries:
                    return JournalRange(trimmed, last, seq, count)
            if read % READ_CHUNK == 0:
                await asyncio.sleep(0)
        return JournalRange(trimmed, last, end, count)


def _context(e: Entry) -> StoredRecord:
    """The metadata a filter may ask for (``SOW_KEY()``, ``BOOKMARK()``, …) of an entry."""
    return StoredRecord(e.topic, e.sow_key, None, e.payload, e.seq, e.timestamp_us, e.expiry_us)
