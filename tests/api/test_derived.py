"""Aggregated subscriptions (Q-8 live) and views (V-1) through the real server (on the engine:
``tests/engine/state/test_derived.py``)."""

from __future__ import annotations

import asyncio

import pytest

from sowdb_client import FailedPreconditionError, Mirror
from tests.support import Running, take


async def test_aggregated_sow_and_subscribe_through_the_server(sowd: Running) -> None:
    """Q-8 live: groups update as the underlying records change; an emptied group gets an oof;
    the private view goes away with the subscription."""
    c = sowd.client
    engine = sowd.server.engine
    assert engine is not None
    await c.publish("orders", [{"orderId": i, "symbol": f"S{i % 2}", "qty": i} for i in range(1, 5)])
    stream = c.sow_and_subscribe(
        "orders",
        grouping=["/symbol"],
        projection=["/symbol", "SUM(/qty) AS /qty", "COUNT(/orderId) AS /n"],
        order_by="/symbol",
        oof=True,
    )
    events = await take(stream, 4)  # subscribed, group_begin, records, group_end
    assert [r.json() for r in events[2].records] == [
        {"symbol": "S0", "qty": 6, "n": 2},
        {"symbol": "S1", "qty": 4, "n": 2},
    ]
    mirror = Mirror()
    for e in events:
        mirror.apply(e)
    await c.publish("orders", [{"orderId": 1, "symbol": "S0", "qty": 10}])  # moves from S1 to S0
    await c.sow_delete("orders", filter="/symbol = 'S1'")
    kinds = []
    while "oof" not in kinds:
        (e,) = await take(stream, 1)
        kinds.append(e.kind)
        mirror.apply(e)
    assert {k: r.json() for (_, k), r in mirror.records.items()} == {'["S0"]': {"symbol": "S0", "qty": 16, "n": 3}}
    assert len(engine.hub.private) == 1
    with pytest.raises(FailedPreconditionError):
        await c.replace_subscription(events[0].sub_id, filter="/qty > 1")
    stream.cancel()
    for _ in range(100):
        if not engine.hub.private:
            break
        await asyncio.sleep(0.02)
    assert engine.hub.private == {}
    assert engine.topics.downstream.get("orders", []) == [
        d for d in engine.topics.derived.values() if d.underlying == "orders"
    ]


async def test_views_are_queryable_and_listed(sowd: Running) -> None:
    c = sowd.client
    await c.publish("orders", [{"orderId": i, "symbol": f"S{i % 3}"} for i in range(9)])
    got = {r.sow_key: r.json() for r in await c.sow("orders_by_symbol", order_by="/symbol").records()}
    assert got == {
        '["S0"]': {"symbol": "S0", "n": 3},
        '["S1"]': {"symbol": "S1", "n": 3},
        '["S2"]': {"symbol": "S2", "n": 3},
    }
    topics = {t.name: t for t in await c.list_topics()}
    assert topics["orders_by_symbol"].record_count == 3
    assert topics["orders_by_symbol"].underlying == "orders"
