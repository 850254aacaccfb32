"""Live deliveries batch by the transport and the loop's load, not by a fixed pace (issue 29): an
idle subscriber among 100 busy ones gets a change on its next turns of the loop, even right after
a delivery of its own, and what arrives while a delivery is in flight goes whole as the next one.

Time is counted in turns of the event loop (a ticker task that yields once per turn), never in
wall-clock time: a pace of any length would show as many turns. The loop of a test is not
measured (:mod:`sowdb.engine.live.loop_load`), so nothing here is held for load: what is tested is
that nothing else holds a delivery — the fixed pace this replaced held the idle subscriber's
second change ``subscribers / 2,000`` s, 50 ms, some 85 turns of this test's loop."""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack

from sowdb.engine import Deliveries, Engine, SubscriptionStream
from tests.support import doc, publish

BUSY = 100
TURNS = 4
"""The most turns the idle subscriber's change may take: the turn it is published in, the one
that resumes its sender, the one its delivery is read in, and one to spare."""


async def test_an_idle_subscriber_among_100_busy_ones_gets_a_change_on_its_next_turns(engine: Engine) -> None:
    """100 subscribers kept busy (a change for them every turn of the loop) and one idle one
    that has just had a delivery: its next change reaches it within TURNS turns, before any busy
    subscriber has delivered twice more — in no line behind the busy ones, and not after a pace."""
    turn = 0
    stop = asyncio.Event()
    busy_got: list[list[int]] = [[] for _ in range(BUSY)]
    busy_counts: list[int] = [0] * BUSY
    delivered = [asyncio.Event() for _ in range(BUSY)]
    idle_got: list[int] = []
    idle_delivered = [asyncio.Event(), asyncio.Event()]
    delivered_at: list[tuple[int, list[int]]] = []  # (turn, each busy one's deliveries so far)

    async def ticker() -> None:
        nonlocal turn
        while not stop.is_set():
            turn += 1
            publish(engine, "orders", {"orderId": 1_000_000 + turn, "side": "B"})
            await asyncio.sleep(0)

    async def busy_reader(i: int, stream: SubscriptionStream) -> None:
        async for event in stream.events():
            if isinstance(event, Deliveries):
                busy_got[i].extend(doc(e.record)["orderId"] for e in event.events)
                busy_counts[i] += 1
                delivered[i].set()
                await asyncio.sleep(0)  # in flight for a turn

    async def idle_reader(stream: SubscriptionStream) -> None:
        async for event in stream.events():
            if isinstance(event, Deliveries):
                idle_got.extend(doc(e.record)["orderId"] for e in event.events)
                delivered_at.append((turn, list(busy_counts)))
                idle_delivered[len(delivered_at) - 1].set()

    async with AsyncExitStack() as stack:
        busy = [await stack.enter_async_context(engine.subscribe("orders", filter="/side = 'B'")) for _ in range(BUSY)]
        idle = await stack.enter_async_context(engine.subscribe("orders", filter="/side = 'S'"))
        tasks = [asyncio.create_task(busy_reader(i, s)) for i, s in enumerate(busy)]
        tasks += [asyncio.create_task(idle_reader(idle)), asyncio.create_task(ticker())]
        try:
            async with asyncio.timeout(30):
                for e in delivered:  # every busy subscriber is delivering
                    await e.wait()
                publish(engine, "orders", {"orderId": 1, "side": "S"})
                await idle_delivered[0].wait()
                published_at, counts = turn, list(busy_counts)
                publish(engine, "orders", {"orderId": 2, "side": "S"})  # right after a delivery
                await idle_delivered[1].wait()
        finally:
            stop.set()
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    assert idle_got == [1, 2]
    at, counts_then = delivered_at[1]
    assert max(b - a for a, b in zip(counts, counts_then, strict=True)) <= 2  # not overtaken twice
    assert at - published_at <= TURNS, f"held {at - published_at} turns"
    assert all(got == sorted(got) for got in busy_got)  # each in the total order


async def test_what_arrives_while_a_delivery_is_in_flight_goes_as_the_next_one(engine: Engine) -> None:
    """An idle stream sends the first change alone, at once; the changes published while that
    delivery is in flight go together as the next delivery, in order, whatever their number."""
    deliveries: list[list[int]] = []
    in_flight, taken, second = asyncio.Event(), asyncio.Event(), asyncio.Event()
    async with engine.subscribe("orders") as stream:
        events = stream.events()
        await anext(events)  # subscribed

        async def reader() -> None:
            async for event in events:
                if isinstance(event, Deliveries):
                    deliveries.append([doc(e.record)["orderId"] for e in event.events])
                    in_flight.set()
                    if len(deliveries) == 2:
                        second.set()
                    await taken.wait()  # the transport has not taken it yet

        task = asyncio.create_task(reader())
        try:
            publish(engine, "orders", {"orderId": 0})
            async with asyncio.timeout(10):
                await in_flight.wait()
                for i in range(1, 6):
                    publish(engine, "orders", {"orderId": i})
                taken.set()
                await second.wait()
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    assert deliveries == [[0], [1, 2, 3, 4, 5]]
