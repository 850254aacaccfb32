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

import gc
import logging
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, NoReturn, cast

import orjson
from rocksdict import Checkpoint, Options, Rdict, WriteBatch, WriteOptions

from sowdb.errors import DataLoss, ResourceExhausted, SowdbError, Unavailable
from sowdb.storage import keys as k
from sowdb.storage.batch import Batch, Families

COLUMN_FAMILIES = ("journal", "current", "history", "meta")

log = logging.getLogger("sowdb.storage")


class StorageFull(ResourceExhausted):
    """The data directory's filesystem is full: nothing can be written until space is freed."""


class StorageFailed(Unavailable):
    """The data directory cannot be written (an I/O error other than a full disk)."""


def _storage_failure(path: str, exc: Exception) -> SowdbError:
    """The domain error of a failed RocksDB write: what happened, where, and what comes next.

    RocksDB reports I/O failures as a plain exception whose text carries the OS error; after
    one, it refuses every write until the database is opened again (measured: freeing space
    alone does not help), which :meth:`Store.reopen` does.
    """
    cause = str(exc).split(": While ")[0].removeprefix("IO error: ")[:200]
    full = "No space left" in cause or "ENOSPC" in cause
    what = (
        f"the data directory {path} is full ({cause}); writes resume once space is freed there"
        if full
        else f"the data directory {path} cannot be written ({cause}); writes resume once it can be"
    )
    message = (
        f"{what}. Nothing of this request was stored; the server retries every second and reports NOT_SERVING meanwhile"
    )
    return StorageFull(message) if full else StorageFailed(message)


_reported: set[str] = set()


def data_loss(path: str, family: str, exc: Exception) -> DataLoss:
    """The error of a damaged column family, logged once per distinct damage (with its file)."""
    detail = str(exc)[:300]
    if detail not in _reported:
        _reported.add(detail)
        log.error("data loss in %s (%s): %s; see `sowd verify`, `sowd rebuild`", path, family, detail)
    return DataLoss(
        f"the {family} data of {path} is damaged ({detail}); the server cannot read it back whole. "
        "`sowd verify` checks the store, `sowd rebuild` recreates current and history from the journal"
    )


def checked_scan(
    cf: Any, start: bytes, path: str, family: str, *, prefix: bytes | None = None
) -> Iterator[tuple[bytes, bytes]]:
    """(key, value) pairs of a column family from ``start`` (while keys start with ``prefix``),
    ending with a check of the iterator's status.

    Raises:
        DataLoss: the scan met a damaged block (RocksDB's iterator became invalid with an error
            status; ``items()`` would simply have stopped there).
    """
    it = cf.iter()
    it.seek(start)
    valid, key, value, step = it.valid, it.key, it.value, it.next
    while valid():
        kb = key()
        if prefix is not None and not kb.startswith(prefix):
            return
        yield kb, value()
        step()
    try:
        it.status()
    except Exception as exc:
        raise data_loss(path, family, exc) from None


class StoreUnusable(OSError):
    """The data directory holds a RocksDB database that cannot be opened as it is (no CURRENT
    file, a damaged manifest, a damaged journal): the message says what is wrong and how to
    recover. Nothing was changed in the directory."""


def _recovery_steps(path: str) -> str:
    return (
        f"To recover: restore the data directory from a checkpoint (`sowd checkpoint`), or run "
        f"`sowd repair --data-dir {path}` (it restores CURRENT from the newest manifest, or rebuilds the "
        "manifest from the data files), then `sowd verify`"
    )


def check_directory(path: str) -> None:
    """Refuse a data directory that holds RocksDB files but no ``CURRENT`` file (the pointer to
    the manifest): RocksDB would create a new, empty database beside the old files (measured:
    the next start served 0 of 1,000 acknowledged records and handed out bookmarks from 1 again).

    Raises:
        StoreUnusable: what is missing, and how to recover.
    """
    p = Path(path)
    if (p / "CURRENT").exists() or not p.is_dir():
        return
    leftovers = sorted(f.name for f in p.iterdir() if f.suffix in (".sst", ".log") or f.name.startswith("MANIFEST-"))
    if leftovers:
        shown = ", ".join(leftovers[:4]) + (", …" if len(leftovers) > 4 else "")
        raise StoreUnusable(
            f"the data directory {path} holds a database ({shown}) but no CURRENT file, so it cannot be opened; "
            "starting would create an empty database beside it. " + _recovery_steps(path)
        )


class StoreLocked(OSError):
    """The data directory is open in another process (RocksDB's ``LOCK`` file is held).

    RocksDB reports this as a bare ``Exception`` whose text mentions the lock file; a server or
    ``sowd rebuild`` started on a directory that a running sowd uses must say so in words.
    """

    def __init__(self, path: str) -> None:
        super().__init__(f"the data directory {path} is in use by another sowd (its lock is held)")
        self.path = path


def _options() -> Options:
    opts = Options(raw_mode=True)
    opts.create_if_missing(True)
    opts.create_missing_column_families(True)
    opts.increase_parallelism(2)
    opts.set_paranoid_checks(True)
    return opts


class Store:
    """A RocksDB database under ``path`` (created when missing); :class:`StoreLocked` when
    another process has it open.

    After a failed write, every later write is refused at once with the same error, without
    touching RocksDB, until :meth:`reopen` succeeds; reads go on. Whoever watches
    (:meth:`watch`, the server's health) is told when writes stop and when they can succeed
    again.
    """

    def __init__(self, path: str | Path, *, fsync: bool = False) -> None:
        Path(path).mkdir(parents=True, exist_ok=True)
        self.path = str(path)
        check_directory(self.path)
        self._write_opts = WriteOptions()
        self._write_opts.sync = fsync
        self._bulk_opts = WriteOptions()
        self._bulk_opts.disable_wal = True  # type: ignore[method-assign,assignment]  # a property; the stub says method
        self.failure: SowdbError | None = None
        self._watchers: list[Callable[[bool], None]] = []
        self._open()
        if self._meta.get(k.META_FORMAT) is None:
            self._meta[k.META_FORMAT] = k.FORMAT_VERSION

    def _open(self) -> None:
        families = {name: Options(raw_mode=True) for name in COLUMN_FAMILIES}
        try:
            self._db = Rdict(self.path, options=_options(), column_families=families)
        except Exception as exc:
            text = str(exc)
            if "lock" in text.lower():
                raise StoreLocked(self.path) from None
            if "Corruption" in text or "No such file" in text or "IO error" in text:
                raise StoreUnusable(
                    f"the data directory {self.path} cannot be opened: {text[:300]}. " + _recovery_steps(self.path)
                ) from None
            raise
        self._cf = {name: self._db.get_column_family_handle(name) for name in COLUMN_FAMILIES}
        self._journal = self._db.get_column_family("journal")
        self._current = self._db.get_column_family("current")
        self._history = self._db.get_column_family("history")
        self._meta = self._db.get_column_family("meta")

    # --- writing -------------------------------------------------------------------------------

    @property
    def writable(self) -> bool:
        return self.failure is None

    def watch(self, callback: Callable[[bool], None]) -> None:
        """Call ``callback(writable)`` whenever writes stop or can succeed again."""
        self._watchers.append(callback)

    def _set_failure(self, failure: SowdbError | None) -> None:
        changed = (failure is None) != (self.failure is None)
        self.failure = failure
        if changed:
            for callback in self._watchers:
                callback(failure is None)

    def batch(self, topic: str, *, current: bool, history: bool) -> Batch:
        """Start an atomic batch of changes to ``topic``.

        Args:
            current: the topic is persistent: keep ``current`` up to date.
            history: the topic keeps history versions.
        """
        return Batch(self._families(), self.write, topic, current=current, history=history)

    def _families(self) -> Families:
        if self.failure is not None:
            self._raise_failure()  # the handles may be gone with a failed reopen
        cf = self._cf
        return Families(cf["journal"], cf["current"], cf["history"], cf["meta"])

    def write(self, wb: WriteBatch, *, bulk: bool = False) -> None:
        """Write one batch (through the WAL unless ``bulk``), or raise the storage failure.

        Raises:
            StorageFull, StorageFailed: the write failed now, or an earlier one did and the
                store has not been reopened since; nothing of ``wb`` was written.
        """
        if self.failure is None:
            try:
                self._db.write(wb, self._bulk_opts if bulk else self._write_opts)
                return
            except Exception as exc:
                # the text only: a log handler that keeps records (tests, memory handlers) must not
                # keep the exception, whose traceback holds the batch that holds the database
                log.error("a write to %s failed: %s; writes are refused until it can be reopened", self.path, str(exc))
                self._set_failure(_storage_failure(self.path, exc))
        self._raise_failure()

    def _raise_failure(self) -> NoReturn:
        """Raise the storage failure: a fresh exception each time, since one kept and raised
        again would collect tracebacks whose frames hold write batches, which hold the database
        open (and its lock)."""
        failure = self.failure
        assert failure is not None
        raise type(failure)(failure.message)

    def reopen(self) -> bool:
        """Try to leave the failed state: RocksDB refuses writes after an I/O error until the
        database is opened again (its write-ahead log is replayed, its lock released and
        retaken). Returns whether the store is writable; on failure it stays failed."""
        if self.failure is None:
            return True
        self._close_quietly()
        gc.collect()  # the last references to the old database may sit in cycles (tracebacks)
        try:
            self._open()
        except Exception as exc:
            log.debug("storage still unavailable: %s", str(exc))
            return False
        log.warning("storage writable again: %s reopened", self.path)
        self._set_failure(None)
        return True

    def _close_quietly(self) -> None:
        """Close a failed database, which reports its error again at every close (the lock is
        released all the same)."""
        handles = [self.__dict__.pop(name, None) for name in ("_journal", "_current", "_history", "_meta", "_db")]
        self._cf = {}
        for handle in handles:  # dropped after closing: a closed Rdict keeps its lock until it is freed
            try:
                if handle is not None:
                    handle.close()
            except Exception as exc:
                log.debug("closing a failed store: %s", str(exc))

    # --- the journal ---------------------------------------------------------------------------

    def _scan(self, family: str, start: bytes, *, prefix: bytes | None = None) -> Iterator[tuple[bytes, bytes]]:
        cf = {"journal": self._journal, "current": self._current, "history": self._history}[family]
        return checked_scan(cf, start, self.path, family, prefix=prefix)

    def _edge(self, cf: Any, family: str, *, last: bool) -> bytes | None:
        it = cf.iter()
        if last:
            it.seek_to_last()
        else:
            it.seek_to_first()
        if it.valid():
            return cast(bytes, it.key())
        try:
            it.status()
        except Exception as exc:
            raise data_loss(self.path, family, exc) from None
        return None

    def last_sequence(self) -> int:
        """The highest sequence in the journal (0 when empty)."""
        key = self._edge(self._journal, "journal", last=True)
        return k.decode_seq(key) if key else 0

    def first_sequence(self) -> int:
        """The oldest sequence in the journal (0 when empty)."""
        key = self._edge(self._journal, "journal", last=False)
        return k.decode_seq(key) if key else 0

    def iter_journal(self, after: int = 0, *, topics: Iterable[str] | None = None) -> Iterator[k.JournalEntry]:
        """Journal entries with a sequence greater than ``after``, in order; only those of
        ``topics`` when given (the others are skipped without being decoded)."""
        wanted = None if topics is None else {t.encode() for t in topics}
        head = k.JOURNAL_HEAD.size
        lengths = k.JOURNAL_LENGTHS.unpack_from
        for key, value in self._scan("journal", k.encode_seq(after + 1)):
            if wanted is not None and value[head : head + lengths(value, k.JOURNAL_LENGTHS_AT)[0]] not in wanted:
                continue
            yield k.decode_journal(key, value)

    def iter_journal_raw(self, after: int = 0) -> Iterator[tuple[bytes, bytes]]:
        """Journal (key, value) bytes after ``after``, for :mod:`sowdb.storage.rebuild`."""
        return self._scan("journal", k.encode_seq(after + 1))

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
        self.write(wb)
        self._journal.compact_range(k.encode_seq(0), k.encode_seq(upto + 1))

    def journal_bytes(self) -> int:
        """The journal's size: its SST files (compressed) and its memtables."""
        j = self._journal
        return int(j.property_int_value("rocksdb.total-sst-files-size") or 0) + int(
            j.property_int_value("rocksdb.cur-size-all-mem-tables") or 0
        )

    def roll_back(
        self, upto: int, current: dict[tuple[str, str], tuple[int, int, int, bytes] | None], history: set[str]
    ) -> None:
        """Remove journal entries after ``upto`` and what they wrote: a write reported as
        failed that reached the write-ahead log anyway (found after :meth:`reopen`), so that
        the store says what its clients were told.

        Args:
            current: the ``current`` value to restore per (topic, SowKey) written by those
                entries, as (bookmark, timestamp_us, expiry_us, payload); None deletes it.
            history: the topics whose ``history`` those entries wrote.
        """
        entries = list(self.iter_journal(upto))
        if not entries:
            return
        wb = WriteBatch(raw_mode=True)
        wb.delete_range(k.encode_seq(upto + 1), k.encode_seq(2**64 - 1), self._cf["journal"])
        for (topic, sow_key), value in current.items():
            if value is None:
                wb.delete(k.current_key(topic, sow_key), self._cf["current"])
            else:
                wb.put(k.current_key(topic, sow_key), k.encode_current(*value), self._cf["current"])
        for e in entries:
            if e.topic in history:
                wb.delete(k.history_key(e.topic, e.sow_key, e.seq), self._cf["history"])
        marker = k.encode_seq(upto)
        wb.put(k.APPLIED_MARKER, marker, self._cf["current"])
        wb.put(k.APPLIED_MARKER, marker, self._cf["history"])
        self.write(wb)
        log.warning(
            "rolled back journal entries %d..%d, written by a request reported as failed", upto + 1, entries[-1].seq
        )

    # --- current and history -------------------------------------------------------------------

    def last_applied(self) -> tuple[int, int]:
        """The last journal sequence applied to ``current`` and to ``history`` (0 when the family
        is new, empty or was lost)."""
        out = []
        for cf in (self._current, self._history):
            v = cf.get(k.APPLIED_MARKER)
            out.append(k.decode_seq(v) if v else 0)
        return out[0], out[1]

    def load_current(self) -> Iterator[tuple[str, str, k.CurrentValue]]:
        """Every ``current`` record of every topic as (topic, SowKey, value), in key order."""
        for key, value in self._scan("current", k.FIRST_RECORD_KEY):
            topic, sow_key = k.split_current_key(key)
            yield topic, sow_key, k.decode_current(value)

    def load_records(self, topic: str) -> Iterator[tuple[str, k.CurrentValue]]:
        """Every ``current`` record of ``topic`` as (SowKey, value), in key order."""
        prefix = k.topic_prefix(topic)
        cut = len(prefix)
        unpack = k.CURRENT_HEAD.unpack_from
        start = k.CURRENT_HEAD.size
        for key, value in self._scan("current", prefix, prefix=prefix):
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
        for key, value in self._scan("history", prefix, prefix=prefix):
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
        for key, value in self._scan("history", k.FIRST_RECORD_KEY):
            yield k.decode_history(key, value)

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
            try:
                it.status()
            except Exception as exc:
                raise data_loss(self.path, "history", exc) from None
            return None
        key = cast(bytes, it.key())
        if not key.startswith(record_prefix):
            return None
        return key, k.HISTORY_HEAD.unpack_from(cast(bytes, it.value()))[1]

    def record_counts(self) -> dict[str, int]:
        """Each persistent topic's number of records in ``current``, as written with its changes."""
        prefix = k.record_count_key("")
        out = {}
        it = self._meta.iter()
        it.seek(prefix)
        while it.valid():
            key = cast(bytes, it.key())
            if not key.startswith(prefix):
                break
            out[key[len(prefix) :].decode()] = k.decode_seq(cast(bytes, it.value()))
            it.next()
        return out

    def producer_seqs(self) -> dict[str, int]:
        """Each idempotent producer's last applied sequence (J-4), as written with its messages."""
        out = {}
        it = self._meta.iter()
        it.seek(k.PRODUCER_PREFIX)
        while it.valid():
            key = cast(bytes, it.key())
            if not key.startswith(k.PRODUCER_PREFIX):
                break
            out[key[len(k.PRODUCER_PREFIX) :].decode()] = k.decode_seq(cast(bytes, it.value()))
            it.next()
        return out

    def write_producer_seqs(self, seqs: dict[str, int]) -> None:
        """Make the stored producer sequences exactly ``seqs`` (after a roll-back)."""
        wb = WriteBatch(raw_mode=True)
        cf = self._cf["meta"]
        wb.delete_range(k.PRODUCER_PREFIX, k.PRODUCER_PREFIX[:-1] + b"\x01", cf)
        for producer_id, seq in seqs.items():
            wb.put(k.producer_key(producer_id), k.encode_seq(seq), cf)
        self.write(wb)

    def write_record_counts(self, counts: dict[str, int]) -> None:
        """Record the topics' counts (after a rebuild or a replay, which write ``current`` in bulk)."""
        wb = WriteBatch(raw_mode=True)
        for topic, count in counts.items():
            wb.put(k.record_count_key(topic), k.encode_seq(count), self._cf["meta"])
        self.write(wb)

    def count_records(self, topic: str) -> int:
        """Count a topic's records in ``current`` (a scan of its keys)."""
        return sum(1 for _ in self._scan("current", k.topic_prefix(topic), prefix=k.topic_prefix(topic)))

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
        self.write(wb)

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
            self.write(wb)

    def reset_derived(self) -> None:
        """Empty ``current`` and ``history`` (markers included), for a rebuild from the journal.

        The two families are dropped and created anew rather than range-deleted: a damaged file
        goes with them, where a range deletion would leave it to be read (and fail) again.
        """
        for name in ("current", "history"):
            self.__dict__.pop(f"_{name}").close()
            del self._cf[name]
            self._db.drop_column_family(name)
            self._db.create_column_family(name, Options(raw_mode=True))
            self._cf[name] = self._db.get_column_family_handle(name)
        self._current = self._db.get_column_family("current")
        self._history = self._db.get_column_family("history")

    def bulk_batch(self) -> tuple[WriteBatch, Families]:
        """An empty WriteBatch and the family handles, for the replay of
        :mod:`sowdb.storage.rebuild` (which writes it with ``write(wb, bulk=True)``)."""
        return WriteBatch(raw_mode=True), self._families()

    def finish_recovery(self) -> None:
        """Make a replay's writes (done without the WAL) durable."""
        self._current.flush(wait=True)
        self._history.flush(wait=True)

    def checkpoint(self, directory: str) -> int:
        """Write a consistent copy of every column family into ``directory`` (which must not
        exist): RocksDB flushes and hard-links the files; returns their size in bytes."""
        self._db.flush(wait=True)
        Checkpoint(self._db).create_checkpoint(directory)
        return sum(f.stat().st_size for f in Path(directory).iterdir() if f.is_file())

    def close(self) -> None:
        """Flush and close; the store is unusable afterwards."""
        if self.failure is not None:
            self._close_quietly()  # the log cannot be flushed; what was acknowledged is in it
            return
        self._db.flush_wal(True)
        # Column-family views hold the database open; drop them so that close releases the lock.
        for cf in (self._journal, self._current, self._history, self._meta):
            cf.close()
        del self._journal, self._current, self._history, self._meta
        self._cf.clear()
        self._db.close()


def repair(path: str) -> str:
    """``sowd repair``: make a data directory that cannot be opened openable again, saying what
    was done. A missing ``CURRENT`` is restored to name the newest manifest (what RocksDB itself
    would have read); otherwise RocksDB's repair rebuilds the manifest from the data files
    (blocks it cannot read are dropped). Run ``sowd verify`` after it; a server started on the
    result checks ``current`` against the journal and rebuilds what does not agree.
    """
    p = Path(path)
    manifests = sorted(p.glob("MANIFEST-*"), key=lambda m: int(m.name.split("-")[1]))
    if not (p / "CURRENT").exists() and manifests:
        newest = manifests[-1].name
        tmp = p / "CURRENT.repair"
        tmp.write_text(newest + "\n")
        tmp.rename(p / "CURRENT")
        try:
            Store(path).close()
            return f"restored CURRENT to name {newest}, the newest manifest; the database opens"
        except OSError:
            (p / "CURRENT").unlink()  # that manifest is not usable either: a full repair below
    Rdict.repair(path, _options())
    Store(path).close()
    return "rebuilt the manifest from the data files (RocksDB repair); unreadable blocks, if any, were dropped"
