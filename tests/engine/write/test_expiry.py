"""Expiration (X-1) when the storage fails under the sweep: nothing due is forgotten."""

from __future__ import annotations

from pathlib import Path

import pytest

from sowdb.config import config_from_dict
from sowdb.engine import Engine, InMessage
from sowdb.storage import StorageFull, Store
from tests.support import ManualClock, S


def test_expirations_due_when_a_write_fails_stay_queued_for_every_topic(tmp_path: Path) -> None:
    """``pop_due`` takes every due entry at once; when the first topic's expirations cannot be
    written (a full disk), the other topics' due records must stay queued too, and expire once
    the storage recovers, not at the next restart."""
    topics = {
        "topic": [
            {"name": "a", "key": ["/id"], "expiration": "10s"},
            {"name": "b", "key": ["/id"], "expiration": "10s"},
        ]
    }
    cfg = config_from_dict({**topics, "server": {"data_dir": str(tmp_path)}}, source="<tests>")
    clock = ManualClock()
    engine = Engine.open(cfg, Store(tmp_path), clock=clock)
    engine.publish("a", [InMessage(b'{"id": 1}'), InMessage(b'{"id": 2}')])
    engine.publish("b", [InMessage(b'{"id": 1}')])
    clock.now += 11 * S
    engine.store.failure = StorageFull("full")  # every write fails now
    with pytest.raises(StorageFull):
        engine.writer.expire_due()
    assert len(engine.writer.expiry) == 3  # nothing due was dropped
    assert engine.writer.recover_storage()
    assert engine.writer.expire_due() == 3
    assert not engine.topics.sow["a"].records
    assert not engine.topics.sow["b"].records
    engine.close()
