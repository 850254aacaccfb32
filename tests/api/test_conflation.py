"""C-1 conflated subscriptions through the server, with a short interval (the rules themselves:
``tests/engine/live/test_conflation.py``)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from tests.support import Running, take


async def test_conflated_sow_and_subscribe_through_the_server(sowd: Running) -> None:
    c = sowd.client
    await c.publish("orders", [{"orderId": i, "v": 0} for i in range(5)])
    stream = c.sow_and_subscribe("orders", conflation=0.3, batch_size=100)
    head = await take(stream, 4)
    assert len(head[2].records) == 5  # the query part is not conflated
    start = time.monotonic()
    for v in range(1, 41):
        await c.publish("orders", [{"orderId": 1, "v": v}, {"orderId": 2, "v": v}])
    latest: dict[str, Any] = {}
    deliveries = 0
    while latest != {"1": 40, "2": 40}:
        for e in await take(stream, 1):
            deliveries += len(e.records)
            latest.update((r.sow_key, r.json()["v"]) for r in e.records)
    elapsed = time.monotonic() - start
    intervals = elapsed / 0.3 + 1
    assert deliveries <= 2 * (intervals + 1), (deliveries, elapsed)  # at most one per key per interval
    assert deliveries < 80  # 80 changes were conflated
    await asyncio.sleep(0.4)  # another interval passes with no change: nothing more arrives
    await c.publish("orders", [{"orderId": 3, "v": 9}])
    (later,) = await take(stream, 1)
    assert [(r.sow_key, r.json()["v"]) for r in later.records] == [("3", 9)]
    stream.cancel()


async def test_conflated_subscribe_through_the_server(sowd: Running) -> None:
    """The SDK's ``subscribe`` takes ``conflation`` and ``conflation_key`` as
    ``sow_and_subscribe`` does (the server supports C-1 on Subscribe too)."""
    c = sowd.client
    stream = c.subscribe("orders", conflation=0.3, conflation_key=["/sym"])
    await take(stream, 1)  # subscribed
    start = time.monotonic()
    for v in range(1, 41):
        await c.publish("orders", [{"orderId": 1, "sym": "X", "v": v}, {"orderId": 2, "sym": "X", "v": -v}])
    latest: dict[str, Any] = {}
    deliveries = 0
    while latest.get("X") != -40:
        for e in await take(stream, 1):
            deliveries += len(e.records)
            latest.update((r.json()["sym"], r.json()["v"]) for r in e.records)
    intervals = (time.monotonic() - start) / 0.3 + 1
    assert deliveries <= intervals + 1  # one key (/sym), at most one delivery per interval
    stream.cancel()
