"""One request's changes to one topic, written as one RocksDB ``WriteBatch`` (SPEC §1).

Nothing reaches RocksDB before :meth:`Batch.commit`, so a request refused half-way is simply
dropped, and a crash leaves either all of a request or none of it: the journal and ``current``
never disagree. The batch also writes each family's applied marker (see
:mod:`sowdb.storage.keys`), so start-up knows how far each family got.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import repeat
from typing import Any, NamedTuple

from rocksdict import WriteBatch

from sowdb.storage import keys as k


class Families(NamedTuple):
    """The column-family handles a write batch puts into."""

    journal: Any
    current: Any
    history: Any
    meta: Any


_SEQ = k.SEQ.pack
_JOURNAL_HEAD = k.JOURNAL_HEAD.pack
_CURRENT_HEAD = k.CURRENT_HEAD.pack


class Batch:
    """The changes of one request to one topic, written atomically by :meth:`commit`.

    Built for the publish path: the topic is encoded once and each change costs two ``put``s.
    """

    __slots__ = (
        "_count",
        "_current",
        "_families",
        "_history",
        "_key_prefix",
        "_last",
        "_topic",
        "_topic_b",
        "_wb",
        "_write",
    )

    def __init__(
        self, families: Families, write: Callable[[WriteBatch], None], topic: str, *, current: bool, history: bool
    ) -> None:
        self._families = families
        self._write = write
        self._topic = topic
        self._count: int | None = None
        self._topic_b = topic.encode()
        self._key_prefix = self._topic_b + b"\x00"
        self._current = current
        self._history = history
        self._wb = WriteBatch(raw_mode=True)
        self._last = 0

    def publish(self, seq: int, timestamp_us: int, sow_key: str, payload: bytes, expiry_us: int = 0) -> None:
        """Record one publish (see :meth:`publish_many`)."""
        self.publish_many(seq, timestamp_us, (sow_key,), (payload,), (expiry_us,))

    def publish_many(
        self,
        first_seq: int,
        timestamp_us: int,
        sow_keys: Sequence[str],
        payloads: Sequence[bytes],
        expiries: Sequence[int] | None = None,
    ) -> None:
        """Record publishes at sequences ``first_seq``, ``first_seq + 1``, …: journal entries,
        new ``current`` values, history versions.

        The server's hot path: one call per request with every loop-invariant in a local, which
        costs about half of a method call per message.
        """
        if not payloads:
            return
        put = self._wb.put
        journal_cf, current_cf, history_cf = self._families.journal, self._families.current, self._families.history
        current, history = self._current, self._history
        topic_b, prefix = self._topic_b, self._key_prefix
        topic_len = len(topic_b)
        seq_b, journal_head, current_head = _SEQ, _JOURNAL_HEAD, _CURRENT_HEAD
        seq = first_seq
        for sow_key, payload, expiry in zip(sow_keys, payloads, expiries or repeat(0, len(payloads)), strict=True):
            key_b = sow_key.encode()
            seq_key = seq_b(seq)
            head = journal_head(timestamp_us, k.OP_PUBLISH, expiry, topic_len, len(key_b))
            put(seq_key, b"".join((head, topic_b, key_b, payload)), journal_cf)
            if current:
                put(prefix + key_b, current_head(seq, timestamp_us, expiry) + payload, current_cf)
            if history:
                value = k.encode_history(k.OP_PUBLISH, timestamp_us, payload)
                put(prefix + key_b + b"\x00" + seq_key, value, history_cf)
            seq += 1
        self._last = seq - 1

    def remove(self, seq: int, timestamp_us: int, sow_key: str, last_state: bytes, op: int = k.OP_DELETE) -> None:
        """Record a delete or expiration: journal entry (with the record's last state),
        ``current`` delete, history marker."""
        key_b = sow_key.encode()
        journal = k.encode_journal(timestamp_us, op, 0, self._topic_b, key_b, last_state)
        self._wb.put(_SEQ(seq), journal, self._families.journal)
        if self._current:
            self._wb.delete(self._key_prefix + key_b, self._families.current)
        if self._history:
            self._wb.put(
                self._key_prefix + key_b + b"\x00" + _SEQ(seq),
                k.encode_history(op, timestamp_us, b""),
                self._families.history,
            )
        self._last = seq

    def drop_history(self, sow_key: str, seq: int) -> None:
        """Remove a history version replaced within its granularity interval (H-1)."""
        if self._history:
            self._wb.delete(self._key_prefix + sow_key.encode() + b"\x00" + _SEQ(seq), self._families.history)

    @property
    def last(self) -> int:
        """The last sequence recorded so far (0: none)."""
        return self._last

    def put_meta(self, key: bytes, value: bytes) -> None:
        """A ``meta`` entry written with the changes, in the same WriteBatch."""
        self._wb.put(key, value, self._families.meta)

    def set_record_count(self, count: int) -> None:
        """The topic's number of records in ``current`` after these changes (written with them)."""
        self._count = count

    def commit(self) -> None:
        """Write everything, plus the applied markers, as one RocksDB WriteBatch.

        Raises:
            StorageFull, StorageFailed: nothing was written.
        """
        try:
            if self._last:
                marker = _SEQ(self._last)
                self._wb.put(k.APPLIED_MARKER, marker, self._families.current)
                self._wb.put(k.APPLIED_MARKER, marker, self._families.history)
                if self._count is not None:
                    self._wb.put(k.record_count_key(self._topic), _SEQ(self._count), self._families.meta)
                self._write(self._wb)
        finally:
            # family handles hold the database open: a batch that is done lets go of them
            self._wb = self._families = None  # type: ignore[assignment]
