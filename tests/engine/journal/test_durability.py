"""A topic's durability or history changed in the config between runs: ``current`` and
``history`` follow (rebuilt from the journal for what became kept, cleared for what stopped)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from sowdb.config import config_from_dict
from sowdb.engine import Engine, InMessage, QueryOptions, RecordBatch
from sowdb.storage import Store


def open_engine(tmp_path: Path, durability: str, history: bool = False) -> Engine:
    topic: dict[str, Any] = {"name": "book", "key": ["/id"], "durability": durability}
    if history:
        topic["history"] = {"window": "1d"}
    other = {"name": "keep", "key": ["/id"]}  # persistent throughout: never rebuilt or cleared
    raw = {"topic": [topic, other], "server": {"data_dir": str(tmp_path)}}
    return Engine.open(config_from_dict(raw, source="<tests>"), Store(tmp_path))


def pub(engine: Engine, topic: str, *docs: dict[str, Any]) -> int:
    return engine.publish(topic, [InMessage(orjson.dumps(d)) for d in docs])[1]


async def state(engine: Engine, topic: str = "book", bookmark: str = "") -> dict[str, Any]:
    out = {}
    async for event in engine.sow(QueryOptions(topic=topic, batch_size=1000, bookmark=bookmark)):
        if isinstance(event, RecordBatch):
            out.update({r.sow_key: orjson.loads(r.raw)["v"] for r in event.records})
    return out


async def test_a_transient_topic_made_persistent_keeps_its_state(tmp_path: Path) -> None:
    engine = open_engine(tmp_path, "transient")
    pub(engine, "book", {"id": 1, "v": "a"}, {"id": 2, "v": "b"})
    pub(engine, "keep", {"id": 1, "v": "k"})
    engine.sow_delete("book", sow_keys=["2"])
    engine.close()
    for _ in range(2):  # the first start rebuilds it from the journal, the second loads it
        engine = open_engine(tmp_path, "persistent")
        assert await state(engine) == {"1": "a"}
        assert await state(engine, "keep") == {"1": "k"}
        assert engine.store.stored_topics() == {"book": False, "keep": False}
        engine.close()


async def test_deletes_made_while_transient_stay_deleted_when_persistent_again(tmp_path: Path) -> None:
    """Back to persistent after a transient spell: what ``current`` held before the spell must
    not come back."""
    engine = open_engine(tmp_path, "persistent")
    pub(engine, "book", {"id": 1, "v": "a"}, {"id": 2, "v": "b"})
    engine.close()
    engine = open_engine(tmp_path, "transient")
    engine.sow_delete("book", sow_keys=["1"])
    pub(engine, "book", {"id": 2, "v": "b2"}, {"id": 3, "v": "c"})
    engine.close()
    engine = open_engine(tmp_path, "persistent")
    assert await state(engine) == {"2": "b2", "3": "c"}
    engine.close()


async def test_history_turned_on_covers_the_journal(tmp_path: Path) -> None:
    engine = open_engine(tmp_path, "persistent")
    first = pub(engine, "book", {"id": 1, "v": "a"})
    pub(engine, "book", {"id": 1, "v": "b"})
    engine.close()
    engine = open_engine(tmp_path, "persistent", history=True)
    assert await state(engine, bookmark=str(first)) == {"1": "a"}
    engine.close()
    engine = open_engine(tmp_path, "persistent")  # history off again: its versions are dropped
    assert not list(engine.store.load_history("book"))
    engine.close()


async def test_a_store_that_never_recorded_its_topics_is_not_rebuilt(tmp_path: Path) -> None:
    """A data directory from before the record: taken as matching the config, then recorded."""
    engine = open_engine(tmp_path, "persistent")
    pub(engine, "book", {"id": 1, "v": "a"})
    engine.store.db.family("meta").delete(b"stored_topics")
    engine.store.reset_topics("current", ["book"])  # would come back if it were rebuilt
    engine.store.write_record_counts({"book": 0})  # (consistently: an uneven count is damage, rebuilt)
    engine.close()
    engine = open_engine(tmp_path, "persistent")
    assert await state(engine) == {}
    assert engine.store.stored_topics() == {"book": False, "keep": False}
    engine.close()
