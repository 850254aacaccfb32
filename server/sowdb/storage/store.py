"""The RocksDB store: four column families behind the few calls the engine needs.

- ``journal``: every change in bookmark order (the transaction log).
- ``current``: the latest record of each key of the persistent SOW topics.
- ``history``: past versions, for topics with history.
- ``meta``: the format version, retention and trimming points.

The engine never sees a RocksDB handle or an encoded value: it writes through a
:class:`~sowdb.storage.batch.Batch` (one WriteBatch per request, across the families) and reads
decoded entries. Key and value layouts are in :mod:`sowdb.storage.keys`.

Two failure modes are never silent. A write that fails (a full disk) puts the store in a failed
state (:class:`StorageFull`, :class:`StorageFailed`) until :meth:`Store.reopen` succeeds. A scan
that meets a damaged block raises :class:`~sowdb.errors.DataLoss` instead of ending early:
RocksDB's iterators stop at a bad block as if the data ended there, and only their status says
otherwise, so every scan here goes through :func:`checked_scan`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import cast

import orjson
from rocksdict import WriteBatch

from sowdb.errors import SowdbError
from sowdb.storage import keys as k
from sowdb.storage.batch import Batch, Families
from sowdb.storage.database import Database, Memory
from sowdb.storage.failures import (
    data_loss,
)

COLUMN_FAMILIES = ("journal", "current", "history", "meta")

log = logging.getLogger("sowdb.storage")


class Store:
    """The store the engine reads and writes: every layout of :mod:`sowdb.storage.keys` turned
    into decoded reads and batched writes, over one :class:`~sowdb.storage.database.Database`
    (the RocksDB handles, the lock and the failure state)."""

    def __init__(self, path: str | Path, *, fsync: bool = False, memory: Memory | None = None) -> None:
        self.db = Database(path, fsync=fsync, memory=memory)
        self.path = self.db.path
        meta = self.db.family("meta")
        if meta.get(k.META_FORMAT) is None:
            meta[k.META_FORMAT] = k.FORMAT_VERSION

    # --- writing, and the failure state of the database under it ----------------------------

    @property
    def failure(self) -> SowdbError | None:
        return self.db.failure

    @failure.setter
    def failure(self, failure: SowdbError | None) -> None:
        self.db.failure = failure

    @property
    def writable(self) -> bool:
        return self.db.writable

    def watch(self, callback: Callable[[bool], None]) -> None:
        """Call ``callback(writable)`` whenever writes stop or can succeed again."""
        self.db.watch(callback)

    def reopen(self) -> bool:
        """See :meth:`Database.reopen`."""
        return self.db.reopen()

    def write(self, wb: WriteBatch, *, bulk: bool = False) -> None:
        """See :meth:`Database.write`."""
        self.db.write(wb, bulk=bulk)

    def batch(self, topic: str, *, current: bool, history: bool) -> Batch:
        """Start an atomic batch of changes to ``topic``.

        Args:
            current: the topic is persistent: keep ``current`` up to date.
            history: the topic keeps history versions.
        """
        return Batch(self.db.families(), self.db.write, topic, current=current, history=history)

    # --- the journal ---------------------------------------------------------------------------

    def last_sequence(self) -> int:
        """The highest sequence in the journal (0 when empty)."""
        key = self.db.edge("journal", last=True)
        return k.decode_seq(key) if key else 0

    def first_sequence(self) -> int:
        """The oldest sequence in the journal (0 when empty)."""
        key = self.db.edge("journal", last=False)
        return k.decode_seq(key) if key else 0

    def iter_journal(self, after: int = 0, *, topics: Iterable[str] | None = None) -> Iterator[k.JournalEntry]:
        """Journal entries with a sequence greater than ``after``, in order; only those of
        ``topics`` when given (the others are skipped without being decoded)."""
        wanted = None if topics is None else {t.encode() for t in topics}
        head = k.JOURNAL_HEAD.size
        lengths = k.JOURNAL_LENGTHS.unpack_from
        for key, value in self.db.scan("journal", k.encode_seq(after + 1)):
            if wanted is not None and value[head : head + lengths(value, k.JOURNAL_LENGTHS_AT)[0]] not in wanted:
                continue
            yield k.decode_journal(key, value)

    def iter_journal_raw(self, after: int = 0) -> Iterator[tuple[bytes, bytes]]:
        """Journal (key, value) bytes after ``after``, for :mod:`sowdb.storage.rebuild`."""
        return self.db.scan("journal", k.encode_seq(after + 1))

    def journal_entry(self, seq: int) -> k.JournalEntry | None:
        """The journal entry at ``seq``, if the journal holds it."""
        value = self.db.family("journal").get(k.encode_seq(seq))
        return None if value is None else k.decode_journal(k.encode_seq(seq), cast(bytes, value))

    def journal_trimmed(self) -> int:
        """The last sequence removed by journal retention (0: the journal is whole)."""
        v = self.db.family("meta").get(k.META_JOURNAL_TRIMMED)
        return k.decode_seq(v) if v else 0

    def trim_journal(self, upto: int) -> None:
        """Remove journal entries up to and including ``upto`` (retention), and compact that
        range so that the disk space is given back now rather than at some later compaction."""
        wb = WriteBatch(raw_mode=True)
        wb.delete_range(k.encode_seq(0), k.encode_seq(upto + 1), self.db.handle("journal"))
        wb.put(k.META_JOURNAL_TRIMMED, k.encode_seq(upto), self.db.handle("meta"))
        wb.delete_range(k.producer_log_key(0), k.producer_log_key(upto + 1), self.db.handle("meta"))
        self.db.write(wb)
        self.db.family("journal").compact_range(k.encode_seq(0), k.encode_seq(upto + 1))

    def journal_bytes(self) -> int:
        """The journal's size: its SST files (compressed) and its memtables."""
        j = self.db.family("journal")
        return int(j.property_int_value("rocksdb.total-sst-files-size") or 0) + int(
            j.property_int_value("rocksdb.cur-size-all-mem-tables") or 0
        )

    def roll_back(
        self,
        upto: int,
        current: dict[tuple[str, str], tuple[int, int, int, bytes] | None],
        history: set[str],
        why: str = "written by a request reported as failed",
    ) -> None:
        """Remove journal entries after ``upto`` and what they wrote: a write reported as
        failed that reached the write-ahead log anyway (found after :meth:`reopen`), so that
        the store says what its clients were told; or (``why`` says so) a cluster node's
        entries after its journal forked from the primary's.

        Args:
            current: the ``current`` value to restore per (topic, SowKey) written by those
                entries, as (bookmark, timestamp_us, expiry_us, payload); None deletes it.
            history: the topics whose ``history`` those entries wrote.
            why: what the log line says of them (a fork's entries may have been acknowledged
                under ``ack = "async"``: they were never "reported as failed").
        """
        entries = list(self.iter_journal(upto))
        if not entries:
            return
        wb = WriteBatch(raw_mode=True)
        wb.delete_range(k.encode_seq(upto + 1), k.encode_seq(2**64 - 1), self.db.handle("journal"))
        for (topic, sow_key), value in current.items():
            if value is None:
                wb.delete(k.current_key(topic, sow_key), self.db.handle("current"))
            else:
                wb.put(k.current_key(topic, sow_key), k.encode_current(*value), self.db.handle("current"))
        for e in entries:
            if e.topic in history:
                wb.delete(k.history_key(e.topic, e.sow_key, e.seq), self.db.handle("history"))
        marker = k.encode_seq(upto)
        wb.put(k.APPLIED_MARKER, marker, self.db.handle("current"))
        wb.put(k.APPLIED_MARKER, marker, self.db.handle("history"))
        self._roll_back_producers(wb, upto)
        self.db.write(wb)
        log.warning("rolled back journal entries %d..%d, %s", upto + 1, entries[-1].seq, why)

    # --- current and history -------------------------------------------------------------------

    def last_applied(self) -> tuple[int, int]:
        """The last journal sequence applied to ``current`` and to ``history`` (0 when the family
        is new, empty or was lost)."""
        out = []
        for cf in (self.db.family("current"), self.db.family("history")):
            v = cf.get(k.APPLIED_MARKER)
            out.append(k.decode_seq(v) if v else 0)
        return out[0], out[1]

    def load_current(self) -> Iterator[tuple[str, str, k.CurrentValue]]:
        """Every ``current`` record of every topic as (topic, SowKey, value), in key order."""
        for key, value in self.db.scan("current", k.FIRST_RECORD_KEY):
            topic, sow_key = k.split_current_key(key)
            yield topic, sow_key, k.decode_current(value)

    def load_records(self, topic: str) -> Iterator[tuple[str, k.CurrentValue]]:
        """Every ``current`` record of ``topic`` as (SowKey, value), in key order."""
        prefix = k.topic_prefix(topic)
        cut = len(prefix)
        unpack = k.CURRENT_HEAD.unpack_from
        start = k.CURRENT_HEAD.size
        for key, value in self.db.scan("current", prefix, prefix=prefix):
            bookmark, ts, exp = unpack(value)
            yield key[cut:].decode(), k.CurrentValue(bookmark, ts, exp, value[start:])

    def load_history(self, topic: str) -> Iterator[tuple[str, list[tuple[int, bytes]]]]:
        """The ``history`` versions of ``topic``, one record at a time: (SowKey, [(sequence,
        encoded version)]) in bookmark order; :func:`~sowdb.storage.keys.decode_version`
        decodes a version (start-up decodes only the records with past versions)."""
        prefix = k.topic_prefix(topic)
        cut = len(prefix)
        group = b""
        versions: list[tuple[int, bytes]] = []
        for key, value in self.db.scan("history", prefix, prefix=prefix):
            g = key[cut:-9]  # SowKey | 0x00 | seq
            if g != group:
                if versions:
                    yield group.decode(), versions
                group, versions = g, []
            versions.append((int.from_bytes(key[-8:], "big"), value))
        if versions:
            yield group.decode(), versions

    def iter_history(self) -> Iterator[k.HistoryEntry]:
        """Every history version, grouped by (topic, SowKey) and in bookmark order within."""
        for key, value in self.db.scan("history", k.FIRST_RECORD_KEY):
            yield k.decode_history(key, value)

    def last_history_entry(self, record_prefix: bytes, upto: bytes) -> tuple[bytes, int] | None:
        """The newest ``history`` entry of one record at or before a sequence, as (key,
        timestamp), by a reverse seek (see the key layout).

        Args:
            record_prefix: ``topic | 0x00 | SowKey | 0x00``.
            upto: the sequence, encoded (:func:`~sowdb.storage.keys.encode_seq`).
        """
        it = self.db.family("history").iter()
        it.seek_for_prev(record_prefix + upto)
        if not it.valid():
            try:
                it.status()
            except Exception as exc:
                raise data_loss(self.path, "history", exc) from None
            return None
        key = cast(bytes, it.key())
        if not key.startswith(record_prefix):
            return None
        return key, k.HISTORY_HEAD.unpack_from(cast(bytes, it.value()))[1]

    def _seqs(self, prefix: bytes) -> dict[str, int]:
        """The ``meta`` entries under ``prefix``: name (the rest of the key) -> number."""
        out = {}
        it = self.db.family("meta").iter()
        it.seek(prefix)
        while it.valid():
            key = cast(bytes, it.key())
            if not key.startswith(prefix):
                break
            out[key[len(prefix) :].decode()] = k.decode_seq(cast(bytes, it.value()))
            it.next()
        return out

    def record_counts(self) -> dict[str, int]:
        """Each persistent topic's number of records in ``current``, as written with its changes."""
        return self._seqs(k.record_count_key(""))

    def producer_seqs(self) -> dict[str, int]:
        """Each idempotent producer's last applied sequence (J-4), as written with its messages."""
        return self._seqs(k.PRODUCER_PREFIX)

    def producer_log(self, after: int, upto: int) -> list[tuple[int, str, int]]:
        """The producer state written by batches ending in ``(after, upto]``, as (bookmark,
        scoped producer id, sequence) in bookmark order: what a replica is shipped with them."""
        end, out = k.producer_log_key(upto + 1), []
        for key, value in self.db.scan("meta", k.producer_log_key(after + 1), prefix=k.PRODUCER_LOG_PREFIX):
            if key >= end:
                break
            out.append(k.decode_producer_log(key, value))
        return out

    def _roll_back_producers(self, wb: WriteBatch, upto: int) -> None:
        """Into ``wb``: remove the producer log after ``upto`` and give each producer it names its
        sequence as of ``upto`` (its latest earlier log entry; none retained: forgotten)."""
        cf = self.db.handle("meta")
        cut = {producer for _, producer, _ in self.producer_log(upto, 2**64 - 2)}
        if not cut:
            return
        wb.delete_range(k.producer_log_key(upto + 1), k.PRODUCER_LOG_PREFIX[:-1] + b"\x01", cf)
        earlier = {producer: seq for _, producer, seq in self.producer_log(0, upto) if producer in cut}
        for producer in cut:
            if producer in earlier:
                wb.put(k.producer_key(producer), k.encode_seq(earlier[producer]), cf)
            else:
                wb.delete(k.producer_key(producer), cf)

    def write_producer_seqs(self, seqs: dict[str, int]) -> None:
        """Make the stored producer sequences exactly ``seqs`` (after a roll-back)."""
        wb = WriteBatch(raw_mode=True)
        cf = self.db.handle("meta")
        wb.delete_range(k.PRODUCER_PREFIX, k.PRODUCER_PREFIX[:-1] + b"\x01", cf)
        for producer_id, seq in seqs.items():
            wb.put(k.producer_key(producer_id), k.encode_seq(seq), cf)
        self.db.write(wb)

    def write_record_counts(self, counts: dict[str, int]) -> None:
        """Record the topics' counts (after a rebuild or a replay, which write ``current`` in bulk)."""
        wb = WriteBatch(raw_mode=True)
        for topic, count in counts.items():
            wb.put(k.record_count_key(topic), k.encode_seq(count), self.db.handle("meta"))
        self.db.write(wb)

    def count_records(self, topic: str) -> int:
        """Count a topic's records in ``current`` (a scan of its keys)."""
        return sum(1 for _ in self.db.scan("current", k.topic_prefix(topic), prefix=k.topic_prefix(topic)))

    def history_floor(self, topic: str) -> int:
        """The newest history version of ``topic`` removed by trimming (0: none)."""
        v = self.db.family("meta").get(k.history_floor_key(topic))
        return k.decode_seq(v) if v else 0

    def trim_history(self, topic: str, versions: list[tuple[str, int]], floor: int) -> None:
        """Remove history versions (SowKey, bookmark) of ``topic`` and raise its floor."""
        wb = WriteBatch(raw_mode=True)
        cf = self.db.handle("history")
        for sow_key, seq in versions:
            wb.delete(k.history_key(topic, sow_key, seq), cf)
        wb.put(k.history_floor_key(topic), k.encode_seq(floor), self.db.handle("meta"))
        self.db.write(wb)

    def stored_topics(self) -> dict[str, bool] | None:
        """The persistent topics ``current`` was kept for, each with whether ``history`` was
        kept too, as last recorded (None: never recorded)."""
        v = self.db.family("meta").get(k.META_STORED_TOPICS)
        return None if v is None else cast(dict[str, bool], orjson.loads(cast(bytes, v)))

    def record_stored_topics(self, topics: dict[str, bool]) -> None:
        self.db.family("meta")[k.META_STORED_TOPICS] = orjson.dumps(topics, option=orjson.OPT_SORT_KEYS)

    def reset_topics(self, family: str, topics: Iterable[str]) -> None:
        """Remove every key of ``topics`` from ``current`` or ``history``."""
        wb = WriteBatch(raw_mode=True)
        cf = self.db.handle(family)
        empty = True
        for topic in topics:
            prefix = k.topic_prefix(topic)  # topic | 0x00: the range ends before topic | 0x01
            wb.delete_range(prefix, prefix[:-1] + b"\x01", cf)
            empty = False
        if not empty:
            self.db.write(wb)

    def reset_derived(self) -> None:
        """Empty ``current`` and ``history`` (markers included), for a rebuild from the journal.

        The two families are dropped and created anew rather than range-deleted: a damaged file
        goes with them, where a range deletion would leave it to be read (and fail) again.
        """
        self.db.recreate("current")
        self.db.recreate("history")

    def bulk_batch(self) -> tuple[WriteBatch, Families]:
        """An empty WriteBatch and the family handles, for the replay of
        :mod:`sowdb.storage.rebuild` (which writes it with ``write(wb, bulk=True)``)."""
        return WriteBatch(raw_mode=True), self.db.families()

    def finish_recovery(self) -> None:
        """Make a replay's writes (done without the WAL) durable."""
        self.db.flush("current", "history")

    def checkpoint(self, directory: str) -> int:
        """A consistent copy of the whole store in a new directory (see :meth:`Database.checkpoint`)."""
        return self.db.checkpoint(directory)

    def close(self) -> None:
        """Flush and close; the store is unusable afterwards."""
        self.db.close()
