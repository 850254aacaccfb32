"""Live subscriptions through a real server: S-1, S-2, S-3, O-1, D-2, SL-1, heartbeats, cleanup."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from sowdb.server import SowServer
from sowdb_api.v1 import sow_pb2 as pb
from sowdb_api.v1 import sow_pb2_grpc
from sowdb_client import AsyncClient, AsyncSubscriptionStream, Event, Message, Mirror
from tests.support import Running, docs, make_config, running, take


async def test_subscribe_delivers_matching_messages_in_order_and_deletes(sowd: Running) -> None:
    c = sowd.client
    stream = c.subscribe("orders", filter="/price > 100")
    (subscribed,) = await take(stream, 1)
    assert subscribed.kind == "subscribed"
    assert len(subscribed.sub_id) >= 20
    await c.publish("orders", [{"orderId": 1, "price": 50}, {"orderId": 2, "price": 150}, {"orderId": 3, "price": 200}])
    await c.sow_delete("orders", sow_keys=["2", "1"])
    got: list[tuple[str, Any]] = []
    while len(got) < 3:  # the server may batch the two publishes into one frame or not
        got += docs(await take(stream, 1))
    assert got == [
        ("publish", {"orderId": 2, "price": 150}),
        ("publish", {"orderId": 3, "price": 200}),
        ("deleted", {"orderId": 2, "price": 150}),  # order 1 never matched: no event
    ]
    stream.cancel()


async def test_regex_subscription_sees_the_total_order_across_topics(sowd: Running) -> None:
    """S-3, the seed's MARKERS / ORDERS example: a checkpoint published before an order is
    received before it."""
    c = sowd.client
    stream = c.subscribe("^(orders|markers)$")
    await take(stream, 1)
    for day in range(5):
        await c.publish("markers", [{"id": day, "day": day}])
        await c.publish("orders", [{"orderId": day * 10 + i, "day": day} for i in range(3)])
    got: list[tuple[str, int]] = []
    while len(got) < 20:
        for e in await take(stream, 1):
            got += [(r.topic, r.bookmark) for r in e.records]
    assert [b for _, b in got] == list(range(1, 21))
    assert [t for t, _ in got] == (["markers"] + ["orders"] * 3) * 5
    stream.cancel()


async def test_sow_and_subscribe_on_a_topic_without_sow(sowd: Running) -> None:
    stream = sowd.client.sow_and_subscribe("ticks")
    first = await take(stream, 3)
    assert [e.kind for e in first] == ["subscribed", "group_begin", "group_end"]
    await sowd.client.publish("ticks", [{"px": 1}])
    (live,) = await take(stream, 1)
    assert live.kind == "publish"
    assert live.records[0].json() == {"px": 1}
    stream.cancel()


async def test_oof_sample_scenario(sowd: Running) -> None:
    """The AMPS oof sample: updates that make a record stop matching give oof 'match', a
    sow_delete gives oof 'deleted', and records never received never give an oof."""
    c = sowd.client
    await c.publish("markers", [{"id": i, "messageNumber": i} for i in range(40)])
    flt = "/messageNumber % 10 = 0 AND (/OptionalField IS NULL OR /OptionalField <> 'ignore_me')"
    stream = c.sow_and_subscribe("markers", filter=flt, oof=True, batch_size=100)
    head = await take(stream, 4)
    assert [e.kind for e in head] == ["subscribed", "group_begin", "sow", "group_end"]
    assert sorted(r.json()["id"] for r in head[2].records) == [0, 10, 20, 30]
    await c.publish("markers", [{"id": 10, "messageNumber": 10, "OptionalField": "ignore_me"}])
    await c.publish("markers", [{"id": 11, "messageNumber": 11, "OptionalField": "ignore_me"}])  # never seen
    await c.sow_delete("markers", sow_keys=["20", "21"])  # 21 never seen
    await c.publish("markers", [{"id": 10, "messageNumber": 10, "OptionalField": "keep"}])  # back in focus
    events = await take(stream, 3)
    assert [(e.kind, e.reason, e.records[0].sow_key) for e in events] == [
        ("oof", "match", "10"),
        ("oof", "deleted", "20"),
        ("publish", "", "10"),
    ]
    assert events[0].records[0].json()["OptionalField"] == "ignore_me"  # the update that moved it out
    assert events[1].records[0].json() == {"id": 20, "messageNumber": 20}  # its last state
    stream.cancel()


async def test_delta_subscription_sends_keys_and_changed_fields(sowd: Running) -> None:
    c = sowd.client
    await c.publish("orders", [{"orderId": 1, "price": 10, "qty": 5}])
    stream = c.sow_and_subscribe("orders", delta=True, no_empties=True)
    await take(stream, 4)
    await c.publish("orders", [{"orderId": 1, "price": 11, "qty": 5}])
    await c.publish("orders", [{"orderId": 1, "price": 11, "qty": 5}])  # no change: suppressed
    await c.publish("orders", [{"orderId": 2, "price": 1}])  # a new record is sent whole
    events = await take(stream, 2)
    assert docs(events) == [("publish", {"orderId": 1, "price": 11}), ("publish", {"orderId": 2, "price": 1})]
    stream.cancel()


async def test_sow_and_subscribe_is_atomic_under_concurrent_publishing(sowd: Running) -> None:
    """S-1: while a publisher changes the topic continuously, 20 sow_and_subscribe calls start
    at random moments; each one's query results plus its later events reproduce the final
    state exactly, with every bookmark after its query point delivered exactly once."""
    c = sowd.client
    rnd = random.Random(42)
    await c.publish("orders", [{"orderId": i, "v": 0} for i in range(100)])
    done = asyncio.Event()

    async def publisher() -> None:
        for n in range(300):
            if rnd.random() < 0.2:
                await c.sow_delete("orders", sow_keys=[str(rnd.randrange(150))])
            else:
                batch = [{"orderId": rnd.randrange(150), "v": n} for _ in range(rnd.randint(1, 5))]
                await c.publish("orders", batch)
            if n % 7 == 0:
                await asyncio.sleep(0)
        done.set()

    async def mirror(delay: float) -> tuple[Mirror, list[int], int]:
        await asyncio.sleep(delay)
        client = AsyncClient(sowd.target)
        stream = client.sow_and_subscribe("orders", oof=True, batch_size=7)
        m, live, point = Mirror(), [], 0
        try:
            async for e in stream:
                m.apply(e)
                if e.kind == "group_begin":
                    point = e.bookmark
                if e.kind in ("publish", "oof"):
                    live += [r.bookmark for r in e.records]
                if done.is_set() and m.bookmark >= sowd.engine.last_seq:
                    break
                if e.kind == "heartbeat" and done.is_set():
                    break
        finally:
            stream.cancel()
            await client.close()
        return m, live, point

    tasks = [asyncio.create_task(mirror(rnd.uniform(0, 0.5))) for _ in range(20)]
    await publisher()
    results = await asyncio.wait_for(asyncio.gather(*tasks), 60)
    final = {r.sow_key: r.data for r in await c.sow("orders", batch_size=1000).records()}
    last = sowd.engine.last_seq
    for m, live, point in results:
        assert {k: r.data for (_, k), r in m.records.items()} == final
        assert live == list(range(point + 1, last + 1))  # each change after the point, once, in order


async def test_cancel_and_disconnect_leave_nothing_behind(sowd: Running) -> None:
    """1000 subscribe / cancel cycles, then a client that disconnects with live subscriptions:
    the server's own counters show no subscription, queued event or task left."""
    hub = sowd.engine.hub
    tasks_before = len(asyncio.all_tasks())
    for i in range(1000):
        stream = sowd.client.subscribe("orders") if i % 2 else sowd.client.sow_and_subscribe("orders")
        await take(stream, 1)
        stream.cancel()
    client = AsyncClient(sowd.target)
    for _ in range(20):
        await take(client.subscribe("orders", filter="/a = 1"), 1)
    await sowd.client.publish("orders", [{"orderId": 1, "a": 1}])
    await client.close()  # disconnect with live subscriptions
    for _ in range(200):
        if hub.stats().subscriptions == 0 and len(asyncio.all_tasks()) <= tasks_before:
            break
        await asyncio.sleep(0.05)
    stats = hub.stats()
    assert (stats.subscriptions, stats.queued_events) == (0, 0)
    assert stats.placement == {"indexed": 0, "scanned": 0}
    assert len(asyncio.all_tasks()) <= tasks_before


@pytest.fixture
async def tight(tmp_path: Path) -> AsyncIterator[tuple[SowServer, AsyncClient]]:
    config = make_config(
        tmp_path / "data", subscriber_queue_records=500, subscriber_queue_bytes=256 * 1024, heartbeat_s=0.05
    )
    async with running(config) as r:
        yield r.server, r.client


async def test_heartbeats_carry_the_latest_bookmark(tight: tuple[SowServer, AsyncClient]) -> None:
    _server, client = tight
    await client.publish("orders", [{"orderId": 1}, {"orderId": 2}])
    seen: list[Event] = []
    stream = client.subscribe("nothing-here")
    async for e in stream:
        seen.append(e)
        if len(seen) == 3:
            break
    stream.cancel()
    assert [e.kind for e in seen] == ["subscribed", "heartbeat", "heartbeat"]
    assert seen[1].bookmark == 2


async def test_a_stalled_subscriber_is_ended_and_publishers_are_not_held(tight: tuple[SowServer, AsyncClient]) -> None:
    server, client = tight
    # no BDP probing: the stalled client's HTTP/2 window stays at 64 KB, as a stuck reader's would
    options = [("grpc.http2.bdp_probe", 0)]
    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}", options=options) as channel:
        stalled = sow_pb2_grpc.SowServiceStub(channel).Subscribe(pb.SubscribeRequest(topic="orders"))
        await stalled.read()  # subscribed; then it reads nothing more
        healthy = client.subscribe("orders")
        await take(healthy, 1)
        pad = "x" * 900
        for b in range(40):  # 4,000 messages of ~1 KB: far more than the stalled queue may hold
            await client.publish("orders", [{"orderId": b * 100 + i, "pad": pad} for i in range(100)])
        got = 0
        while got < 4000:
            for e in await take(healthy, 1):
                got += len(e.records)
        assert got == 4000

        async def read_until_the_status() -> None:
            for _ in range(5000):  # what was in flight before the server gave up, then the status
                await asyncio.wait_for(stalled.read(), 10)

        with pytest.raises(grpc.aio.AioRpcError) as err:
            await read_until_the_status()
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "too slow" in (err.value.details() or "")
        healthy.cancel()
    assert server.engine is not None
    assert server.engine.hub.stats().dropped_slow == 1
    figures = (await client.stats()).server  # what operators see of it (SPEC §12)
    assert figures.slow_consumer_cutoffs == 1
    subscribe = next(r for r in figures.rpcs if r.rpc == "SowService/Subscribe")
    assert dict(subscribe.errors) == {"RESOURCE_EXHAUSTED": 1}


async def test_delivered_json_is_what_was_published(sowd: Running) -> None:
    stream = sowd.client.subscribe("notes")
    await take(stream, 1)
    raw = b'{"text": "h\\u00e9llo", "n": 1.50}'
    await sowd.client.publish("notes", [Message(raw, sow_key="k")])
    (e,) = await take(stream, 1)
    assert e.records[0].data == raw
    assert json.loads(e.records[0].data)["n"] == 1.5
    stream.cancel()


async def test_replace_subscription_narrows_and_widens_without_duplicates(sowd: Running) -> None:
    c = sowd.client
    await c.publish("orders", [{"orderId": i, "price": 100 + 10 * i} for i in range(10)])  # 100..190
    stream = c.sow_and_subscribe("orders", filter="/price >= 150", oof=True, batch_size=100)
    head = await take(stream, 4)
    assert sorted(r.json()["orderId"] for r in head[2].records) == [5, 6, 7, 8, 9]
    await c.replace_subscription(stream.sub_id, filter="/price >= 170", oof=True)
    out = await take(stream, 2)
    assert sorted((e.kind, e.reason, e.records[0].sow_key) for e in out) == [
        ("oof", "match", "5"),
        ("oof", "match", "6"),
    ]
    await c.replace_subscription(stream.sub_id, filter="/price >= 130", oof=True)
    fresh = await take(stream, 1)
    assert fresh[0].kind == "publish"
    assert sorted(r.sow_key for r in fresh[0].records) == ["3", "4", "5", "6"]
    await c.publish("orders", [{"orderId": 1, "price": 131}, {"orderId": 2, "price": 129}])  # the new filter applies
    (live,) = await take(stream, 1)
    assert [r.sow_key for r in live.records] == ["1"]
    stream.cancel()


async def test_replace_subscription_with_an_indexed_filter(sowd: Running) -> None:
    """R-1 where the re-run query is narrowed by the /symbol hash index: records of the new
    symbol arrive, those of the old one leave with an oof, nothing else is touched."""
    c = sowd.client
    await c.publish("orders", [{"orderId": i, "symbol": f"S{i % 3}", "price": i} for i in range(12)])
    stream = c.sow_and_subscribe("orders", filter="/symbol = 'S0'", oof=True, batch_size=100)
    head = await take(stream, 4)
    assert sorted(int(r.sow_key) for r in head[2].records) == [0, 3, 6, 9]
    await c.replace_subscription(stream.sub_id, filter="/symbol IN ('S1') AND /price > 4", oof=True)
    got: list[tuple[str, int]] = []
    while len(got) < 6:
        got += [(e.kind, int(r.sow_key)) for e in await take(stream, 1) for r in e.records]
    assert sorted(got) == [("oof", 0), ("oof", 3), ("oof", 6), ("oof", 9), ("publish", 7), ("publish", 10)]
    await c.publish("orders", [{"orderId": 4, "symbol": "S1", "price": 44}])  # the new filter is live
    (e,) = await take(stream, 1)
    assert (e.kind, e.records[0].sow_key) == ("publish", "4")
    stream.cancel()


async def test_replace_subscription_is_refused_cleanly(sowd: Running) -> None:
    from sowdb_client import InvalidArgumentError, NotFoundError

    c = sowd.client
    await c.publish("orders", [{"orderId": 1, "price": 1}])
    stream = c.sow_and_subscribe("orders", filter="/price > 0")
    await take(stream, 4)
    with pytest.raises(NotFoundError):
        await c.replace_subscription("no-such-id", filter="/price > 5")
    # another connection may not touch it (channels of one process share a connection unless
    # told otherwise, so this one asks for its own)
    async with grpc.aio.insecure_channel(sowd.target, options=[("grpc.use_local_subchannel_pool", 1)]) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as denied:
            await sow_pb2_grpc.SowServiceStub(channel).ReplaceSubscription(
                pb.ReplaceSubscriptionRequest(sub_id=stream.sub_id, filter="/price > 5")
            )
        assert denied.value.code() == grpc.StatusCode.NOT_FOUND
    with pytest.raises(InvalidArgumentError) as err:
        await c.replace_subscription(stream.sub_id, filter="/price >")
    assert err.value.field == "filter"
    await c.publish("orders", [{"orderId": 2, "price": 2}])  # the old filter still applies
    (live,) = await take(stream, 1)
    assert [r.sow_key for r in live.records] == ["2"]
    stream.cancel()


async def test_replace_under_concurrent_publishing_misses_nothing(sowd: Running) -> None:
    c = sowd.client
    rnd = random.Random(3)
    await c.publish("orders", [{"orderId": i, "v": rnd.randrange(100)} for i in range(100)])
    stream = c.sow_and_subscribe("orders", filter="/v < 50", oof=True, batch_size=50)
    mirror = Mirror()
    done = asyncio.Event()

    async def publisher() -> None:
        for n in range(200):
            await c.publish("orders", [{"orderId": rnd.randrange(120), "v": rnd.randrange(100)} for _ in range(3)])
            if n == 100:
                await c.replace_subscription(stream.sub_id, filter="/v >= 30", oof=True)
            if n % 5 == 0:
                await asyncio.sleep(0)
        done.set()

    async def consume() -> None:
        async for e in stream:
            mirror.apply(e)
            if done.is_set() and (e.kind == "heartbeat" or mirror.bookmark >= sowd.engine.last_seq):
                return

    consumer = asyncio.create_task(consume())
    await publisher()
    await asyncio.wait_for(consumer, 30)
    stream.cancel()
    expected = {r.sow_key: r.data for r in await c.sow("orders", filter="/v >= 30", batch_size=1000).records()}
    assert {k: r.data for (_, k), r in mirror.records.items()} == expected


INDEXABLE = [
    "/qty % 10 = 3",
    "/qty % 10 = 7 AND /side = 'B'",
    "/sym = 'S1'",
    "/sym IN ('S2', 3, '4')",
    "/n = '7'",
    "/n = 7.0",
    "/flag = 1",
    "UPPER(/sym) = 'S5'",
    "/tags = 'x'",
    "/n = '07'",  # files under 7 too, yet '7' = '07' is false: the hub's exact check must tell
    "/flag = true",  # True hashes like 1
    "/side = 'B' AND /qty % 10 = 7 AND /n IS NOT NULL",  # filed by /side; the rest is evaluated
    "/n IN (7, 'x') AND /side <> 'S'",
    "/sym = 'S1' AND SOW_KEY() <> '3'",  # the rest reads the record's metadata
    "/qty % 10 = 3 AND /side = 'S'",  # the literal of the first filter, another rest
    "/sym = 'S1'",  # a second subscriber with the very same filter
]


async def test_filter_indexing_delivers_exactly_what_scanning_does(sowd: Running) -> None:
    """Subscriptions filed by an equality conjunct must receive exactly what the same filter
    receives when it is evaluated for every change (``(...) OR 1 = 0`` defeats the index)."""
    c = sowd.client
    streams = []
    for f in INDEXABLE:
        streams.append((f, c.subscribe("orders", filter=f), c.subscribe("orders", filter=f"({f}) OR 1 = 0")))
    for _, a, b in streams:
        await take(a, 1)
        await take(b, 1)
    stats = sowd.engine.hub.stats()
    assert stats.placement == {"indexed": len(INDEXABLE), "scanned": len(INDEXABLE)}
    rnd = random.Random(5)
    values: list[Any] = [3, 7, "7", 7.0, "S1", "s5", "S2", "4", 4, True, 1, None, ["x", "y"], "x", "07"]
    for n in range(20):
        batch = [
            {
                "orderId": n * 50 + i,
                "qty": rnd.randrange(100),
                "side": rnd.choice("BS"),
                "sym": rnd.choice(values),
                "n": rnd.choice(values),
                "flag": rnd.choice(values),
                "tags": rnd.choice(values),
            }
            for i in range(50)
        ]
        await c.publish("orders", batch)
    await c.sow_delete("orders", filter="/qty < 20")  # deleted events reach indexed subscriptions too

    async def received(stream: AsyncSubscriptionStream) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        try:
            async with asyncio.timeout(1.0):
                async for e in stream:
                    out += [(e.kind, r.sow_key) for r in e.records]
        except TimeoutError:
            pass
        stream.cancel()
        return out

    results = await asyncio.gather(*(received(s) for _, a, b in streams for s in (a, b)))
    for i, (f, _, _) in enumerate(streams):
        got_a, got_b = results[2 * i], results[2 * i + 1]
        assert got_a == got_b, f
        assert got_a, f  # each filter matched something
    hub = sowd.engine.hub
    async with asyncio.timeout(5):
        while hub.subs:  # noqa: ASYNC110  # the hub has no event for its last subscription leaving
            await asyncio.sleep(0.01)
    assert hub._groups == {}  # every literal filed away again
    assert hub._indexed == {}


async def test_expired_records_leave_with_oof_expired(sowd: Running) -> None:
    """X-1 end to end: the server's upkeep task removes a record when its time to live passes."""
    c = sowd.client
    stream = c.sow_and_subscribe("orders", oof=True)
    await take(stream, 3)  # subscribed, group_begin, group_end
    await c.publish("orders", [Message({"orderId": 1, "a": 1}, expiration=0.3), {"orderId": 2}])
    started = asyncio.get_running_loop().time()
    async with asyncio.timeout(5):
        events = await take(stream, 2)
    waited = asyncio.get_running_loop().time() - started
    assert [(e.kind, e.reason) for e in events] == [("publish", ""), ("oof", "expired")]
    assert events[1].records[0].json() == {"orderId": 1, "a": 1}
    assert 0.25 <= waited < 2
    assert [r.sow_key for r in await c.sow("orders").records()] == ["2"]
    stream.cancel()
