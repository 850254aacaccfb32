"""The RocksDB store: four column families behind the few calls the engine needs.

- ``journal``: every change in bookmark order (the transaction log).
- ``current``: the latest record of each key of the persistent SOW topics.
- ``history``: past versions, for topics with history.
- ``meta``: the last sequence applied to ``current`` and the format version.

:meth:`Store.apply` writes one batch of changes as one RocksDB ``WriteBatch`` across the
column families, so a crash leaves either all of a publish request or none of it, and the
journal and ``current`` never disagree. Key and value layouts are in :mod:`sowdb.storage.keys`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from rocksdict import Options, Rdict, WriteBatch, WriteOptions

from sowdb.storage import keys as k

COLUMN_FAMILIES = ("journal", "current", "history", "meta")


@dataclass(slots=True)
class Change:
    """One change in the total order, as the engine hands it to the store.

    Attributes:
        seq: the bookmark.
        op: ``keys.OP_PUBLISH``, ``OP_DELETE`` or ``OP_EXPIRE``.
        payload: the full record after the change (empty for deletes).
        current: also write it to ``current`` (persistent SOW topics only).
        history: also write a version to ``history``.
    """

    seq: int
    timestamp_us: int
    op: int
    topic: str
    sow_key: str
    payload: bytes
    expiry_us: int = 0
    current: bool = False
    history: bool = False


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

    def apply(self, changes: Sequence[Change]) -> None:
        """Write the changes as one atomic batch (journal, current, history, meta)."""
        if not changes:
            return
        cf = self._cf
        journal, current, history = cf["journal"], cf["current"], cf["history"]
        wb = WriteBatch(raw_mode=True)
        put, delete = wb.put, wb.delete
        enc_seq, enc_journal, enc_current = k.encode_seq, k.encode_journal, k.encode_current
        publish = k.OP_PUBLISH
        for c in changes:
            topic_b, key_b = c.topic.encode(), c.sow_key.encode()
            put(enc_seq(c.seq), enc_journal(c.timestamp_us, c.op, c.expiry_us, topic_b, key_b, c.payload), journal)
            if c.current:
                ck = topic_b + b"\x00" + key_b
                if c.op == publish:
                    put(ck, enc_current(c.seq, c.timestamp_us, c.expiry_us, c.payload), current)
                else:
                    delete(ck, current)
            if c.history:
                put(
                    k.history_key(c.topic, c.sow_key, c.seq), k.encode_history(c.op, c.timestamp_us, c.payload), history
                )
        put(k.META_LAST_APPLIED, enc_seq(changes[-1].seq), cf["meta"])
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
