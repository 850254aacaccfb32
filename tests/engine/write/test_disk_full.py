"""Disk full (E-2, J-1) on the engine: a write reported as failed whose batch reached the log
anyway is rolled back when storage recovers (through the server: ``tests/api/test_disk_full.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sowdb.config import config_from_dict
from sowdb.engine import Engine, InMessage
from sowdb.storage import StorageFull, Store, StoreUnusable, database


def test_a_write_reported_failed_that_reached_the_log_is_rolled_back(tmp_path: Path) -> None:
    """A write can fail after its batch reached RocksDB's log (its fsync, say); after the
    store is reopened, the journal then holds entries nobody was told about. They are removed
    with what they wrote, so the store holds exactly what was acknowledged."""
    topics = {"topic": [{"name": "book", "key": ["/id"], "history": {"window": "1d"}}]}
    cfg = config_from_dict({**topics, "server": {"data_dir": str(tmp_path)}}, source="<tests>")
    engine = Engine.open(cfg, Store(tmp_path))
    engine.publish("book", [InMessage(b'{"id": 1, "v": 1}'), InMessage(b'{"id": 2, "v": 1}')])
    # what a failed request would have written: an update of 1 and a new record 3
    landed = engine.store.batch("book", current=True, history=True)
    landed.publish_many(3, 0, ["1", "3"], [b'{"id":1,"v":2}', b'{"id":3,"v":2}'])
    landed.commit()
    del landed  # a batch holds the database open, as the writer's would not after its request
    engine.store.failure = StorageFull("full")  # the write was reported as failed
    assert engine.writer.recover_storage()
    assert engine.store.last_sequence() == 2
    engine.close()
    again = Engine.open(cfg, Store(tmp_path))  # what a restart sees
    assert {k: r.raw for k, r in again.topics.sow["book"].records.items()} == {
        "1": b'{"id": 1, "v": 1}',
        "2": b'{"id": 2, "v": 1}',
    }
    assert [(h.sow_key, h.seq) for h in again.store.iter_history()] == [("1", 1), ("2", 2)]
    assert again.publish("book", [InMessage(b'{"id": 3, "v": 3}')]) == (3, 3)
    again.close()


def test_a_restart_on_a_still_full_disk_says_the_disk_is_full(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Opening a database writes (its log is replayed into a new file): on a full disk that
    fails with RocksDB's I/O error. The refusal must say that the disk is full and that freeing
    space is the fix — not send the operator to `sowd repair` for a store that is intact."""
    Store(tmp_path).close()

    def full(*args: object, **kw: object) -> None:
        raise Exception("IO error: No space left on device: While appending to file: 000008.sst")

    monkeypatch.setattr(database, "Rdict", full)
    with pytest.raises(StoreUnusable) as refused:
        Store(tmp_path)
    message = str(refused.value)
    assert f"the data directory {tmp_path} is full" in message
    assert "free space" in message
    assert "sowd repair" not in message
