"""Scans of a column family that never mistake a damaged block for the end of the data."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from rocksdict import ReadOptions

from sowdb.storage.failures import data_loss


def _scan_options() -> ReadOptions:
    """A scan's read options: its blocks stay out of the block cache. A scan reads each block
    once (start-up's load of every record, a journal replay); caching them only pushes out the
    blocks point reads come back to, and after a restart held the whole cache (8 MB, ~8 B a
    record at a million records) for nothing (issue 39)."""
    opts = ReadOptions()
    opts.fill_cache(False)  # type: ignore[call-arg]  # the stub leaves out its argument (a bool)
    return opts


def checked_scan(
    cf: Any, start: bytes, path: str, family: str, *, prefix: bytes | None = None
) -> Iterator[tuple[bytes, bytes]]:
    """(key, value) pairs of a column family from ``start`` (while keys start with ``prefix``),
    ending with a check of the iterator's status.

    Raises:
        DataLoss: the scan met a damaged block (RocksDB's iterator became invalid with an error
            status; ``items()`` would simply have stopped there).
    """
    it = cf.iter(_scan_options())
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
