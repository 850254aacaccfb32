"""The subscription hub (engine/hub.py) without a server: every applied batch reaches each
subscription of its topic in bookmark order, and subscriptions filed under a shared
``expression = literal`` conjunct get exactly what their filters select while the expression
is evaluated once per change for all of them."""

from __future__ import annotations

from typing import Any

from sowdb.engine import Engine, SubscriptionOptions
from sowdb.engine.live.subscription import Subscription
from sowdb.expr import compile_filter
from tests.support import doc, publish


def sub(engine: Engine, topic: str, filter: str = "", **options: Any) -> Subscription:
    return engine.placement.subscribe(topic, filter=filter, options=SubscriptionOptions(**options))


def got(s: Subscription) -> list[tuple[str, str, int]]:
    """(kind, topic, bookmark) of what ``s`` has queued."""
    return [(e.kind, e.record.topic, e.record.bookmark) for e in s.drain()]


def test_each_subscription_gets_its_topics_changes_in_bookmark_order(engine: Engine) -> None:
    orders, markers = sub(engine, "orders"), sub(engine, "markers")
    pattern = sub(engine, "^orders")  # orders, orders_noindex and the view orders_by_symbol
    publish(engine, "orders", {"orderId": 1, "symbol": "A"}, {"orderId": 2, "symbol": "A"})  # 1, 2
    publish(engine, "markers", {"id": 1})  # 3
    publish(engine, "orders_noindex", {"orderId": 1})  # 4
    publish(engine, "orders", {"orderId": 3, "symbol": "B"})  # 5
    assert got(orders) == [("publish", "orders", 1), ("publish", "orders", 2), ("publish", "orders", 5)]
    assert got(markers) == [("publish", "markers", 3)]
    seen = got(pattern)
    assert [b for _, _, b in seen] == sorted(b for _, _, b in seen)
    assert {(t, b) for _, t, b in seen} >= {("orders", 1), ("orders", 2), ("orders_noindex", 4), ("orders", 5)}
    assert {t for _, t, _ in seen} == {"orders", "orders_noindex", "orders_by_symbol"}  # the view's changes too


def test_subscriptions_sharing_a_conjunct_are_matched_once_per_change(engine: Engine) -> None:
    """100 subscribers to ``/qty % 10 = k AND /side = 'B'`` (k = 0..9): one group, ten literals;
    ``/qty % 10`` is computed once per published record, not once per subscriber."""
    filters = {(k, i): f"/qty % 10 = {k} AND /side = 'B'" for k in range(10) for i in range(10)}
    subs = {ki: sub(engine, "orders_noindex", f) for ki, f in filters.items()}
    assert engine.hub.stats().placement == {"indexed": 100, "scanned": 0}
    [group] = engine.hub._groups.values()
    assert len(group.literals) == 10
    calls = 0
    evaluate = group.fn

    def counted(data: Any, rec: Any) -> Any:
        nonlocal calls
        calls += 1
        return evaluate(data, rec)

    group.fn = counted
    docs: list[dict[str, Any]] = [{"orderId": n, "qty": n, "side": "BS"[n % 3 == 0]} for n in range(60)]
    publish(engine, "orders_noindex", *docs)  # a topic no view follows: only its own changes
    assert calls == 60
    for (k, _), s in subs.items():
        expected = [d["orderId"] for d in docs if d["qty"] % 10 == k and d["side"] == "B"]
        assert [doc(e.record)["orderId"] for e in s.drain()] == expected


FILTERS = [
    "/v = 1",
    "/v = 1.5",
    "/v = true",
    "/v = '1'",
    "/v IN (1, 'x', false)",
    "/v = 1 AND /w > 0",
    "/w > 0",  # no equality conjunct: scanned
]
VALUES: list[Any] = [1, 1.0, 1.5, True, False, "1", "x", None, [1], {"a": 1}, 0]


def test_indexed_matching_agrees_with_each_filter_on_its_own(engine: Engine) -> None:
    """The hub's literal index (1, 1.0 and True hash alike) must select exactly what the filter
    selects when evaluated alone, for every type of value."""
    subs = {f: sub(engine, "markers", f) for f in FILTERS}
    assert engine.hub.stats().placement == {"indexed": 6, "scanned": 1}
    docs = [{"id": i, "v": v, "w": i % 2} for i, v in enumerate(VALUES)]
    publish(engine, "markers", *docs)
    records = engine.topics.sow["markers"].records
    for f, s in subs.items():
        compiled = compile_filter(f)
        expected = [d["id"] for d in docs if compiled.matches(d, records[str(d["id"])])]
        assert [doc(e.record)["id"] for e in s.drain()] == expected, f


def test_removals_reach_indexed_subscriptions_that_asked_for_deletes(engine: Engine) -> None:
    a = sub(engine, "orders", "/symbol = 'A'", deleted_events=True)
    b = sub(engine, "orders", "/symbol = 'B'", deleted_events=True)
    publish(engine, "orders", {"orderId": 1, "symbol": "A"}, {"orderId": 2, "symbol": "B"})
    got(a), got(b)
    engine.sow_delete("orders", sow_keys=["1"])
    assert got(a) == [("deleted", "orders", 3)]
    assert got(b) == []


def test_a_removed_subscription_leaves_the_index(engine: Engine) -> None:
    first, second = sub(engine, "orders", "/symbol = 'A'"), sub(engine, "orders", "/symbol = 'A'")
    engine.placement.unsubscribe(first)
    publish(engine, "orders", {"orderId": 1, "symbol": "A"})
    assert got(first) == []
    assert got(second) == [("publish", "orders", 1)]
    engine.placement.unsubscribe(second)
    assert engine.hub.stats().placement == {"indexed": 0, "scanned": 0}
    assert not engine.hub._groups
