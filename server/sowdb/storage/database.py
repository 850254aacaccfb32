"""One RocksDB database: its four column families, its lock, and its failure state.

After a failed write (a full disk, an I/O error) every later write is refused at once with the
same error, without touching RocksDB, until :meth:`Database.reopen` succeeds (RocksDB itself
refuses all writes after an I/O error until the database is opened again); reads go on. Whoever
watches (:meth:`Database.watch`, the server's health) is told when writes stop and resume.
:class:`~sowdb.storage.store.Store` builds the engine's reads and writes on top of it.
"""

from __future__ import annotations

import gc
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NoReturn, cast

from rocksdict import BlockBasedOptions, Cache, Checkpoint, Options, Rdict, WriteBatch, WriteOptions

from sowdb.config.model import DEFAULT_BLOCK_CACHE_BYTES, DEFAULT_MEMTABLE_BYTES, ServerConfig
from sowdb.errors import SowdbError
from sowdb.storage.batch import Families
from sowdb.storage.failures import (
    StoreLocked,
    StoreUnusable,
    check_directory,
    data_loss,
    disk_full,
    recovery_steps,
    storage_failure,
)
from sowdb.storage.scan import checked_scan

COLUMN_FAMILIES = ("journal", "current", "history", "meta")
JOURNAL_SHARE = 8
"""The journal's write buffer is ``memtable_bytes`` divided by this (4 MiB of the default 32),
the other families' by 2 (issue 39). Its keys ascend, so its flushed files never overlap and
RocksDB moves them down its levels without rewriting them: a small buffer costs it no CPU
(publishing 600k orders and updates: 1.01x the records per CPU-second of a 16 MiB buffer), where
the current records' buffer, keys in any order, is rewritten by every compaction (8 MiB for
all: 0.77x). At 16 MiB it held ~10 B a record more after loading a million orders."""

log = logging.getLogger("sowdb.storage")


def options(memtable_bytes: int = DEFAULT_MEMTABLE_BYTES) -> Options:
    """The database's options; ``memtable_bytes`` bounds the write buffers of all column
    families together (RocksDB flushes the largest when they reach it)."""
    opts = Options(raw_mode=True)
    opts.create_if_missing(True)
    opts.create_missing_column_families(True)
    opts.increase_parallelism(2)
    opts.set_paranoid_checks(True)
    opts.set_db_write_buffer_size(memtable_bytes)
    return opts


class Memory:
    """RocksDB's memory, sized by the config (issue 30): each family's write buffer at half of
    ``memtable_bytes`` (the journal and the current records take the writes) but the journal's
    at :data:`JOURNAL_SHARE` of it, and one block cache of ``block_cache_bytes`` shared by the
    families (0: none). RocksDB's defaults, 64 MB of write buffer and a 32 MB cache per family,
    held ~86 B a record after loading a million orders and 64 B after a restart, whose scans
    filled two caches."""

    def __init__(
        self, memtable_bytes: int = DEFAULT_MEMTABLE_BYTES, block_cache_bytes: int = DEFAULT_BLOCK_CACHE_BYTES
    ) -> None:
        self.memtable_bytes = memtable_bytes
        self.table = BlockBasedOptions()
        if block_cache_bytes > 0:
            self.table.set_block_cache(Cache(block_cache_bytes))
        else:
            self.table.disable_cache()

    def family(self, name: str) -> Options:
        """The options of column family ``name``."""
        opts = Options(raw_mode=True)
        share = JOURNAL_SHARE if name == "journal" else 2
        opts.set_write_buffer_size(max(self.memtable_bytes // share, 1 << 20))
        opts.set_block_based_table_factory(self.table)
        return opts


def store_memory(server: ServerConfig) -> Memory:
    """RocksDB's memory as the ``[server]`` table sizes it."""
    return Memory(server.memtable_bytes, server.block_cache_bytes)


class Database:
    """The RocksDB database under ``path`` (created when missing)."""

    def __init__(self, path: str | Path, *, fsync: bool = False, memory: Memory | None = None) -> None:
        Path(path).mkdir(parents=True, exist_ok=True)
        self.path = str(path)
        self.memory = memory or Memory()
        check_directory(self.path)
        self._write_opts = WriteOptions()
        self._write_opts.sync = fsync
        self._bulk_opts = WriteOptions()
        self._bulk_opts.disable_wal = True  # type: ignore[method-assign,assignment]  # a property; the stub says method
        self.failure: SowdbError | None = None
        self._watchers: list[Callable[[bool], None]] = []
        self._open()

    def _open(self) -> None:
        families = {name: self.memory.family(name) for name in COLUMN_FAMILIES}
        try:
            self._db = Rdict(self.path, options=options(self.memory.memtable_bytes), column_families=families)
        except Exception as exc:
            text = str(exc)
            if "lock" in text.lower():
                raise StoreLocked(self.path) from None
            if disk_full(text):  # opening writes (the log is replayed into a new file)
                raise StoreUnusable(
                    f"the data directory {self.path} is full ({text[:200]}), and opening the database needs to write; "
                    "free space there and start again. The data is intact: nothing needs repairing"
                ) from None
            if "Corruption" in text or "No such file" in text or "IO error" in text:
                raise StoreUnusable(
                    f"the data directory {self.path} cannot be opened: {text[:300]}. " + recovery_steps(self.path)
                ) from None
            raise
        self._handles = {name: self._db.get_column_family_handle(name) for name in COLUMN_FAMILIES}
        self._views = {name: self._db.get_column_family(name) for name in COLUMN_FAMILIES}

    def family(self, name: str) -> Any:
        """A column family, to read (``get``, ``iter``) or to put single values."""
        return self._views[name]

    def families(self) -> Families:
        """The family handles a write batch puts into."""
        if self.failure is not None:
            self._raise_failure()  # the handles may be gone with a failed reopen
        h = self._handles
        return Families(h["journal"], h["current"], h["history"], h["meta"])

    def handle(self, name: str) -> Any:
        return self._handles[name]

    def scan(self, family: str, start: bytes, *, prefix: bytes | None = None) -> Iterator[tuple[bytes, bytes]]:
        return checked_scan(self._views[family], start, self.path, family, prefix=prefix)

    def edge(self, family: str, *, last: bool) -> bytes | None:
        """The first (or last) key of a family; None when it is empty."""
        it = self._views[family].iter()
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

    def live_files(self) -> list[dict[str, Any]]:
        files: list[dict[str, Any]] = self._db.live_files()
        return files

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

    def write(self, wb: WriteBatch, *, bulk: bool = False) -> None:
        """Write one batch (through the WAL unless ``bulk``), or raise the storage failure.

        Raises:
            StorageFull, StorageFailed: the write failed now, or an earlier one did and the
                database has not been reopened since; nothing of ``wb`` was written.
        """
        if self.failure is None:
            try:
                self._db.write(wb, self._bulk_opts if bulk else self._write_opts)
                return
            except Exception as exc:
                # the text only: a log handler that keeps records (tests, memory handlers) must not
                # keep the exception, whose traceback holds the batch that holds the database
                log.error("a write to %s failed: %s; writes are refused until it can be reopened", self.path, str(exc))
                self._set_failure(storage_failure(self.path, exc))
        self._raise_failure()

    def _raise_failure(self) -> NoReturn:
        """Raise the storage failure: a fresh exception each time, since one kept and raised
        again would collect tracebacks whose frames hold write batches, which hold the database
        open (and its lock)."""
        failure = self.failure
        assert failure is not None
        raise type(failure)(failure.message)

    def reopen(self) -> bool:
        """Try to leave the failed state by opening the database again (its write-ahead log is
        replayed, its lock released and retaken). Returns whether it is writable."""
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
        released all the same, once the handles are freed)."""
        handles = [*self._views.values(), self.__dict__.pop("_db", None)]
        self._views, self._handles = {}, {}
        for handle in handles:
            try:
                if handle is not None:
                    handle.close()
            except Exception as exc:
                log.debug("closing a failed store: %s", str(exc))

    def recreate(self, name: str) -> None:
        """Drop a column family and create it empty: its files, damaged or not, go with it."""
        self._views.pop(name).close()
        del self._handles[name]
        self._db.drop_column_family(name)
        self._db.create_column_family(name, self.memory.family(name))
        self._handles[name] = self._db.get_column_family_handle(name)
        self._views[name] = self._db.get_column_family(name)

    def flush(self, *names: str) -> None:
        """Flush the memtables of ``names`` (every family when none is named) to SST files."""
        for name in names or COLUMN_FAMILIES:
            self._views[name].flush(wait=True)

    def checkpoint(self, directory: str) -> int:
        """Write a consistent copy of every column family into ``directory`` (which must not
        exist): RocksDB flushes and hard-links the files; returns their size in bytes."""
        self._db.flush(wait=True)
        Checkpoint(self._db).create_checkpoint(directory)
        return sum(f.stat().st_size for f in Path(directory).iterdir() if f.is_file())

    def close(self) -> None:
        """Flush and close; unusable afterwards."""
        if self.failure is not None:
            self._close_quietly()  # the log cannot be flushed; what was acknowledged is in it
            return
        self._db.flush_wal(True)
        # Column-family views hold the database open; drop them so that close releases the lock.
        for view in self._views.values():
            view.close()
        self._views, self._handles = {}, {}
        self._db.close()
