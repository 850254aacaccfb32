"""Bookmark replay through a real server: H-3 (historical sow_and_subscribe), H-4 (Subscribe
with a bookmark, ``completed``, OUT_OF_RANGE). The CLI's -bookmark: ``tests/process/test_cli_commands.py``."""

from __future__ import annotations

import asyncio
import random

import pytest

from sowdb_client import AsyncClient, Mirror, OutOfRangeError
from tests.support import Running


async def churn(c: AsyncClient, topic: str, rounds: int, seed: int, done: asyncio.Event | None = None) -> None:
    """Publishes, updates and deletes on ``topic`` (keys /id 0..39)."""
    rnd = random.Random(seed)
    for n in range(rounds):
        if rnd.random() < 0.15:
            await c.sow_delete(topic, sow_keys=[str(rnd.randrange(40))])
        else:
            await c.publish(topic, [{"id": rnd.randrange(40), "n": n} for _ in range(rnd.randint(1, 4))])
        if n % 5 == 0:
            await asyncio.sleep(0)
    if done is not None:
        done.set()


async def test_subscribe_with_a_bookmark_replays_then_completes_then_goes_live(sowd: Running) -> None:
    """H-4 under a concurrent publisher: every message after the bookmark arrives exactly once,
    in order, across the replay / live seam; ``completed`` comes once, between them."""
    c = sowd.client
    await churn(c, "markers", 150, seed=1)
    point = 40
    done = asyncio.Event()
    publisher = asyncio.create_task(churn(c, "markers", 200, seed=2, done=done))
    await asyncio.sleep(0.01)
    seen: list[int] = []
    kinds: list[str] = []
    stream = c.subscribe("markers", bookmark=str(point))
    async with asyncio.timeout(30):
        async for e in stream:
            if e.kind == "completed":
                kinds.append("completed")
                completed_at = e.bookmark
            seen += [r.bookmark for r in e.records]
            if done.is_set() and seen and seen[-1] == sowd.engine.last_seq:
                break
    stream.cancel()
    await publisher
    assert kinds == ["completed"]
    assert seen == list(range(point + 1, sowd.engine.last_seq + 1))
    assert point < completed_at < seen[-1]  # the publisher was still running when replay ended


async def test_subscribe_from_a_time_and_with_a_filter(sowd: Running) -> None:
    c = sowd.client
    await c.publish("markers", [{"id": 1, "x": 1}])
    await asyncio.sleep(0.05)
    ack = await c.publish("markers", [{"id": 2, "x": 2}, {"id": 3, "x": 3}])
    entry = sowd.engine.store.journal_entry(ack.first_bookmark)
    assert entry is not None
    from datetime import UTC, datetime

    when = datetime.fromtimestamp((entry.timestamp_us - 1000) / 1e6, UTC).isoformat()
    stream = c.subscribe("markers", filter="/x > 2", bookmark=when)
    events = []
    async with asyncio.timeout(10):
        async for e in stream:
            if e.kind in ("publish", "completed"):
                events.append((e.kind, [r.json()["id"] for r in e.records]))
            if e.kind == "completed":
                break
    stream.cancel()
    assert events == [("publish", [3]), ("completed", [])]


async def test_historical_sow_and_subscribe_has_no_gap_and_no_duplicate(sowd: Running) -> None:
    """H-3: the state as of the bookmark, the journal since, then live — with a publisher
    running throughout, the mirror ends equal to the final state and every version after the
    point is delivered once, in order."""
    c = sowd.client
    await churn(c, "book", 120, seed=3)
    point = sowd.engine.last_seq // 2
    then = {r.sow_key: r.data for r in await c.sow("book", bookmark=str(point), batch_size=100).records()}
    done = asyncio.Event()
    publisher = asyncio.create_task(churn(c, "book", 150, seed=4, done=done))
    await asyncio.sleep(0.01)
    mirror, query, replayed = Mirror(), {}, []
    stream = c.sow_and_subscribe("book", bookmark=str(point), oof=True, batch_size=9)
    kinds = []
    async with asyncio.timeout(30):
        async for e in stream:
            mirror.apply(e)
            kinds.append(e.kind)
            if e.kind == "group_begin":
                assert e.bookmark == point
            if e.kind == "sow":
                query.update({r.sow_key: r.data for r in e.records})
            if e.kind in ("publish", "oof"):
                replayed += [r.bookmark for r in e.records if e.reason != "match"]
            if done.is_set() and mirror.bookmark >= sowd.engine.last_seq:
                break
    stream.cancel()
    await publisher
    assert query == then
    assert kinds.count("completed") == 1
    assert kinds.index("group_end") < kinds.index("completed")
    final = {r.sow_key: r.data for r in await c.sow("book", batch_size=100).records()}
    assert {k: r.data for (_, k), r in mirror.records.items()} == final
    book = [e.seq for e in sowd.engine.store.iter_journal(point) if e.topic == "book"]
    # every change after the point arrives once, in order: publishes, and deletes of records
    # the mirror held (a delete of a key it never had is nothing to it)
    assert replayed == sorted(set(replayed))
    assert set(replayed) <= set(book)
    publishes = [e.seq for e in sowd.engine.store.iter_journal(point) if e.topic == "book" and e.op == 1]
    assert set(publishes) <= set(replayed)


async def test_a_bookmark_before_the_retained_journal_is_out_of_range(sowd: Running) -> None:
    c = sowd.client
    for i in range(10):
        await c.publish("orders", [{"orderId": i}])
    sowd.engine.store.trim_journal(6)  # as retention would
    with pytest.raises(OutOfRangeError) as err:
        async for _ in c.subscribe("orders", bookmark="3"):
            pass
    assert err.value.oldest_bookmark == 6
    assert err.value.field == "bookmark"
    assert "resubscribe from 6" in str(err.value)
    events = []
    async for e in c.subscribe("orders", bookmark="6"):
        events.append(e)
        if e.kind == "completed":
            break
    assert [r.bookmark for e in events for r in e.records] == [7, 8, 9, 10]
