"""The delivery gate of a ``sync`` primary (:mod:`sowdb.engine.live.gate`): subscribers are shown
only what the replicas hold, every kind of subscription placed while changes are held gets each
change once, queries' results wait for their bookmark on a cluster node, and an open gate is the
lone server's behaviour. Through a real cluster:
``tests/cluster/test_clients.py`` (a subscriber across a kill -9 of the primary)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import orjson
import pytest

from sowdb.config import config_from_dict
from sowdb.engine import Engine, InMessage, QueryOptions
from sowdb.engine.events import GroupBegin, QueryEvent, RecordBatch, Subscribed
from sowdb.engine.live.subscription import Subscription
from sowdb.errors import Unavailable
from sowdb.storage import Store


def _engine(tmp_path: Path) -> Engine:
    topics = {"topic": [{"name": "orders", "key": ["/id"], "history": {"window": "1d"}}]}
    cfg = config_from_dict({**topics, "server": {"data_dir": str(tmp_path)}}, source="<tests>")
    return Engine.open(cfg, Store(tmp_path))


def _publish(engine: Engine, *ids: int) -> None:
    engine.publish("orders", [InMessage(orjson.dumps({"id": i})) for i in ids])


def _shown(sub: Subscription) -> list[int]:
    return [e.record.bookmark for e in sub.drain()]


async def test_a_shut_gate_shows_subscribers_only_what_the_replicas_hold(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    _publish(engine, 1, 2)  # bookmarks 1 and 2
    engine.deliver_upto(2)  # a sync primary whose replicas hold bookmark 2
    before = engine.placement.subscribe("orders")
    _publish(engine, 3)  # bookmark 3: written here, not yet on a replica
    assert _shown(before) == []

    plain = engine.subscribe("orders")  # placed at what may be shown, so a resume misses nothing
    first = await anext(plain.events())
    assert isinstance(first, Subscribed)
    assert first.bookmark == 2
    replay = engine.placement.subscribe("orders", bookmark="0")
    assert replay.replay_from is not None
    assert replay.replay_from[1] == 2  # the journal up to the committed point only
    query, _ = engine.placement.sow_and_subscribe(QueryOptions(topic="orders"))  # its query reads bookmark 3

    engine.deliver_upto(3)  # the replicas report holding bookmark 3
    replay.release()
    query.release()
    assert _shown(before) == [3]
    assert _shown(plain.sub) == [3]
    assert _shown(replay) == [3]
    assert _shown(query) == []  # not twice: the query had it

    _publish(engine, 4)
    assert _shown(before) == []
    engine.deliver_upto(None)  # acknowledging alone (or a replica): everything is shown
    assert _shown(before) == [4]
    _publish(engine, 5)
    assert _shown(before) == [5]
    assert _shown(plain.sub) == [4, 5]
    plain.close()
    engine.close()


def test_an_open_gate_holds_nothing(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    sub = engine.placement.subscribe("orders")
    _publish(engine, 1)
    assert _shown(sub) == [1]
    assert not engine.hub.gate.held
    engine.close()


async def _ids(events: AsyncIterator[QueryEvent]) -> list[int]:
    return [orjson.loads(r.raw)["id"] async for e in events if isinstance(e, RecordBatch) for r in e.records]


async def test_a_query_s_results_wait_until_the_replicas_hold_its_bookmark(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    engine.hold_reads(5.0)  # a cluster node with ack = "sync"
    _publish(engine, 1, 2)
    engine.deliver_upto(1)  # the replicas hold bookmark 1, not 2
    sow = engine.sow(QueryOptions(topic="orders"))
    stream = engine.sow_and_subscribe(QueryOptions(topic="orders"))
    mirror = stream.events()
    assert isinstance(await anext(mirror), Subscribed)
    waiting = [asyncio.ensure_future(anext(sow)), asyncio.ensure_future(anext(mirror))]
    await asyncio.sleep(0.05)
    assert not any(w.done() for w in waiting), "a query showed bookmark 2 before a replica held it"

    engine.deliver_upto(2)
    for w in waiting:
        begin = await asyncio.wait_for(w, 1)
        assert isinstance(begin, GroupBegin)
        assert begin.bookmark == 2  # pinned when asked: the same state, shown once it is safe
    assert await _ids(sow) == [1, 2]
    stream.close()

    _publish(engine, 3)  # held while no replica reports holding it
    engine.hold_reads(0.05)
    with pytest.raises(Unavailable, match="do not hold bookmark 3"):
        await _ids(engine.sow(QueryOptions(topic="orders")))
    engine.hold_reads(5.0)
    waiting_one = asyncio.ensure_future(_ids(engine.sow(QueryOptions(topic="orders"))))
    await asyncio.sleep(0.05)
    assert not waiting_one.done()
    engine.hold_reads(None)  # the primary stepped down: its queries read its state as written
    assert await asyncio.wait_for(waiting_one, 1) == [1, 2, 3]
    engine.hold_reads(5.0)
    engine.deliver_upto(None)  # acknowledging alone: nothing is held back
    assert await asyncio.wait_for(_ids(engine.sow(QueryOptions(topic="orders"))), 1) == [1, 2, 3]
    engine.close()


async def test_a_lone_server_s_queries_never_wait(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    _publish(engine, 1)
    engine.deliver_upto(0)  # even behind a shut gate: without hold_reads, a query reads as written
    assert await asyncio.wait_for(_ids(engine.sow(QueryOptions(topic="orders"))), 1) == [1]
    engine.close()


async def test_a_shut_gate_holds_a_live_page_s_changes_too(tmp_path: Path) -> None:
    """A paginated subscription (P-1) is fed by the page sets, not by the hub's dispatch: those
    sit behind the same gate (issue 38, finding 2: a publish at 3 reached a live page's queue
    with the gate shut at 2)."""
    engine = _engine(tmp_path)
    _publish(engine, 1, 2)
    engine.deliver_upto(2)
    page, events = engine.placement.sow_and_subscribe(QueryOptions(topic="orders", order_by="/id", top_n=5, skip_n=0))
    async for _ in events:
        pass
    page.release()
    _publish(engine, 3)
    assert _shown(page) == []  # written here, not yet on a replica
    engine.deliver_upto(3)
    assert _shown(page) == [3]
    _publish(engine, 4)
    engine.deliver_upto(None)
    assert _shown(page) == [4]
    engine.close()
