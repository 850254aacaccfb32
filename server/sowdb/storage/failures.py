"""How storage failures reach the engine: as domain errors that say what happened, where, and
what to do — a full disk or a failed write (:class:`StorageFull`, :class:`StorageFailed`), a
damaged block (:class:`~sowdb.errors.DataLoss`), a data directory that cannot be opened as it is
(:class:`StoreUnusable`) or that another process holds (:class:`StoreLocked`)."""

from __future__ import annotations

import logging
from pathlib import Path

from sowdb.errors import DataLoss, ResourceExhausted, SowdbError, Unavailable

log = logging.getLogger("sowdb.storage")


class StorageFull(ResourceExhausted):
    """The data directory's filesystem is full: nothing can be written until space is freed."""


class StorageFailed(Unavailable):
    """The data directory cannot be written (an I/O error other than a full disk)."""


def disk_full(text: str) -> bool:
    """Whether RocksDB's error text is the OS saying the filesystem is full."""
    return "No space left" in text or "ENOSPC" in text


def storage_failure(path: str, exc: Exception) -> SowdbError:
    """The domain error of a failed RocksDB write: what happened, where, and what comes next.

    RocksDB reports I/O failures as a plain exception whose text carries the OS error; after
    one, it refuses every write until the database is opened again (measured: freeing space
    alone does not help), which :meth:`Store.reopen` does.
    """
    cause = str(exc).split(": While ")[0].removeprefix("IO error: ")[:200]
    full = disk_full(cause)
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


class StoreUnusable(OSError):
    """The data directory holds a RocksDB database that cannot be opened as it is (no CURRENT
    file, a damaged manifest, a damaged journal): the message says what is wrong and how to
    recover. Nothing was changed in the directory."""


def recovery_steps(path: str) -> str:
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
            "starting would create an empty database beside it. " + recovery_steps(path)
        )


class StoreLocked(OSError):
    """The data directory is open in another process (RocksDB's ``LOCK`` file is held).

    RocksDB reports this as a bare ``Exception`` whose text mentions the lock file; a server or
    ``sowd rebuild`` started on a directory that a running sowd uses must say so in words.
    """

    def __init__(self, path: str) -> None:
        super().__init__(f"the data directory {path} is in use by another sowd (its lock is held)")
        self.path = path
