"""Placing and replacing subscriptions (engine/placement.py) without a server. S-1: a query and
its subscription are placed at one point, so what the query returns and what the subscription
then delivers are the total order with no gap and no duplicate. R-1: a replacement takes effect
at one point; records now in scope arrive, records now out of it get an oof."""

from __future__ import annotations

from typing import Any

import pytest

from sowdb.engine import Engine, GroupBegin, QueryOptions, RecordBatch, Replacement, SubscriptionOptions
from sowdb.engine.live.subscription import Subscription
from sowdb.errors import FailedPrecondition, InvalidArgument, NotFound
from tests.support import doc, publish


async def placed(engine: Engine, opts: QueryOptions, **options: Any) -> tuple[Subscription, int, list[Any]]:
    """sow_and_subscribe as one step, then its query read to the end (later publishes may run in
    between); (subscription, the query's bookmark, the documents it returned)."""
    sub, query = engine.placement.sow_and_subscribe(opts, options=SubscriptionOptions(**options), owner="me")
    return sub, *(await read(query))


async def read(query: Any) -> tuple[int, list[Any]]:
    bookmark, docs = -1, []
    async for event in query:
        if isinstance(event, GroupBegin):
            bookmark = event.bookmark
        elif isinstance(event, RecordBatch):
            docs += [r.data for r in event.records]
    return bookmark, docs


async def test_query_and_subscription_are_placed_at_one_point(engine: Engine) -> None:
    publish(engine, "orders", *({"orderId": i, "v": 1} for i in range(1, 4)))
    sub, query = engine.placement.sow_and_subscribe(QueryOptions("orders"))
    # the writer runs before the query is read: these are after the point, so live, not queried
    publish(engine, "orders", {"orderId": 4, "v": 1}, {"orderId": 1, "v": 2})
    bookmark, docs = await read(query)
    assert bookmark == 3
    assert docs == [{"orderId": i, "v": 1} for i in range(1, 4)]
    assert not sub.queue  # held until the query is sent
    assert sub.held is not None
    assert [c.bookmark for c in sub.held] == [4, 5]
    sub.release()
    assert [(e.record.bookmark, e.record.data) for e in sub.drain()] == [
        (4, {"orderId": 4, "v": 1}),
        (5, {"orderId": 1, "v": 2}),
    ]
    publish(engine, "orders", {"orderId": 2, "v": 2})
    assert [e.record.bookmark for e in sub.drain()] == [6]


async def test_a_query_as_of_a_bookmark_continues_with_the_journal_after_it(engine: Engine) -> None:
    """H-3: the state as of bookmark 2, then a replay of (2, last], then live."""
    for v in range(1, 5):
        publish(engine, "book", {"id": 1, "v": v})
    sub, bookmark, docs = await placed(engine, QueryOptions("book", bookmark="2"))
    assert (bookmark, docs) == (2, [{"id": 1, "v": 2}])
    assert sub.replay_from == (2, 4)


async def test_a_refused_placement_leaves_nothing_placed(engine: Engine) -> None:
    first, _, _ = await placed(engine, QueryOptions("orders"), oof=True)
    with pytest.raises(InvalidArgument, match="sub_id"):
        engine.placement.sow_and_subscribe(QueryOptions("orders"), sub_id=first.id)
    with pytest.raises(InvalidArgument):
        engine.placement.sow_and_subscribe(QueryOptions("orders", filter="/qty >"))
    with pytest.raises(FailedPrecondition, match="no history"):
        engine.placement.sow_and_subscribe(QueryOptions("orders", bookmark="1"))
    assert list(engine.hub.subs) == [first.id]
    assert engine.hub.subs[first.id] is first


async def test_a_replacement_delivers_what_came_into_scope_and_oofs_what_left(engine: Engine) -> None:
    publish(engine, "orders", *({"orderId": i, "symbol": "AB"[i % 2]} for i in range(4)))
    sub, _, docs = await placed(engine, QueryOptions("orders", filter="/symbol = 'A'"), oof=True)
    assert [d["orderId"] for d in docs] == [0, 2]
    sub.release(engine.topics.sow["orders"].records[k] for k in ("0", "2"))
    change = Replacement(filter="/orderId >= 2", options=sub.options)
    at = engine.placement.replace_subscription(sub.id, change, owner="me")
    assert at == engine.last_seq == 4
    assert sorted((e.kind, doc(e.record)["orderId"]) for e in sub.drain()) == [("oof", 0), ("publish", 3)]
    publish(engine, "orders", {"orderId": 0, "symbol": "A"}, {"orderId": 5, "symbol": "B"})  # the new filter
    assert [(e.kind, doc(e.record)["orderId"]) for e in sub.drain()] == [("publish", 5)]


async def test_a_replacement_is_refused_to_others_while_held_and_for_oof_it_cannot_track(engine: Engine) -> None:
    sub, query = engine.placement.sow_and_subscribe(QueryOptions("orders"), owner="me")
    with pytest.raises(FailedPrecondition, match="still being sent"):
        engine.placement.replace_subscription(sub.id, Replacement(), owner="me")
    await read(query)
    sub.release()
    with pytest.raises(NotFound):
        engine.placement.replace_subscription(sub.id, Replacement(), owner="someone else")
    plain = engine.placement.subscribe("orders", filter="/qty > 1", owner="me")
    with pytest.raises(InvalidArgument, match="oof cannot be turned on"):
        engine.placement.replace_subscription(plain.id, Replacement(options=SubscriptionOptions(oof=True)), owner="me")
    publish(engine, "orders", {"orderId": 1, "qty": 2})
    assert [e.record.data for e in plain.drain()] == [{"orderId": 1, "qty": 2}]  # its filter is unchanged
