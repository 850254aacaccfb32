"""Joined views (V-2) on the engine: upkeep under changes on every side, both join kinds, a
restart, and a property test against the same join computed from scratch. Through the real
server: ``tests/api/test_joined_views.py``."""

from __future__ import annotations

import random
import tempfile
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sowdb.config import ConfigError, config_from_dict
from sowdb.engine import Engine, InMessage, SubscriptionOptions
from sowdb.expr import parse_aggregation
from tests.support import ManualClock, open_engine

BY_TIER: dict[str, Any] = {
    "name": "notional_by_tier",
    "underlying": "orders",
    "join": ["[orders]./customer_id = [customers]./id", "[orders]./symbol = [instruments]./symbol"],
    "grouping": ["[customers]./tier"],
    "projection": [
        "[customers]./tier AS /tier",
        "SUM([orders]./qty * [instruments]./price) AS /notional",
        "COUNT([orders]./id) AS /orders",
        "MAX([instruments]./price) AS /top_price",
    ],
}
BY_CUSTOMER: dict[str, Any] = {  # a LEFT join: orders of unknown customers still count, under a NULL name
    "name": "qty_by_customer",
    "underlying": "orders",
    "join": ["LEFT [orders]./customer_id = [customers]./id"],
    "grouping": ["[orders]./customer_id"],
    "projection": ["[orders]./customer_id AS /customer", "[customers]./name AS /name", "SUM([orders]./qty) AS /qty"],
}
CONFIG: dict[str, Any] = {
    "topic": [
        {"name": "orders", "key": ["/id"]},
        {"name": "customers", "key": ["/id"]},
        {"name": "instruments", "key": ["/symbol"]},
    ],
    "view": [
        BY_TIER,
        BY_CUSTOMER,
        {  # a view of a joined view
            "name": "tiers",
            "underlying": "notional_by_tier",
            "grouping": ["/orders > 1"],
            "projection": ["/orders > 1 AS /busy", "COUNT(/tier) AS /tiers"],
        },
    ],
}


def pub(engine: Engine, topic: str, *docs: dict[str, Any]) -> None:
    engine.publish(topic, [InMessage(orjson.dumps(d)) for d in docs])


def rows(engine: Engine, view: str) -> dict[str, Any]:
    topic = engine.topics.get(view)
    assert topic is not None
    return {k: r.data for k, r in topic.records.items()}


def state(engine: Engine, topic: str) -> list[dict[str, Any]]:
    t = engine.topics.get(topic)
    assert t is not None
    return [r.data for r in t.records.values() if r.data is not None]


def from_scratch(engine: Engine, view: dict[str, Any]) -> dict[str, Any]:
    """The view as a nested-loop join of the topics' current records, then aggregated: what the
    incremental upkeep must always equal."""
    orders, customers, instruments = (state(engine, t) for t in ("orders", "customers", "instruments"))
    joined: list[dict[str, Any]] = []
    for o in orders:
        if view is BY_SYMBOL:
            joined += [{"[orders]": o, "[instruments]": i} for i in instruments if i.get("symbol") == o.get("symbol")]
            continue
        if view is BY_CUSTOMER:
            matches = [c for c in customers if o.get("customer_id") is not None and c.get("id") == o["customer_id"]]
            joined += [{"[orders]": o, "[customers]": c} for c in matches] or [{"[orders]": o}]
            continue
        for c in customers:
            if o.get("customer_id") is None or c.get("id") != o["customer_id"]:
                continue
            for i in instruments:
                if o.get("symbol") is not None and i.get("symbol") == o["symbol"]:
                    joined.append({"[orders]": o, "[customers]": c, "[instruments]": i})
    agg = parse_aggregation(view["grouping"], view["projection"])
    out: dict[str, list[dict[str, Any]]] = {}
    for row in joined:
        out.setdefault(orjson.dumps(list(agg.group_key(row))).decode(), []).append(row)
    return {k: agg.run((r, None) for r in members)[0] for k, members in out.items()}


def test_a_change_on_either_side_updates_the_joined_rows(tmp_path: Path) -> None:
    """V-2: an order joins its customer and instrument; a customer's new tier moves its orders'
    notional; a price change reprices every order of the symbol; a deleted customer takes its
    orders out of an inner join, and a LEFT join keeps them without the customer's fields."""
    engine = open_engine(tmp_path, CONFIG)
    pub(engine, "customers", {"id": 1, "tier": "gold", "name": "Ann"}, {"id": 2, "tier": "silver", "name": "Bob"})
    pub(engine, "instruments", {"symbol": "IBM", "price": 10}, {"symbol": "MSFT", "price": 20})
    orders = [(1, 1, "IBM", 5), (2, 2, "MSFT", 1), (3, 1, "MSFT", 2), (4, 9, "IBM", 7)]
    pub(engine, "orders", *({"id": i, "customer_id": c, "symbol": s, "qty": q} for i, c, s, q in orders))
    assert rows(engine, "notional_by_tier") == {
        '["gold"]': {"tier": "gold", "notional": 90, "orders": 2, "top_price": 20},
        '["silver"]': {"tier": "silver", "notional": 20, "orders": 1, "top_price": 20},
    }
    pub(engine, "instruments", {"symbol": "MSFT", "price": 30})
    pub(engine, "customers", {"id": 2, "tier": "gold", "name": "Bob"})
    assert rows(engine, "notional_by_tier") == {
        '["gold"]': {"tier": "gold", "notional": 140, "orders": 3, "top_price": 30},
    }
    assert rows(engine, "tiers") == {"[true]": {"busy": True, "tiers": 1}}
    assert rows(engine, "qty_by_customer")["[9]"] == {"customer": 9, "qty": 7}
    engine.sow_delete("customers", filter="/id = 1")
    assert rows(engine, "notional_by_tier") == {
        '["gold"]': {"tier": "gold", "notional": 30, "orders": 1, "top_price": 30},
    }
    assert rows(engine, "qty_by_customer") == {
        "[1]": {"customer": 1, "qty": 7},  # LEFT: Ann's orders stay, without her name
        "[2]": {"customer": 2, "name": "Bob", "qty": 1},
        "[9]": {"customer": 9, "qty": 7},
    }
    pub(engine, "customers", {"id": 9, "tier": "bronze", "name": "Cy"})  # order 4 finds its customer
    assert rows(engine, "qty_by_customer")["[9]"] == {"customer": 9, "name": "Cy", "qty": 7}
    assert rows(engine, "notional_by_tier")['["bronze"]'] == {
        "tier": "bronze", "notional": 70, "orders": 1, "top_price": 10,
    }  # fmt: skip
    engine.sow_delete("instruments", filter="/symbol = 'MSFT'")
    assert set(rows(engine, "notional_by_tier")) == {'["bronze"]'}  # gold emptied: deleted
    engine.close()


def test_repeated_updates_of_an_order_keep_its_joined_rows_right(tmp_path: Path) -> None:
    """The usual change, an order updated with its customer and symbol unchanged, is applied in
    place (no re-join); many in a row, in one batch and in several, leave the view as the join
    from scratch."""
    engine = open_engine(tmp_path, CONFIG)
    pub(engine, "customers", {"id": 1, "tier": "gold", "name": "Ann"}, {"id": 2, "tier": "gold", "name": "Bob"})
    pub(engine, "instruments", {"symbol": "A", "price": 3})
    for qty in range(5):
        pub(engine, "orders", *({"id": i, "customer_id": 1 + i % 2, "symbol": "A", "qty": qty + i} for i in range(4)))
        pub(
            engine,
            "orders",
            {"id": 0, "customer_id": 1, "symbol": "A", "qty": 1},
            {"id": 0, "customer_id": 1, "symbol": "A", "qty": 2},
        )
        for view in (BY_TIER, BY_CUSTOMER):
            assert rows(engine, view["name"]) == from_scratch(engine, view)
    assert rows(engine, "notional_by_tier")['["gold"]']["notional"] == 3 * (2 + 5 + 6 + 7)
    engine.close()


def test_an_update_in_place_reads_the_old_order_from_its_joined_row_not_its_bytes(tmp_path: Path) -> None:
    """The old version of an updated order is long out of the recently decoded versions, most
    of the time; its joined row keeps what it added to its group and the join values it was
    built with, so the upkeep never decodes it again (it cost more than the rest of the update,
    issue 42)."""
    engine = open_engine(tmp_path, CONFIG)
    pub(engine, "customers", {"id": 1, "tier": "gold", "name": "Ann"})
    pub(engine, "instruments", {"symbol": "A", "price": 3})
    pub(engine, "orders", {"id": 7, "customer_id": 1, "symbol": "A", "qty": 2})
    orders = engine.topics.sow_topic("orders")
    old = orders.records["7"]
    old.kept = None  # as the ring of recent versions leaves it
    pub(engine, "orders", {"id": 7, "customer_id": 1, "symbol": "A", "qty": 5})
    assert old.kept is None, "the joined view decoded the old version again"
    for view in (BY_TIER, BY_CUSTOMER):
        assert rows(engine, view["name"]) == from_scratch(engine, view)
    engine.close()


def test_joined_views_are_rebuilt_at_start(tmp_path: Path) -> None:
    """V-2: a joined view keeps no state of its own; after a restart it is built again from every
    joined topic and equals what it was."""
    clock = ManualClock()
    engine = open_engine(tmp_path, CONFIG, clock=clock)
    pub(engine, "customers", *({"id": i, "tier": f"t{i % 3}", "name": f"c{i}"} for i in range(10)))
    pub(engine, "instruments", *({"symbol": f"S{i}", "price": i + 1} for i in range(4)))
    pub(engine, "orders", *({"id": i, "customer_id": i % 12, "symbol": f"S{i % 5}", "qty": i} for i in range(50)))
    before = {v: rows(engine, v) for v in ("notional_by_tier", "qty_by_customer", "tiers")}
    assert before["notional_by_tier"] == from_scratch(engine, BY_TIER)
    engine.close()
    engine = open_engine(tmp_path, CONFIG, clock=clock)
    assert {v: rows(engine, v) for v in before} == before
    engine.close()


@pytest.mark.parametrize(
    ("join", "problem"),
    [
        (["[orders]./customer_id = [nobody]./id"], "join: 'nobody' is not a configured topic"),
        (["[orders]./customer_id = [orders]./id"], "two different topics"),
        (["[customers]./id = [instruments]./symbol"], "neither is in the view yet"),
        (["[orders]./customer_id = [customers]./id", "[customers]./id = [orders]./id"], "both are"),
        (["[orders]./customer_id < [customers]./id"], "compares two fields with ="),
        (["/customer_id = [customers]./id"], "[topic]./field"),
    ],
)
def test_bad_joins_stop_the_config(join: list[str], problem: str) -> None:
    view = {**BY_TIER, "join": join, "grouping": ["[orders]./id"], "projection": ["COUNT([orders]./id) AS /n"]}
    with pytest.raises(ConfigError, match=problem.replace("[", r"\[").replace(".", r"\.")):
        config_from_dict({**CONFIG, "view": [view]}, source="<test>")


OPS = st.lists(
    st.one_of(
        st.tuples(
            st.just("orders"),
            st.integers(0, 4),  # few orders and customers: updates in place and re-joins both come often
            st.integers(0, 3),
            st.sampled_from(["A", "B", "C"]),
            st.integers(-3, 9),
        ),
        st.tuples(st.just("customers"), st.integers(0, 4), st.sampled_from(["gold", "silver", None])),
        st.tuples(st.just("instruments"), st.sampled_from(["A", "B", "C"]), st.integers(1, 4)),
        st.tuples(st.just("delete"), st.sampled_from(["orders", "customers", "instruments"]), st.integers(0, 5)),
    ),
    max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(OPS)
def test_joined_views_equal_the_join_from_scratch(ops: list[tuple[Any, ...]]) -> None:
    """V-2, issue 42: after any sequence of publishes and deletes on both sides (records moving
    between join values, NULL tiers, deletes of absent keys), each joined view equals the join
    computed from scratch, and so does a restart's."""
    with tempfile.TemporaryDirectory() as tmp:
        engine = open_engine(Path(tmp), CONFIG)
        for op in ops:
            if op[0] == "orders":
                pub(engine, "orders", {"id": op[1], "customer_id": op[2], "symbol": op[3], "qty": op[4]})
            elif op[0] == "customers":
                pub(engine, "customers", {"id": op[1], "tier": op[2], "name": f"c{op[1]}"})
            elif op[0] == "instruments":
                pub(engine, "instruments", {"symbol": op[1], "price": op[2]})
            else:
                key = "/symbol" if op[1] == "instruments" else "/id"
                value = repr("ABC"[op[2] % 3]) if op[1] == "instruments" else op[2]
                engine.sow_delete(op[1], filter=f"{key} = {value}")
            for view in (BY_TIER, BY_CUSTOMER):
                assert rows(engine, view["name"]) == from_scratch(engine, view), op
        engine.close()
        engine = open_engine(Path(tmp), CONFIG)
        assert rows(engine, "notional_by_tier") == from_scratch(engine, BY_TIER)
        engine.close()


BY_SYMBOL: dict[str, Any] = {  # one edge and two aggregates, one of which counts the NULLs out
    "name": "by_symbol",
    "underlying": "orders",
    "join": ["[orders]./symbol = [instruments]./symbol"],
    "grouping": ["[instruments]./symbol"],
    "projection": [
        "[instruments]./symbol AS /symbol",
        "SUM([orders]./qty * [instruments]./price) AS /notional",
        "COUNT([orders]./qty) AS /counted",
    ],
}
BATCHES = st.lists(
    st.tuples(
        st.lists(  # one publish of orders: few ids, so a batch updates an order twice and a group often
            st.tuples(
                st.integers(0, 4),
                st.integers(0, 2),
                st.sampled_from(["A", "B"]),
                st.sampled_from([1, 2, 7, -3, 1.5, 2.25, None, "x"]),  # NULL and non-numeric count for nothing
            ),
            min_size=1,
            max_size=8,
        ),
        st.sampled_from([None, ("customers", 1, "silver"), ("instruments", "A", 5), ("delete", 3)]),
    ),
    max_size=12,
)


@settings(max_examples=40, deadline=None)
@given(BATCHES)
def test_batches_of_order_updates_equal_the_join_from_scratch(batches: list[tuple[Any, ...]]) -> None:
    """Issue 42: a publish of many orders runs the upkeep's loop over the updates in place (one
    per group and aggregate at the end); an order updated twice in one batch, an update that
    moves it (its customer or symbol) or inserts one in the middle, NULL and non-numeric
    quantities, and changes on the other sides between batches all leave each joined view equal
    to the join computed from scratch."""
    with tempfile.TemporaryDirectory() as tmp:
        engine = open_engine(Path(tmp), {**CONFIG, "view": [*CONFIG["view"], BY_SYMBOL]})
        pub(engine, "customers", *({"id": i, "tier": ["gold", "silver", None][i], "name": f"c{i}"} for i in range(3)))
        pub(engine, "instruments", {"symbol": "A", "price": 3}, {"symbol": "B", "price": 4})
        pub(engine, "orders", *({"id": i, "customer_id": i % 3, "symbol": "AB"[i % 2], "qty": i} for i in range(4)))
        for orders, other in batches:
            pub(engine, "orders", *({"id": o, "customer_id": c, "symbol": s, "qty": q} for o, c, s, q in orders))
            if other is not None and other[0] == "customers":
                pub(engine, "customers", {"id": other[1], "tier": other[2], "name": "n"})
            elif other is not None and other[0] == "instruments":
                pub(engine, "instruments", {"symbol": other[1], "price": other[2]})
            elif other is not None:
                engine.sow_delete("orders", filter=f"/id = {other[1]}")
            for view in (BY_TIER, BY_CUSTOMER, BY_SYMBOL):
                assert rows(engine, view["name"]) == from_scratch(engine, view), orders
        engine.close()


def test_a_replica_keeps_the_joined_view_from_the_primarys_journal(tmp_path: Path) -> None:
    """V-2, HA-2: a replica derives a joined view from the entries it applies, change for change
    (same rows, same bookmarks)."""
    primary = open_engine(tmp_path / "p", CONFIG, clock=ManualClock())
    replica = open_engine(tmp_path / "r", CONFIG, clock=ManualClock())
    options = SubscriptionOptions()
    subs = [e.placement.subscribe("notional_by_tier", filter="", options=options) for e in (primary, replica)]
    pub(primary, "customers", {"id": 1, "tier": "gold"}, {"id": 2, "tier": "silver"})
    pub(primary, "instruments", {"symbol": "A", "price": 2})
    pub(primary, "orders", *({"id": i, "customer_id": 1 + i % 2, "symbol": "A", "qty": i} for i in range(6)))
    pub(primary, "customers", {"id": 2, "tier": "gold"})
    primary.sow_delete("instruments", filter="/symbol = 'A'")
    pub(primary, "instruments", {"symbol": "A", "price": 3})
    entries = list(primary.store.iter_journal(0))
    replica.writer.apply_replicated(entries[:3])
    replica.writer.apply_replicated(entries[3:])
    assert rows(replica, "notional_by_tier") == rows(primary, "notional_by_tier") == from_scratch(primary, BY_TIER)

    def changes(sub: Any) -> list[tuple[str, Any, int]]:
        return [(e.kind, e.record.data, e.record.bookmark) for e in sub.drain()]

    assert changes(subs[1]) == changes(subs[0])
    replica.close()
    primary.close()


CHAIN: dict[str, Any] = {
    "topic": [
        {"name": "orders", "key": ["/id"]},
        {"name": "customers", "key": ["/id"]},
        {"name": "regions", "key": ["/code"]},
    ],
    "view": [
        {
            "name": "qty_by_region",  # orders -> customers -> regions: a change to a region reaches
            "underlying": "orders",  # its orders through its customers
            "join": ["[orders]./cid = [customers]./id", "LEFT [customers]./region = [regions]./code"],
            "grouping": ["[regions]./name"],
            "projection": ["[regions]./name AS /region", "SUM([orders]./qty) AS /qty", "COUNT([orders]./id) AS /n"],
        }
    ],
}


def test_a_chain_of_joins_follows_changes_two_steps_away(tmp_path: Path) -> None:
    """V-2: a join entry may start from a topic another entry brought in; a change to the last
    topic (a region renamed, deleted) or the middle one (a customer moving region) updates the
    rows of the first topic it reaches; the LEFT join keeps customers without a region (under a
    NULL region) while the inner one drops orders without a customer."""
    engine = open_engine(tmp_path, CHAIN)
    rnd = random.Random(7)
    agg = parse_aggregation(CHAIN["view"][0]["grouping"], CHAIN["view"][0]["projection"])
    for step in range(300):
        kind = rnd.choice(["orders", "customers", "regions", "delete"])
        if kind == "orders":
            pub(engine, "orders", {"id": rnd.randrange(8), "cid": rnd.randrange(5), "qty": rnd.randrange(10)})
        elif kind == "customers":
            pub(engine, "customers", {"id": rnd.randrange(5), "region": rnd.choice(["N", "S", "E"])})
        elif kind == "regions":
            pub(engine, "regions", {"code": rnd.choice(["N", "S"]), "name": rnd.choice(["north", "south", "polar"])})
        else:
            topic = rnd.choice(["orders", "customers", "regions"])
            key = "/code" if topic == "regions" else "/id"
            engine.sow_delete(
                topic, filter=f"{key} = {rnd.choice(['N', 'S']) if topic == 'regions' else rnd.randrange(8)!r}"
            )
        joined = []
        for o in state(engine, "orders"):
            for c in (c for c in state(engine, "customers") if c["id"] == o["cid"]):
                regions = [r for r in state(engine, "regions") if r["code"] == c["region"]]
                joined += [{"[orders]": o, "[customers]": c, "[regions]": r} for r in regions] or [
                    {"[orders]": o, "[customers]": c}
                ]
        groups: dict[str, list[dict[str, Any]]] = {}
        for row in joined:
            groups.setdefault(orjson.dumps(list(agg.group_key(row))).decode(), []).append(row)
        expected = {k: agg.run((r, None) for r in members)[0] for k, members in groups.items()}
        assert rows(engine, "qty_by_region") == expected, step
    engine.close()


def test_a_joined_view_reads_no_replaced_version_of_its_anchor_topic(tmp_path: Path) -> None:
    """Issue 39: a joined view takes the version an order update replaced from its own entry
    for the order, so an orders topic followed by joined views alone asks the store for none
    (the arena made each from its slot: ~4 µs an update); a plain view of the same topic still
    asks, and so do the joined topics' changes (their old versions find the rows to re-join).
    Updates in place, repeated in one batch, moving an order, a delete and a re-insert leave
    the view equal to the join from scratch."""
    engine = open_engine(tmp_path, {**CONFIG, "view": [BY_SYMBOL]})
    fan_out = engine.writer.fan_out
    assert not fan_out.olds_wanted("orders")
    assert fan_out.olds_wanted("instruments")
    pub(engine, "instruments", {"symbol": "A", "price": 3}, {"symbol": "B", "price": 4})
    pub(engine, "orders", *({"id": i, "symbol": "AB"[i % 2], "qty": i} for i in range(4)))
    for batch in (
        [{"id": 0, "symbol": "A", "qty": 5}, {"id": 0, "symbol": "A", "qty": 6}],  # in place, twice
        [{"id": 1, "symbol": "A", "qty": 2}, {"id": 2, "symbol": "B", "qty": 1}],  # moved, then in place
        [{"id": 1, "symbol": "B", "qty": 3}, {"id": 9, "symbol": "A", "qty": 1}],  # moved back; an insert
    ):
        pub(engine, "orders", *batch)
        assert rows(engine, "by_symbol") == from_scratch(engine, BY_SYMBOL)
    engine.sow_delete("orders", filter="/id = 0")
    pub(engine, "orders", {"id": 0, "symbol": "B", "qty": 7}, {"id": 3, "symbol": "A", "qty": 8})
    assert rows(engine, "by_symbol") == from_scratch(engine, BY_SYMBOL)
    assert rows(engine, "by_symbol")['["A"]']["notional"] == 3 * (1 + 8)
    engine.close()
    plain = {**CONFIG, "view": [BY_SYMBOL, {"name": "n", "underlying": "orders", "grouping": ["/symbol"],
                                             "projection": ["/symbol AS /symbol", "COUNT(/id) AS /n"]}]}  # fmt: skip
    engine = open_engine(tmp_path / "plain", plain)
    assert engine.writer.fan_out.olds_wanted("orders")
    engine.close()
