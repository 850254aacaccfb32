"""RocksDB's memory is sized by the config (issue 30): the write buffers of all column families
together by ``memtable_bytes``, one block cache shared by them by ``block_cache_bytes``."""

from __future__ import annotations

from pathlib import Path

import pytest

from sowdb.config import ConfigError, config_from_dict
from sowdb.storage import Store, store_memory

MIB = 1 << 20


def _store(tmp_path: Path, **server: int) -> Store:
    config = config_from_dict({"server": {"data_dir": str(tmp_path), **server}}, source="<test>")
    return Store(tmp_path, memory=store_memory(config.server))


def _memtables(store: Store) -> int:
    views = [store.db.family(f) for f in ("journal", "current")]
    return sum(v.property_int_value("rocksdb.size-all-mem-tables") or 0 for v in views)


def test_write_buffers_stay_within_memtable_bytes(tmp_path: Path) -> None:
    """16 MB written into two families stays in at most ``memtable_bytes`` (and the buffers
    being flushed): RocksDB's defaults would hold all of it in memory (64 MB a family)."""
    store = _store(tmp_path, memtable_bytes=2 * MIB)
    try:
        value = b"x" * 1000
        for family in ("journal", "current"):
            view = store.db.family(family)
            for i in range(8000):
                view[i.to_bytes(8, "big")] = value
        assert _memtables(store) <= 2 * 2 * MIB
    finally:
        store.close()


def test_the_journal_buffers_an_eighth_of_memtable_bytes(tmp_path: Path) -> None:
    """The journal's keys ascend: its buffer is flushed at 1/8 of ``memtable_bytes`` (4 MiB of
    the default 32), where the current records' keeps half (issue 39)."""
    store = _store(tmp_path)
    try:
        value = b"x" * 1000
        for family in ("journal", "current"):
            view = store.db.family(family)
            for i in range(6000):  # ~6 MB each
                view[i.to_bytes(8, "big")] = value
        journal, current = (
            store.db.family(f).property_int_value("rocksdb.cur-size-active-mem-table") or 0
            for f in ("journal", "current")
        )
        assert journal <= 4 * MIB < 5 * MIB < current
    finally:
        store.close()


def test_one_block_cache_of_block_cache_bytes_for_every_family(tmp_path: Path) -> None:
    """Reading one family fills the cache that every family reports: one cache, not one each."""
    store = _store(tmp_path, block_cache_bytes=3 * MIB)
    try:
        current, journal = store.db.family("current"), store.db.family("journal")
        for i in range(4000):
            current[i.to_bytes(8, "big")] = b"y" * 1000
        store.db.flush("current")
        assert sum(1 for _ in current.items()) >= 4000
        assert current.property_int_value("rocksdb.block-cache-capacity") == 3 * MIB
        used = journal.property_int_value("rocksdb.block-cache-usage") or 0
        assert MIB < used <= 3 * MIB
    finally:
        store.close()


def test_scans_leave_the_block_cache_to_point_reads(tmp_path: Path) -> None:
    """Start-up's load scans every record once: its blocks stay out of the cache (after a
    restart they filled it for nothing, issue 39); a point read still caches its block."""
    store = _store(tmp_path, block_cache_bytes=3 * MIB)
    try:
        current = store.db.family("current")
        for i in range(4000):
            current[i.to_bytes(8, "big")] = b"y" * 1000
        store.db.flush("current")
        assert sum(1 for _ in store.db.scan("current", b"")) == 4000
        assert (current.property_int_value("rocksdb.block-cache-usage") or 0) < 64 * 1024
        assert current[(7).to_bytes(8, "big")] == b"y" * 1000
        assert (current.property_int_value("rocksdb.block-cache-usage") or 0) > 0
    finally:
        store.close()


@pytest.mark.parametrize(
    ("setting", "value", "says"),
    [
        ("memtable_bytes", 1000, "memtable_bytes: at least 1048576"),
        ("block_cache_bytes", -1, "block_cache_bytes: 0 (no cache) or more"),
    ],
)
def test_bad_sizes_are_refused(tmp_path: Path, setting: str, value: int, says: str) -> None:
    with pytest.raises(ConfigError, match=says.replace("(", r"\(").replace(")", r"\)")):
        config_from_dict({"server": {"data_dir": str(tmp_path), setting: value}}, source="<test>")
