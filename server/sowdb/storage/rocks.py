"""The RocksDB store: four column families behind the few calls the engine needs.

- ``journal``: every change in bookmark order (the transaction log).
- ``current``: the latest record of each key of the persistent SOW topics.
- ``history``: past versions, for topics with history.
- ``meta``: the format version, retention and trimming points.

A :class:`Batch` (``Store.batch``) writes the changes of one request as one RocksDB ``WriteBatch`` across the
column families, so a crash leaves either all of a publish request or none of it, and the
journal and ``current`` never disagree. Key and value layouts are in :mod:`sowdb.storage.keys`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from itertools import repeat
from pathlib import Path
from typing import cast

import orjson
from rocksdict import Options, Rdict, WriteBatch, WriteOptions

from sowdb.storage import keys as k

COLUMN_FAMILIES = ("journal", "current", "history", "meta")


class Batch:
    """The changes of one request to one topic, written atomically by :meth:`commit`.

    Nothing reaches RocksDB before ``commit``, so a request refused half-way is simply dropped.
    Built for the publish path: the topic is encoded once and each change costs two ``put``s.
    """

    __slots__ = ("_current", "_history", "_key_prefix", "_last", "_store", "_topic_b", "_wb")

    def __init__(self, store: Store, topic: str, *, current: bool, history: bool) -> None:
        self._store = store
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
        cf = self._store._cf
        put = self._wb.put
        journal_cf, current_cf, history_cf = cf["journal"], cf["current"], cf["history"]
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
        cf = self._store._cf
        key_b = sow_key.encode()
        self._wb.put(_SEQ(seq), k.encode_journal(timestamp_us, op, 0, self._topic_b, key_b, last_state), cf["journal"])
        if self._current:
            self._wb.delete(self._key_prefix + key_b, cf["current"])
        if self._history:
            self._wb.put(
                self._key_prefix + key_b + b"\x00" + _SEQ(seq),
                k.encode_history(op, timestamp_us, b""),
                cf["history"],
            )
        self._last = seq

    def drop_history(self, sow_key: str, seq: int) -> None:
        """Remove a history version replaced within its granularity interval (H-1)."""
        if self._history:
            self._wb.delete(self._key_prefix + sow_key.encode() + b"\x00" + _SEQ(seq), self._store._cf["history"])

    def commit(self) -> None:
        """Write everything, plus the applied markers, as one RocksDB WriteBatch."""
        if self._last:
            cf = self._store._cf
            marker = _SEQ(self._last)
            self._wb.put(k.APPLIED_MARKER, marker, cf["current"])
            self._wb.put(k.APPLIED_MARKER, marker, cf["history"])
            self._store._write(self._wb)


class RecoveryBatch:
    """One chunk of a journal replay (J-2): the recovery loop puts into ``wb`` with the two
    family handles directly (a method call per entry would double its cost), then commits the
    chunk with the markers of the families it brings up to date."""

    __slots__ = ("_store", "current_cf", "history_cf", "wb")

    def __init__(self, store: Store) -> None:
        self._store = store
        self.wb = WriteBatch(raw_mode=True)
        self.current_cf = store._cf["current"]
        self.history_cf = store._cf["history"]

    def commit(self, *, current_upto: int | None, history_upto: int | None) -> None:
        if current_upto is not None:
            self.wb.put(k.APPLIED_MARKER, k.encode_seq(current_upto), self.current_cf)
        if history_upto is not None:
            self.wb.put(k.APPLIED_MARKER, k.encode_seq(history_upto), self.history_cf)
        # Without the WAL: a replay is repeatable from the journal, so a crash half-way only
        # means replaying again; ``Store.finish_recovery`` flushes the result to SST files.
        self._store._db.write(self.wb, self._store._bulk_opts)


_SEQ = k.SEQ.pack
_JOURNAL_HEAD = k.JOURNAL_HEAD.pack
_CURRENT_HEAD = k.CURRENT_HEAD.pack


def _options() -> Options:
    opts = Options(raw_mode=True)
    opts.create_if_missing(True)
    opts.create_missing_column_families(True)
    opts.increase_parallelism(2)
    return opts


class StoreLocked(OSError):
    """The data directory is open in another process (RocksDB's ``LOCK`` file is held).

    RocksDB reports this as a bare ``Exception`` whose text mentions the lock file; a server or
    ``sowd rebuild`` started on a directory that a running sowd uses must say so in words.
    """

    def __init__(self, path: str) -> None:
        super().__init__(f"the data directory {path} is in use by another sowd (its lock is held)")
        self.path = path


class Store:
    """A RocksDB database under ``path`` (created when missing).

    Raises:
        StoreLocked: another process has the database open.
    """

    def __init__(self, path: str | Path, *, fsync: bool = False) -> None:
        Path(path).mkdir(parents=True, exist_ok=True)
        self.path = str(path)
        families = {name: Options(raw_mode=True) for name in COLUMN_FAMILIES}
        try:
            self._db = Rdict(self.path, options=_options(), column_families=families)
        except Exception as exc:
            if "lock" in str(exc).lower():
                raise StoreLocked(self.path) from exc
            raise
        self._cf = {name: self._db.get_column_family_handle(name) for name in COLUMN_FAMILIES}
        self._journal = self._db.get_column_family("journal")
        self._current = self._db.get_column_family("current")
        self._history = self._db.get_column_family("history")
        self._meta = self._db.get_column_family("meta")
        self._write_opts = WriteOptions()
        self._write_opts.sync = fsync
        self._bulk_opts = WriteOptions()
        self._bulk_opts.disable_wal = True  # type: ignore[method-assign,assignment]  # a property; the stub says method
        if self._meta.get(k.META_FORMAT) is None:
            self._meta[k.META_FORMAT] = k.FORMAT_VERSION

    def last_sequence(self) -> int:
        """The highest sequence in the journal (0 when empty)."""
        it = self._journal.iter()
        it.seek_to_last()
        return k.decode_seq(it.key()) if it.valid() else 0

    def last_applied(self) -> tuple[int, int]:
        """The last journal sequence applied to ``current`` and to ``history`` (0 when the family
        is new, empty or was lost)."""
        out = []
        for cf in (self._current, self._history):
            v = cf.get(k.APPLIED_MARKER)
            out.append(k.decode_seq(v) if v else 0)
        return out[0], out[1]

    def batch(self, topic: str, *, current: bool, history: bool) -> Batch:
        """Start an atomic batch of changes to ``topic``.

        Args:
            current: the topic is persistent: keep ``current`` up to date.
            history: the topic keeps history versions.
        """
        return Batch(self, topic, current=current, history=history)

    def _write(self, wb: WriteBatch) -> None:
        self._db.write(wb, self._write_opts)

    def load_current(self) -> Iterator[tuple[str, str, k.CurrentValue]]:
        """Every ``current`` record as (topic, SowKey, value), in key order."""
        for key, value in self._current.items(from_key=k.FIRST_RECORD_KEY):
            topic, sow_key = k.split_current_key(cast(bytes, key))
            yield topic, sow_key, k.decode_current(cast(bytes, value))

    def load_topic(self, family: str, topic: str) -> Iterator[tuple[bytes, bytes]]:
        """The (key after the topic prefix, value) pairs of one topic in ``current`` or
        ``history``, raw: start-up decodes a million of them, so it decodes only what it uses."""
        prefix = k.topic_prefix(topic)
        cut = len(prefix)
        cf = self._current if family == "current" else self._history
        for key, value in cf.items(from_key=prefix):
            key_b = cast(bytes, key)
            if not key_b.startswith(prefix):
                return
            yield key_b[cut:], cast(bytes, value)

    def iter_journal(self, after: int = 0) -> Iterator[k.JournalEntry]:
        """Journal entries with a sequence greater than ``after``, in order."""
        for key, value in self._journal.items(from_key=k.encode_seq(after + 1)):
            yield k.decode_journal(cast(bytes, key), cast(bytes, value))

    def iter_journal_raw(self, after: int = 0) -> Iterator[tuple[bytes, bytes]]:
        """Journal (key, value) bytes after ``after``: the recovery path decodes only what it needs."""
        return cast(Iterator[tuple[bytes, bytes]], self._journal.items(from_key=k.encode_seq(after + 1)))

    def first_sequence(self) -> int:
        """The oldest sequence in the journal (0 when empty)."""
        it = self._journal.iter()
        it.seek_to_first()
        return k.decode_seq(it.key()) if it.valid() else 0

    def iter_history(self) -> Iterator[k.HistoryEntry]:
        """Every history version, grouped by (topic, SowKey) and in bookmark order within."""
        for key, value in self._history.items(from_key=k.FIRST_RECORD_KEY):
            yield k.decode_history(cast(bytes, key), cast(bytes, value))

    def last_history_entry(self, record_prefix: bytes, upto: bytes) -> tuple[bytes, int] | None:
        """The newest ``history`` entry of one record at or before a sequence, as (key,
        timestamp), by a reverse seek (see the key layout).

        Args:
            record_prefix: ``topic | 0x00 | SowKey | 0x00``.
            upto: the sequence, encoded (:func:`~sowdb.storage.keys.encode_seq`).
        """
        it = self._history.iter()
        it.seek_for_prev(record_prefix + upto)
        if not it.valid():
            return None
        key = cast(bytes, it.key())
        if not key.startswith(record_prefix):
            return None
        return key, k.HISTORY_HEAD.unpack_from(cast(bytes, it.value()))[1]

    def journal_entry(self, seq: int) -> k.JournalEntry | None:
        """The journal entry at ``seq``, if the journal holds it."""
        value = self._journal.get(k.encode_seq(seq))
        return None if value is None else k.decode_journal(k.encode_seq(seq), cast(bytes, value))

    def journal_trimmed(self) -> int:
        """The last sequence removed by journal retention (0: the journal is whole)."""
        v = self._meta.get(k.META_JOURNAL_TRIMMED)
        return k.decode_seq(v) if v else 0

    def trim_journal(self, upto: int) -> None:
        """Remove journal entries up to and including ``upto`` (retention), and compact that
        range so that the disk space is given back now rather than at some later compaction."""
        wb = WriteBatch(raw_mode=True)
        wb.delete_range(k.encode_seq(0), k.encode_seq(upto + 1), self._cf["journal"])
        wb.put(k.META_JOURNAL_TRIMMED, k.encode_seq(upto), self._cf["meta"])
        self._write(wb)
        self._journal.compact_range(k.encode_seq(0), k.encode_seq(upto + 1))

    def journal_bytes(self) -> int:
        """The journal's size: its SST files (compressed) and its memtables."""
        j = self._journal
        return int(j.property_int_value("rocksdb.total-sst-files-size") or 0) + int(
            j.property_int_value("rocksdb.cur-size-all-mem-tables") or 0
        )

    def history_floor(self, topic: str) -> int:
        """The newest history version of ``topic`` removed by trimming (0: none)."""
        v = self._meta.get(k.history_floor_key(topic))
        return k.decode_seq(v) if v else 0

    def trim_history(self, topic: str, versions: list[tuple[str, int]], floor: int) -> None:
        """Remove history versions (SowKey, bookmark) of ``topic`` and raise its floor."""
        wb = WriteBatch(raw_mode=True)
        cf = self._cf["history"]
        for sow_key, seq in versions:
            wb.delete(k.history_key(topic, sow_key, seq), cf)
        wb.put(k.history_floor_key(topic), k.encode_seq(floor), self._cf["meta"])
        self._write(wb)

    def stored_topics(self) -> dict[str, bool] | None:
        """The persistent topics ``current`` was kept for, each with whether ``history`` was
        kept too, as last recorded (None: never recorded)."""
        v = self._meta.get(k.META_STORED_TOPICS)
        return None if v is None else cast(dict[str, bool], orjson.loads(cast(bytes, v)))

    def record_stored_topics(self, topics: dict[str, bool]) -> None:
        self._meta[k.META_STORED_TOPICS] = orjson.dumps(topics, option=orjson.OPT_SORT_KEYS)

    def reset_topics(self, family: str, topics: Iterable[str]) -> None:
        """Remove every key of ``topics`` from ``current`` or ``history``."""
        wb = WriteBatch(raw_mode=True)
        cf = self._cf[family]
        empty = True
        for topic in topics:
            prefix = k.topic_prefix(topic)  # topic | 0x00: the range ends before topic | 0x01
            wb.delete_range(prefix, prefix[:-1] + b"\x01", cf)
            empty = False
        if not empty:
            self._write(wb)

    def reset_derived(self) -> None:
        """Empty ``current`` and ``history`` (markers included), for a rebuild from the journal."""
        wb = WriteBatch(raw_mode=True)
        for name in ("current", "history"):
            wb.delete_range(b"\x00", b"\xff", self._cf[name])  # UTF-8 keys never contain 0xff
        self._write(wb)

    def finish_recovery(self) -> None:
        """Make a replay's writes (done without the WAL) durable."""
        self._current.flush(wait=True)
        self._history.flush(wait=True)

    def recovery_batch(self) -> RecoveryBatch:
        """A WriteBatch for one chunk of a journal replay into ``current`` and ``history``."""
        return RecoveryBatch(self)

    def close(self) -> None:
        """Flush and close; the store is unusable afterwards."""
        self._db.flush_wal(True)
        # Column-family views hold the database open; drop them so that close releases the lock.
        for cf in (self._journal, self._current, self._history, self._meta):
            cf.close()
        del self._journal, self._current, self._history, self._meta
        self._cf.clear()
        self._db.close()
