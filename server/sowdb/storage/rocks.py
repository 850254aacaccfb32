"""The RocksDB store: four column families behind the few calls the engine needs.

- ``journal``: every change in bookmark order (the transaction log).
- ``current``: the latest record of each key of the persistent SOW topics.
- ``history``: past versions, for topics with history.
- ``meta``: the last sequence applied to ``current`` and the format version.

A :class:`Batch` (``Store.batch``) writes the changes of one request as one RocksDB ``WriteBatch`` across the
column families, so a crash leaves either all of a publish request or none of it, and the
journal and ``current`` never disagree. Key and value layouts are in :mod:`sowdb.storage.keys`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import cast

from rocksdict import Options, Rdict, WriteBatch, WriteOptions

from sowdb.storage import keys as k

COLUMN_FAMILIES = ("journal", "current", "history", "meta")


class Batch:
    """The changes of one request to one topic, written atomically by :meth:`commit`.

    Nothing reaches RocksDB before ``commit``, so a request refused half-way is simply dropped.
    Built for the publish path: the topic is encoded once and each change costs two ``put``s.
    """

    __slots__ = ("_current", "_history", "_last", "_store", "_topic", "_topic_b", "_wb")

    def __init__(self, store: Store, topic: str, *, current: bool, history: bool) -> None:
        self._store = store
        self._topic = topic
        self._topic_b = topic.encode()
        self._current = current
        self._history = history
        self._wb = WriteBatch(raw_mode=True)
        self._last = 0

    def publish(self, seq: int, timestamp_us: int, sow_key: str, payload: bytes, expiry_us: int = 0) -> None:
        """Record a publish: journal entry, new ``current`` value, history version."""
        cf = self._store._cf
        key_b = sow_key.encode()
        put = self._wb.put
        put(
            _SEQ(seq),
            _JOURNAL_HEAD(timestamp_us, k.OP_PUBLISH, expiry_us, len(self._topic_b), len(key_b))
            + self._topic_b
            + key_b
            + payload,
            cf["journal"],
        )
        if self._current:
            put(self._topic_b + b"\x00" + key_b, _CURRENT_HEAD(seq, timestamp_us, expiry_us) + payload, cf["current"])
        if self._history:
            put(
                k.history_key(self._topic, sow_key, seq),
                k.encode_history(k.OP_PUBLISH, timestamp_us, payload),
                cf["history"],
            )
        self._last = seq

    def remove(self, seq: int, timestamp_us: int, sow_key: str, op: int = k.OP_DELETE) -> None:
        """Record a delete or expiration: journal entry, ``current`` delete, history marker."""
        cf = self._store._cf
        key_b = sow_key.encode()
        self._wb.put(_SEQ(seq), k.encode_journal(timestamp_us, op, 0, self._topic_b, key_b, b""), cf["journal"])
        if self._current:
            self._wb.delete(self._topic_b + b"\x00" + key_b, cf["current"])
        if self._history:
            self._wb.put(
                k.history_key(self._topic, sow_key, seq), k.encode_history(op, timestamp_us, b""), cf["history"]
            )
        self._last = seq

    def commit(self) -> None:
        """Write everything, plus the last applied sequence, as one RocksDB WriteBatch."""
        if self._last:
            self._wb.put(k.META_LAST_APPLIED, _SEQ(self._last), self._store._cf["meta"])
            self._store._write(self._wb)


_SEQ = k.SEQ.pack
_JOURNAL_HEAD = k.JOURNAL_HEAD.pack
_CURRENT_HEAD = k.CURRENT_HEAD.pack


def _options() -> Options:
    opts = Options(raw_mode=True)
    opts.create_if_missing(True)
    opts.create_missing_column_families(True)
    opts.increase_parallelism(2)
    return opts


class Store:
    """A RocksDB database under ``path`` (created when missing)."""

    def __init__(self, path: str | Path, *, fsync: bool = False) -> None:
        Path(path).mkdir(parents=True, exist_ok=True)
        self.path = str(path)
        families = {name: Options(raw_mode=True) for name in COLUMN_FAMILIES}
        self._db = Rdict(self.path, options=_options(), column_families=families)
        self._cf = {name: self._db.get_column_family_handle(name) for name in COLUMN_FAMILIES}
        self._journal = self._db.get_column_family("journal")
        self._current = self._db.get_column_family("current")
        self._meta = self._db.get_column_family("meta")
        self._write_opts = WriteOptions()
        self._write_opts.sync = fsync
        if self._meta.get(k.META_FORMAT) is None:
            self._meta[k.META_FORMAT] = k.FORMAT_VERSION

    def last_sequence(self) -> int:
        """The highest sequence in the journal (0 when empty)."""
        it = self._journal.iter()
        it.seek_to_last()
        return k.decode_seq(it.key()) if it.valid() else 0

    def last_applied(self) -> int:
        """The last sequence applied to ``current``."""
        v = self._meta.get(k.META_LAST_APPLIED)
        return k.decode_seq(v) if v else 0

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
        for key, value in self._current.items():
            topic, sow_key = k.split_current_key(cast(bytes, key))
            yield topic, sow_key, k.decode_current(cast(bytes, value))

    def iter_journal(self, after: int = 0) -> Iterator[k.JournalEntry]:
        """Journal entries with a sequence greater than ``after``, in order."""
        for key, value in self._journal.items(from_key=k.encode_seq(after + 1)):
            yield k.decode_journal(cast(bytes, key), cast(bytes, value))

    def close(self) -> None:
        """Flush and close; the store is unusable afterwards."""
        self._db.flush_wal(True)
        # Column-family views hold the database open; drop them so that close releases the lock.
        for cf in (self._journal, self._current, self._meta):
            cf.close()
        del self._journal, self._current, self._meta
        self._cf.clear()
        self._db.close()
