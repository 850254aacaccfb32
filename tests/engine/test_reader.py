"""A reader process's engine (``engine/reader.py``) over a real arena, its feed applied by hand:
where its queries and query-subscriptions read, exactly (issue 41).

The writer's arena is written here as the writer writes it; the feed's entries are applied when
the test says, so that the arena can be committed ahead of the reader's feed position, as it is
for a moment after every commit.
"""

from __future__ import annotations

import asyncio
import marshal
from pathlib import Path

import orjson

from sowdb.config import ServerConfig, TopicConfig
from sowdb.engine import (
    Deliveries,
    GroupBegin,
    GroupEnd,
    QueryOptions,
    ReaderLive,
    RecordBatch,
    StoredRecord,
    SubscriptionOptions,
)
from sowdb.engine.arena import TopicArena
from sowdb.engine.changes import Change
from sowdb.engine.feed import POSITION, encode_changes

TOPIC = "orders"


class Writer:
    """The writer's side: its arena for ``orders`` and the feed entries of what it applied."""

    def __init__(self, directory: Path) -> None:
        self.arena = TopicArena(directory, TOPIC)
        self.last = 0
        self.current: dict[str, StoredRecord] = {}

    def publish(self, version: int, keys: range) -> bytes:
        """Write one batch (each key at ``version``), commit it, and return its feed entry."""
        first = self.last + 1
        docs = [orjson.dumps({"id": k, "v": version}) for k in keys]
        self.arena.put_batch([str(k).encode() for k in keys], docs, first, 1_000)
        changes = []
        for i, (k, raw) in enumerate(zip(keys, docs, strict=True)):
            new = StoredRecord(TOPIC, str(k), None, raw, first + i, 1_000)
            changes.append(Change(TOPIC, str(k), first + i, 1_000, self.current.get(str(k)), new))
            self.current[str(k)] = new
        self.last = first + len(docs) - 1
        return encode_changes(TOPIC, changes)


def _reader(tmp_path: Path, writer: Writer) -> ReaderLive:
    live = ReaderLive(ServerConfig(), [TopicConfig(TOPIC, ("/id",))], lambda: None)
    live.apply(marshal.dumps((POSITION, writer.last, 1, 0, {TOPIC: str(writer.arena.directory)})))
    return live


async def _query(events: object) -> tuple[int, list[dict[str, int]]]:
    point, docs = -1, list[dict[str, int]]()
    async for event in events:  # type: ignore[attr-defined]
        if isinstance(event, GroupBegin):
            point = event.bookmark
        elif isinstance(event, RecordBatch):
            docs.extend(orjson.loads(r.raw) for r in event.records)
        elif isinstance(event, GroupEnd):
            break
    return point, sorted(docs, key=lambda d: d["id"])


def test_a_query_waits_for_the_feed_to_reach_the_arenas_commit(tmp_path: Path) -> None:
    writer = Writer(tmp_path / "arena")
    first = writer.publish(1, range(10))
    live = _reader(tmp_path, writer)  # joins at bookmark 10
    live.apply(first)
    later = writer.publish(2, range(5))  # committed in the arena, not yet applied from the feed

    async def run() -> tuple[int, list[dict[str, int]]]:
        events = live.sow(QueryOptions(topic=TOPIC))
        assert events is not None  # answered here, from the arena
        task = asyncio.ensure_future(_query(events))
        await asyncio.sleep(0.2)
        assert not task.done()  # not shown before the feed reaches what it read
        live.apply(later)
        return await task

    point, docs = asyncio.run(run())
    assert point == 15
    assert docs == [{"id": k, "v": 2 if k < 5 else 1} for k in range(10)]  # the caller's last write included


def test_sow_and_subscribe_reads_at_the_feeds_position_and_follows_from_there(tmp_path: Path) -> None:
    writer = Writer(tmp_path / "arena")
    live = _reader(tmp_path, writer)
    live.apply(writer.publish(1, range(10)))
    pending = writer.publish(2, range(5))  # the arena is ahead of the feed: bookmarks 11-15

    async def run() -> tuple[int, list[dict[str, int]], list[int]]:
        stream = live.sow_and_subscribe(QueryOptions(topic=TOPIC), options=SubscriptionOptions())
        assert stream is not None
        got: list[int] = []
        point, docs = -1, list[dict[str, int]]()
        async with stream:
            events = stream.events()
            async for event in events:
                if isinstance(event, GroupBegin):
                    point = event.bookmark
                elif isinstance(event, RecordBatch):
                    docs.extend(orjson.loads(r.raw) for r in event.records)
                elif isinstance(event, GroupEnd):
                    live.apply(pending)  # after the query: the changes it did not see
                elif isinstance(event, Deliveries):
                    got.extend(e.record.bookmark for e in event.events)
                    if len(got) >= 5:
                        break
            await events.aclose()
        return point, sorted(docs, key=lambda d: d["id"]), got

    point, docs, live_bookmarks = asyncio.run(asyncio.wait_for(run(), 30))
    assert point == 10  # where the subscription was placed, not the arena's commit (15)
    assert docs == [{"id": k, "v": 1} for k in range(10)]
    assert live_bookmarks == [11, 12, 13, 14, 15]  # every change after it, once


def test_a_filtered_query_decodes_a_chunk_and_makes_its_matches(tmp_path: Path) -> None:
    writer = Writer(tmp_path / "arena")
    live = _reader(tmp_path, writer)
    live.apply(writer.publish(1, range(3000)))
    live.apply(writer.publish(2, range(0, 3000, 7)))
    events = live.sow(QueryOptions(topic=TOPIC, filter="/v = 2 AND /id < 100"))
    assert events is not None
    point, docs = asyncio.run(_query(events))
    assert point == 3000 + len(range(0, 3000, 7))
    assert docs == [{"id": k, "v": 2} for k in range(0, 100, 7)]
