"""A subscription's stream of events (engine/streams.py) without a server: ``subscribed``, the
query's results, the journal replay and ``completed``, then live deliveries, in that order,
each change once; heartbeats when idle; leaving the stream removes the subscription."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from sowdb.engine import (
    Completed,
    Deliveries,
    Engine,
    GroupBegin,
    GroupEnd,
    Heartbeat,
    QueryOptions,
    RecordBatch,
    StreamEvent,
    Subscribed,
)
from sowdb.engine.live.subscription import SlowConsumer
from tests.support import doc, open_engine, publish


async def next_events(events: AsyncIterator[StreamEvent], n: int) -> list[tuple[str, Any]]:
    """The next ``n`` events as (kind, what matters of it): bookmarks, or (id, v) of records."""
    out: list[tuple[str, Any]] = []
    async with asyncio.timeout(5):
        for _ in range(n):
            e = await anext(events)
            if isinstance(e, Subscribed | Completed | Heartbeat | GroupBegin):
                out.append((type(e).__name__, e.bookmark))
            elif isinstance(e, RecordBatch):
                out.append(("RecordBatch", [(doc(r)["id"], doc(r)["v"]) for r in e.records]))
            elif isinstance(e, Deliveries):
                out.append(("Deliveries", [(x.kind, x.record.bookmark, doc(x.record)["v"]) for x in e.events]))
            else:
                assert isinstance(e, GroupEnd)
                out.append(("GroupEnd", e.returned))
    return out


async def test_query_then_replay_then_completed_then_live(engine: Engine) -> None:
    """H-3 as the subscriber sees it: the state as of bookmark 2, the journal after it, completed,
    then live; a change made after placement but before the stream is read comes once, live."""
    for v in range(1, 5):
        publish(engine, "book", {"id": 1, "v": v})  # bookmarks 1..4
    async with engine.sow_and_subscribe(QueryOptions("book", bookmark="2")) as stream:
        publish(engine, "book", {"id": 1, "v": 5})  # 5: after the point
        events = stream.events()
        assert await next_events(events, 7) == [
            ("Subscribed", 5),
            ("GroupBegin", 2),
            ("RecordBatch", [(1, 2)]),
            ("GroupEnd", 1),
            ("Deliveries", [("publish", 3, 3), ("publish", 4, 4)]),
            ("Completed", 4),
            ("Deliveries", [("publish", 5, 5)]),
        ]
        publish(engine, "book", {"id": 1, "v": 6})
        assert await next_events(events, 1) == [("Deliveries", [("publish", 6, 6)])]


async def test_a_subscribe_with_a_bookmark_replays_then_completes_then_goes_live(engine: Engine) -> None:
    """H-4: no query; the journal after the bookmark, completed, then live."""
    publish(engine, "markers", {"id": 1, "v": 1}, {"id": 2, "v": 1}, {"id": 3, "v": 1})
    async with engine.subscribe("markers", bookmark="1", filter="/id > 1") as stream:
        events = stream.events()
        assert await next_events(events, 3) == [
            ("Subscribed", 3),
            ("Deliveries", [("publish", 2, 1), ("publish", 3, 1)]),
            ("Completed", 3),
        ]
        publish(engine, "markers", {"id": 1, "v": 2}, {"id": 2, "v": 2})
        assert await next_events(events, 1) == [("Deliveries", [("publish", 5, 2)])]


async def test_an_idle_stream_sends_heartbeats_with_the_latest_bookmark(tmp_path: Path) -> None:
    engine = open_engine(tmp_path, heartbeat="50ms")
    try:
        publish(engine, "markers", {"id": 1, "v": 1})
        async with engine.subscribe("markers") as stream:
            events = stream.events()
            assert await next_events(events, 2) == [("Subscribed", 1), ("Heartbeat", 1)]
            publish(engine, "markers", {"id": 1, "v": 2})
            assert await next_events(events, 1) == [("Deliveries", [("publish", 2, 2)])]
    finally:
        engine.close()


async def test_leaving_the_stream_removes_the_subscription(engine: Engine) -> None:
    async with engine.subscribe("markers") as stream:
        assert stream.sub_id in engine.hub.subs
    assert not engine.hub.subs
    publish(engine, "markers", {"id": 1, "v": 1})  # nobody to offer it to
    assert not stream.sub.queue


async def test_a_stream_past_its_queue_limit_ends_with_slow_consumer(tmp_path: Path) -> None:
    engine = open_engine(tmp_path, subscriber_queue_records=3)
    try:
        async with engine.subscribe("markers") as stream:
            events = stream.events()
            await next_events(events, 1)
            publish(engine, "markers", *({"id": i, "v": 1} for i in range(4)))
            with pytest.raises(SlowConsumer):
                await next_events(events, 1)
    finally:
        engine.close()
