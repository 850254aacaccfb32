"""Journal replays (H-3, H-4) and journal range reads (SPEC §9) against journal retention: a
trim that runs after a replay was placed but before it read the journal ends the replay with
OUT_OF_RANGE, never a replay that silently starts later (issue 27)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from sowdb.engine import Engine, InMessage, QueryOptions
from sowdb.engine.events import Completed, Deliveries, Subscribed
from sowdb.engine.journal import replay as replay_module
from sowdb.errors import OutOfRange
from tests.support import open_engine

TOPICS: dict[str, Any] = {"topic": [{"name": "book", "key": ["/id"], "history": {"window": "1d"}}]}


def publish_ten(engine: Engine) -> None:
    for i in range(1, 11):
        engine.publish("book", [InMessage(orjson.dumps({"id": i}))])


async def until_live(events: Any) -> tuple[list[int], int | None]:
    """The bookmarks delivered until ``completed``, and the ``completed`` bookmark."""
    seen: list[int] = []
    async for event in events:
        if isinstance(event, Deliveries):
            seen.extend(e.record.bookmark for e in event.events)
        elif isinstance(event, Completed):
            return seen, event.bookmark
    return seen, None


async def test_a_trim_between_placement_and_replay_is_out_of_range_for_subscribe(tmp_path: Path) -> None:
    engine = open_engine(tmp_path, TOPICS, journal_max_entries=5)
    publish_ten(engine)
    async with engine.subscribe("book", bookmark="2") as stream:
        events = stream.events()
        first = await anext(events)
        assert isinstance(first, Subscribed)
        assert engine.journal.trim() == 5  # the upkeep, while Subscribed was being sent
        with pytest.raises(OutOfRange) as err:
            await until_live(events)
    assert err.value.oldest_bookmark == 5
    assert "resubscribe from 5" in err.value.message
    engine.close()


async def test_a_trim_while_the_state_is_sent_is_out_of_range_for_sow_and_subscribe(tmp_path: Path) -> None:
    engine = open_engine(tmp_path, TOPICS, journal_max_entries=5)
    publish_ten(engine)
    async with engine.sow_and_subscribe(QueryOptions(topic="book", bookmark="2")) as stream:
        events = stream.events()
        assert isinstance(await anext(events), Subscribed)
        await anext(events)  # the state as of bookmark 2 is being sent
        assert engine.journal.trim() == 5
        with pytest.raises(OutOfRange) as err:
            await until_live(events)
    assert err.value.oldest_bookmark == 5
    engine.close()


async def test_a_trim_before_a_journal_read_begins_is_out_of_range(tmp_path: Path) -> None:
    engine = open_engine(tmp_path, TOPICS, journal_max_entries=5)
    publish_ten(engine)
    batches = engine.journal_reads.read(2)
    assert engine.journal.trim() == 5
    with pytest.raises(OutOfRange) as err:
        await anext(batches)
    assert (err.value.oldest_bookmark, err.value.field) == (5, "from_bookmark")
    engine.close()


async def test_a_replay_already_reading_is_complete_whatever_is_trimmed_meanwhile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once the replay has opened its iterator, it reads the journal as it was then (a RocksDB
    iterator's view is fixed at its creation), so a trim meanwhile takes nothing from it."""
    monkeypatch.setattr(replay_module, "REPLAY_CHUNK", 2)
    engine = open_engine(tmp_path, TOPICS, journal_max_entries=5)
    publish_ten(engine)
    async with engine.subscribe("book", bookmark="2") as stream:
        events = stream.events()
        assert isinstance(await anext(events), Subscribed)
        chunk = await anext(events)
        assert isinstance(chunk, Deliveries)
        seen = [e.record.bookmark for e in chunk.events]
        assert engine.journal.trim() == 5
        rest, completed = await until_live(events)
    assert (seen + rest, completed) == (list(range(3, 11)), 10)
    engine.close()


async def test_replays_and_reads_placed_and_started_without_a_trim_are_whole(tmp_path: Path) -> None:
    engine = open_engine(tmp_path, TOPICS, journal_max_entries=5)
    publish_ten(engine)
    async with engine.subscribe("book", bookmark="2") as stream:
        assert await until_live(stream.events()) == (list(range(3, 11)), 10)
    got = [e.seq async for batch in engine.journal_reads.read(2) for e in batch]
    assert got == list(range(3, 11))
    engine.close()
