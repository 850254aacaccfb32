"""Views (V-1), conflated topics (C-2) and aggregated subscriptions (Q-8 live) on the engine,
with an injected clock. Through the real server: ``tests/api/test_derived.py``."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from sowdb.config import ConfigError, config_from_dict
from sowdb.engine import Engine, InMessage, QueryOptions, RecordBatch
from sowdb.engine.live.options import SubscriptionOptions
from sowdb.engine.state.derived import View
from sowdb.errors import FailedPrecondition
from tests.support import ManualClock, open_engine

AGG = ["/symbol", "SUM(/qty) AS /qty", "COUNT(/id) AS /n", "MIN(/price) AS /low", "MAX(/price) AS /high"]
TOTALS = ["/symbol", "SUM(/qty) AS /qty", "COUNT(/id) AS /n", "AVG(/qty) AS /avg", "STDDEV_SAMP(/qty) AS /sd"]
CONFIG: dict[str, Any] = {
    "topic": [{"name": "orders", "key": ["/id"]}],
    "view": [
        {"name": "by_symbol", "underlying": "orders", "grouping": ["/symbol"], "projection": AGG},
        {
            "name": "big_by_symbol",
            "underlying": "orders",
            "grouping": ["/symbol"],
            "projection": AGG,
            "filter": "/qty >= 50",
        },
        {
            "name": "totals",  # only aggregates that take a batch of in-group updates at once
            "underlying": "orders",
            "grouping": ["/symbol"],
            "projection": TOTALS,
        },
        {
            "name": "by_region",  # a view of a view
            "underlying": "by_symbol",
            "grouping": ["SUBSTR(/symbol, 1, 1)"],
            "projection": ["SUBSTR(/symbol, 1, 1) AS /region", "SUM(/qty) AS /qty", "COUNT(/symbol) AS /symbols"],
        },
    ],
    "conflated_topic": [
        {"name": "orders_1s", "underlying": "orders", "interval": "1s"},
        {"name": "cheap_1s", "underlying": "orders", "interval": "1s", "filter": "/price < 50"},
        {"name": "by_symbol_1s", "underlying": "by_symbol", "interval": "1s"},
    ],
}


def pub(engine: Engine, topic: str, *docs: dict[str, Any]) -> None:
    engine.publish(topic, [InMessage(orjson.dumps(d)) for d in docs])


async def sow(engine: Engine, topic: str, **kw: Any) -> dict[str, Any]:
    out = {}
    async for event in engine.sow(QueryOptions(topic=topic, batch_size=1000, **kw)):
        if isinstance(event, RecordBatch):
            out.update({r.sow_key: orjson.loads(r.raw) for r in event.records})
    return out


async def test_views_equal_the_aggregated_query_under_random_changes(tmp_path: Path) -> None:
    """V-1 / Q-8: after every round of inserts, updates that move records between groups, and
    deletes, each view equals an aggregated query with the same definition, MIN / MAX included."""
    clock = ManualClock()
    engine = open_engine(tmp_path, CONFIG, clock=clock)
    rnd = random.Random(5)
    # quantities of every kind an aggregate meets: integers, floats (exact in binary, so sums
    # are exact whatever the order), numeric and other strings, null and missing
    quantities: list[Callable[[], Any]] = [lambda: rnd.randrange(100), lambda: rnd.randrange(100) + 0.5,
                                           lambda: str(rnd.randrange(100)), lambda: "n/a", lambda: None]  # fmt: skip
    for _ in range(30):
        docs = [
            {"id": rnd.randrange(60), "symbol": rnd.choice(["AA", "AB", "BA", "BB", "CC"]),
             "qty": rnd.choice(quantities)(), "price": rnd.randrange(1, 100)}
            for _ in range(rnd.randint(1, 8))
        ]  # fmt: skip
        for d in docs:
            if d["qty"] is None and rnd.random() < 0.5:
                del d["qty"]
        pub(engine, "orders", *docs)
        if rnd.random() < 0.4:
            engine.sow_delete("orders", filter=f"/id % 7 = {rnd.randrange(7)}")
        for view, flt in (("by_symbol", ""), ("big_by_symbol", "/qty >= 50")):
            expected = await sow(engine, "orders", filter=flt, grouping=["/symbol"], projection=AGG)
            assert await sow(engine, view) == expected
        assert await sow(engine, "totals") == await sow(engine, "orders", grouping=["/symbol"], projection=TOTALS)
        regions = await sow(
            engine,
            "by_symbol",
            grouping=["SUBSTR(/symbol, 1, 1)"],
            projection=["SUBSTR(/symbol, 1, 1) AS /region", "SUM(/qty) AS /qty", "COUNT(/symbol) AS /symbols"],
        )
        assert await sow(engine, "by_region") == regions
    engine.close()
    engine = open_engine(tmp_path, CONFIG, clock=clock)  # recomputed at start from the persistent topic
    assert await sow(engine, "by_symbol") == await sow(engine, "orders", grouping=["/symbol"], projection=AGG)
    engine.close()


async def test_in_group_updates_are_applied_a_batch_at_a_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """V-1: batches of integer updates that keep each record in its group take the view's batch
    path (one step per aggregate) and leave it equal to the aggregated query; a batch with one
    change of another kind (a float, a move to another group, a new record) takes the general
    path, unchanged by the check."""
    clock = ManualClock()
    engine = open_engine(tmp_path, CONFIG, clock=clock)
    taken: list[bool] = []
    batch_path = View._apply_updates

    def spy(self: View, changes: Any) -> Any:
        touched = batch_path(self, changes)
        if self.name == "totals":
            taken.append(touched is not None)
        return touched

    monkeypatch.setattr(View, "_apply_updates", spy)
    rnd = random.Random(11)
    symbols = {i: rnd.choice(["AA", "AB", "BA"]) for i in range(40)}
    pub(engine, "orders", *({"id": i, "symbol": s, "qty": rnd.randrange(100)} for i, s in symbols.items()))
    expected_paths = []
    floats: set[int] = set()  # records whose quantity is a float: their next update takes the general path
    for round_ in range(40):
        kind = round_ % 4
        ids = rnd.sample([i for i in range(40) if kind or i not in floats], 10)
        docs: list[dict[str, Any]] = [{"id": i, "symbol": symbols[i], "qty": rnd.randrange(100)} for i in ids]
        floats.difference_update(ids)
        if kind == 1:
            docs[-1]["qty"] = 2.5
            floats.add(ids[-1])
        elif kind == 2:
            moved = docs[-1]["id"]
            symbols[moved] = docs[-1]["symbol"] = "CC" if symbols[moved] != "CC" else "AA"
        elif kind == 3:
            docs.append({"id": 100 + round_, "symbol": "AA", "qty": 1})
        pub(engine, "orders", *docs)
        expected_paths.append(kind == 0)
        assert await sow(engine, "totals") == await sow(engine, "orders", grouping=["/symbol"], projection=TOTALS)
    assert taken[-40:] == expected_paths
    engine.close()


async def test_view_subscribers_see_group_updates_and_emptied_groups_leave(tmp_path: Path) -> None:
    engine = open_engine(tmp_path, CONFIG, clock=ManualClock())
    pub(engine, "orders", {"id": 1, "symbol": "AA", "qty": 5, "price": 10})
    sub, events = engine.placement.sow_and_subscribe(
        QueryOptions(topic="by_symbol"), options=SubscriptionOptions(oof=True)
    )
    async for _ in events:
        pass
    sub.release([r for r in engine.topics.sow["by_symbol"].records.values()])
    pub(engine, "orders", {"id": 2, "symbol": "AA", "qty": 7, "price": 3})
    pub(engine, "orders", {"id": 1, "symbol": "BB", "qty": 5, "price": 10})  # moves to another group
    engine.sow_delete("orders", sow_keys=["2"])  # AA is empty now
    got = [(e.kind, e.record.sow_key, e.reason, orjson.loads(e.record.raw)) for e in sub.drain()]
    assert got == [
        ("publish", '["AA"]', "", {"symbol": "AA", "qty": 12, "n": 2, "low": 3, "high": 10}),
        ("publish", '["AA"]', "", {"symbol": "AA", "qty": 7, "n": 1, "low": 3, "high": 3}),
        ("publish", '["BB"]', "", {"symbol": "BB", "qty": 5, "n": 1, "low": 10, "high": 10}),
        ("oof", '["AA"]', "deleted", {"symbol": "AA", "qty": 7, "n": 1, "low": 3, "high": 3}),
    ]
    with pytest.raises(FailedPrecondition, match="read-only"):
        pub(engine, "by_symbol", {"symbol": "x"})
    with pytest.raises(FailedPrecondition, match="read-only"):
        engine.sow_delete("by_symbol", filter="/qty > 0")
    with pytest.raises(FailedPrecondition, match="keeps no journal"):
        engine.placement.subscribe("by_symbol", bookmark="0")
    engine.close()


async def test_an_indexed_subscriber_sees_a_group_emptied_in_a_mixed_batch(tmp_path: Path) -> None:
    """One publish can both update one group and empty another: the view's batch mixes a
    publish and a removal, and a subscription filed by its ``/symbol = …`` conjunct still gets
    the ``deleted`` event, in order."""
    engine = open_engine(tmp_path, CONFIG, clock=ManualClock())
    pub(engine, "orders", {"id": 1, "symbol": "AA", "qty": 5, "price": 10})
    sub = engine.placement.subscribe(
        "by_symbol", filter="/symbol = 'AA'", options=SubscriptionOptions(deleted_events=True)
    )
    sub.release()
    assert engine.hub.stats().placement == {"indexed": 1, "scanned": 0}
    # BB gets a member first, then AA loses its only one
    pub(
        engine,
        "orders",
        {"id": 3, "symbol": "BB", "qty": 1, "price": 1},
        {"id": 1, "symbol": "BB", "qty": 5, "price": 10},
    )
    assert [(e.kind, e.record.sow_key) for e in sub.drain()] == [("deleted", '["AA"]')]
    engine.close()


async def test_conflated_topics_refresh_once_per_interval(tmp_path: Path) -> None:
    clock = ManualClock()
    engine = open_engine(tmp_path, CONFIG, clock=clock)
    pub(engine, "orders", {"id": 1, "symbol": "AA", "qty": 1, "price": 10})
    sub, events = engine.placement.sow_and_subscribe(
        QueryOptions(topic="orders_1s"), options=SubscriptionOptions(oof=True)
    )
    async for _ in events:
        pass
    sub.release()
    for q in range(2, 6):
        pub(engine, "orders", {"id": 1, "symbol": "AA", "qty": q, "price": 10})
    pub(engine, "orders", {"id": 2, "symbol": "AA", "qty": 1, "price": 99})
    pub(engine, "orders", {"id": 3, "symbol": "CC", "qty": 1, "price": 1})
    engine.sow_delete("orders", sow_keys=["3"])  # in and out within one interval: never shown
    assert engine.writer.flush_conflated() == 0  # the interval has not passed since start
    assert await sow(engine, "orders_1s") == {}  # so nothing published since is shown yet
    clock.now += 1_000_000
    assert engine.writer.flush_conflated() > 0
    assert await sow(engine, "orders_1s") == await sow(engine, "orders")
    assert set(await sow(engine, "cheap_1s")) == {"1"}  # the filter keeps cheap ones only
    assert (await sow(engine, "by_symbol_1s"))['["AA"]']["qty"] == 6  # a conflated copy of a view
    got = [(e.kind, e.record.sow_key, orjson.loads(e.record.raw).get("qty")) for e in sub.drain()]
    assert got == [("publish", "1", 5), ("publish", "2", 1)]  # one update per key, the latest
    pub(engine, "orders", {"id": 1, "symbol": "AA", "qty": 9, "price": 100})  # leaves cheap_1s
    engine.sow_delete("orders", sow_keys=["2"])
    clock.now += 1_000_000
    engine.writer.flush_conflated()
    assert set(await sow(engine, "cheap_1s")) == set()
    assert set(await sow(engine, "orders_1s")) == {"1"}
    assert [(e.kind, e.record.sow_key, e.reason) for e in sub.drain()] == [
        ("publish", "1", ""),
        ("oof", "2", "deleted"),
    ]
    engine.close()


def test_cyclic_derived_topics_are_refused() -> None:
    bad = {
        "topic": [{"name": "t", "key": ["/id"]}],
        "conflated_topic": [
            {"name": "a", "underlying": "b", "interval": "1s"},
            {"name": "b", "underlying": "a", "interval": "1s"},
        ],
    }
    with pytest.raises(ConfigError, match="cycle a -> b -> a"):
        config_from_dict(bad, source="x.toml")


async def test_derived_topics_count_removals_as_deletes_and_expirations(tmp_path: Path) -> None:
    """A delete in the underlying topic that removes a derived record (a group emptied, a
    conflated record gone) is a delete of the derived topic, not a publish; an expiration is an
    expiration. A group only updated by it is a publish (its record changed)."""
    clock = ManualClock()
    engine = open_engine(tmp_path, CONFIG, clock=clock)
    pub(engine, "orders", *({"id": i, "symbol": s, "qty": 1, "price": 1} for i, s in ((1, "AA"), (2, "BB"), (3, "BB"))))
    engine.writer.flush_conflated()
    clock.now += 2_000_000
    engine.writer.flush_conflated()

    def figures() -> dict[str, tuple[int, int, int]]:
        return {t.name: (t.publishes, t.deletes, t.expirations) for t in engine.stats(topics_only=True).topics}

    before = figures()
    engine.sow_delete("orders", filter="/id = 1")  # empties group AA
    clock.now += 2_000_000
    engine.writer.flush_conflated()
    after = figures()
    assert after["orders"] == (3, 1, 0)
    assert after["by_symbol"] == (before["by_symbol"][0], 1, 0)
    assert after["orders_1s"] == (before["orders_1s"][0], 1, 0)
    engine.sow_delete("orders", filter="/id = 2")  # BB keeps order 3: its group is updated
    clock.now += 2_000_000
    engine.writer.flush_conflated()
    last = figures()
    assert last["by_symbol"] == (before["by_symbol"][0] + 1, 1, 0)
    assert last["orders_1s"] == (before["orders_1s"][0], 2, 0)
    engine.close()
