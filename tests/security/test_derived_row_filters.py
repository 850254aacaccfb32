"""Topics derived from a joined view (a view of it, a conflated topic over it, and chains of
these) under row filters on the joined topics (V-2, A-2; docs/views.md, docs/security.md): each
reader reads them computed from the rows it may see, as if the whole chain ran over its filtered
topics -- queries, pages, sow_and_subscribe with oof and delta, live through changes on either
side (a customer leaving or entering a reader's filter), after a restart -- while a reader
without filters reads the shared topics. Every expectation is computed from scratch from the
topics' rows, as an outsider would from the docs."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sowdb_client import Mirror, PermissionDeniedError
from tests.security.conftest import ROLES, TOPICS, USERS, Secured, StartSecured, secured_config
from tests.support import serving, take

LINES: dict[str, Any] = {  # the joined view: one row per order of a known customer
    "name": "order_lines",
    "underlying": "trades",
    "join": ["[trades]./customer = [customers]./id"],
    "grouping": ["[trades]./id"],
    "projection": [
        "[trades]./id AS /order",
        "[customers]./tier AS /tier",
        "[customers]./region AS /region",
        "SUM([trades]./qty) AS /qty",
    ],
}
BY_TIER: dict[str, Any] = {  # a view of the joined view
    "name": "by_tier",
    "underlying": "order_lines",
    "grouping": ["/tier"],
    "projection": ["/tier", "COUNT(/order) AS /orders", "SUM(/qty) AS /qty"],
}
BY_REGION: dict[str, Any] = {  # a view of a conflated topic over the joined view
    "name": "by_region",
    "underlying": "order_lines_100ms",
    "grouping": ["/region"],
    "projection": ["/region", "SUM(/qty) AS /qty"],
}
DERIVED_TOPICS: dict[str, Any] = {
    "topic": [*TOPICS["topic"], {"name": "trades", "key": ["/id"]}, {"name": "customers", "key": ["/id"]}],
    "view": [LINES, BY_TIER, BY_REGION],
    "conflated_topic": [
        {"name": "order_lines_100ms", "underlying": "order_lines", "interval": "100ms"},
        {"name": "by_tier_100ms", "underlying": "by_tier", "interval": "100ms"},
    ],
}
DERIVED = ["by_tier", "order_lines_100ms", "by_tier_100ms", "by_region"]
PATTERNS = ["trades", "order_lines", "^by_", "_100ms$"]  # no role names a derived topic
DERIVED_ROLES: list[dict[str, Any]] = [
    *ROLES,
    {"name": "eu_customers", "read": ["customers"], "filter": "/region = 'eu'"},
    {"name": "us_customers", "read": ["customers"], "filter": "/region = 'us'"},
    {"name": "all_customers", "read": ["customers"]},
    {"name": "derived", "read": PATTERNS},
]
DERIVED_USERS = {
    **USERS,
    "eu": ["eu_customers", "derived"],
    "us": ["us_customers", "derived"],
    "everything": ["all_customers", "derived"],
    "no_customers": ["derived"],
}
SEES: dict[str, Callable[[dict[str, Any]], bool]] = {
    "eu": lambda c: c["region"] == "eu",
    "us": lambda c: c["region"] == "us",
    "everything": lambda c: True,
    "admin": lambda c: True,
}
CUSTOMERS = [
    {"id": 1, "region": "eu", "tier": "gold"},
    {"id": 2, "region": "us", "tier": "gold"},
    {"id": 3, "region": "eu", "tier": "silver"},
    {"id": 4, "region": "us", "tier": "silver"},
]
ORDERS = [
    {"id": i, "customer": c, "qty": q} for i, c, q in [(1, 1, 5), (2, 2, 7), (3, 3, 1), (4, 4, 2), (5, 1, 3), (6, 9, 4)]
]


def expected(customers: list[dict[str, Any]], orders: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Every derived topic, computed from scratch over the customers a reader sees."""
    by_id = {c["id"]: c for c in customers}
    lines = [
        {"order": o["id"], "tier": c["tier"], "region": c["region"], "qty": o["qty"]}
        for o in orders
        if (c := by_id.get(o["customer"])) is not None
    ]
    tiers: dict[str, dict[str, Any]] = {}
    regions: dict[str, dict[str, Any]] = {}
    for line in lines:
        t = tiers.setdefault(line["tier"], {"tier": line["tier"], "orders": 0, "qty": 0})
        t["orders"] += 1
        t["qty"] += line["qty"]
        r = regions.setdefault(line["region"], {"region": line["region"], "qty": 0})
        r["qty"] += line["qty"]
    by_tier = sorted(tiers.values(), key=repr)
    return {
        "by_tier": by_tier,
        "order_lines_100ms": sorted(lines, key=repr),
        "by_tier_100ms": by_tier,
        "by_region": sorted(regions.values(), key=repr),
    }


async def state(admin: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The customers and orders as they are now."""
    customers = [r.json() for r in await admin.sow("customers").records()]
    return customers, [r.json() for r in await admin.sow("trades").records()]


async def wanted(admin: Any, reader: str) -> dict[str, list[dict[str, Any]]]:
    customers, orders = await state(admin)
    return expected([c for c in customers if SEES[reader](c)], orders)


async def rows(client: Any, topic: str, **options: Any) -> list[dict[str, Any]]:
    return sorted((r.json() for r in await client.sow(topic, **options).records()), key=repr)


async def settled(client: Any, topic: str, want: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The topic's rows once they are ``want`` (a conflated topic refreshes every 100 ms), or
    as they are after 5 s."""
    got = await rows(client, topic)
    async with asyncio.timeout(5):
        while got != want:
            await asyncio.sleep(0.05)
            got = await rows(client, topic)
    return got


async def follow(stream: Any, mirror: Mirror, want: list[dict[str, Any]]) -> None:
    """Apply the stream's events to ``mirror`` until it holds ``want`` (fails after 5 s)."""
    try:
        async with asyncio.timeout(5):
            while sorted(mirror.values(), key=repr) != want:
                for e in await take(stream, 1):
                    mirror.apply(e)
    except TimeoutError:
        assert sorted(mirror.values(), key=repr) == want


def config(home: Path, roles: list[dict[str, Any]] = DERIVED_ROLES) -> Any:
    return secured_config(home, topics=DERIVED_TOPICS, roles=roles, users=DERIVED_USERS)


async def start(start_secured: StartSecured) -> Secured:
    s = await start_secured(topics=DERIVED_TOPICS, roles=DERIVED_ROLES, users=DERIVED_USERS)
    async with s.client("admin") as admin:
        await admin.publish("customers", CUSTOMERS)
        await admin.publish("trades", ORDERS)
    return s


async def check_every_reader(s: Secured) -> None:
    """Each reader's rows of every derived topic are those computed from its own customers."""
    async with s.client("admin") as admin:
        for reader in SEES:
            want = await wanted(admin, reader)
            async with s.client(reader) as client:
                for topic in DERIVED:
                    assert await settled(client, topic, want[topic]) == want[topic], (reader, topic)


async def test_each_reader_reads_the_derived_topics_of_its_own_rows(start_secured: StartSecured) -> None:
    """eu and us read every topic derived from the joined view computed from their customers
    only, by name (no role names those topics: a pattern in ``read`` is enough); a reader
    without filters and the admin read the shared ones. A page ranks the reader's rows; a
    pattern does not reach a derived topic its caller reads under filters (name it)."""
    s = await start(start_secured)
    await check_every_reader(s)
    async with s.client("eu") as eu, s.client("us") as us, s.client("everything") as everything:
        gold, silver = {"tier": "gold", "orders": 2, "qty": 8}, {"tier": "silver", "orders": 1, "qty": 1}
        assert await rows(eu, "by_tier") == [gold, silver]
        assert await rows(us, "by_region") == [{"region": "us", "qty": 9}]
        assert await rows(eu, "by_tier", top_n=1, order_by="/qty DESC") == [gold]
        assert await rows(us, "by_tier", top_n=1, order_by="/qty DESC") == [{"tier": "gold", "orders": 1, "qty": 7}]
        counted = await rows(eu, "by_tier", grouping=["/orders"], projection=["/orders", "SUM(/qty) AS /qty"])
        assert counted == [{"orders": 1, "qty": 1}, {"orders": 2, "qty": 8}]  # an aggregate of its copy
        assert await rows(eu, "^by_") == []  # by name only
        assert {r["tier"] for r in await rows(everything, "^by_tier$")} == {"gold", "silver"}
        stream = eu.sow_and_subscribe("^by_", oof=True)  # nor a pattern's query part
        first = await take(stream, 3)
        assert [e.kind for e in first] == ["subscribed", "group_begin", "group_end"]
        stream.cancel()
        assert {t.name: t.record_count for t in await eu.list_topics()}["by_tier"] == 0  # counts hidden rows


async def test_a_restart_keeps_each_readers_rows(tmp_path: Path) -> None:
    """The copies are built again from the stored topics after a restart."""
    for run in range(2):
        async with serving(config(tmp_path)) as server:
            s = Secured(server)
            if run == 0:
                async with s.client("admin") as admin:
                    await admin.publish("customers", CUSTOMERS)
                    await admin.publish("trades", ORDERS)
            await check_every_reader(s)


async def test_live_changes_on_either_side_follow_each_readers_rows(start_secured: StartSecured) -> None:
    """sow_and_subscribe with oof (and one with delta) on every derived topic, for eu, us and a
    reader without filters: orders change and come and go, a customer moves from eu to us
    (its rows leave eu's topics and enter us's), changes tier, goes and comes; each mirror ends
    equal to the topics computed from scratch over its reader's customers."""
    s = await start(start_secured)
    async with (
        s.client("admin") as admin,
        s.client("eu") as eu,
        s.client("us") as us,
        s.client("everything") as everything,
    ):
        readers = {"eu": eu, "us": us, "everything": everything}
        streams = {(r, t): c.sow_and_subscribe(t, oof=True) for r, c in readers.items() for t in DERIVED}
        deltas = {r: c.sow_and_subscribe("by_tier", delta=True, oof=True) for r, c in readers.items()}
        mirrors = {k: Mirror() for k in streams} | {(r, "delta"): Mirror(delta=True) for r in readers}
        for k, stream in [*streams.items(), *(((r, "delta"), d) for r, d in deltas.items())]:
            for e in await take(stream, 3):
                mirrors[k].apply(e)
        ops: list[tuple[str, list[dict[str, Any]] | str]] = [
            ("trades", [{"id": 1, "customer": 1, "qty": 9}]),  # eu's gold qty
            ("trades", [{"id": 7, "customer": 2, "qty": 1}]),  # a new us order
            ("customers", [{"id": 3, "region": "us", "tier": "silver"}]),  # out of eu, into us
            ("customers", [{"id": 2, "region": "us", "tier": "silver"}]),  # a tier change
            ("trades", "/id = 5"),  # a delete
            ("customers", "/id = 4"),  # a customer goes: its order joins nothing
            ("customers", [{"id": 9, "region": "eu", "tier": "gold"}]),  # order 6 joins
            ("customers", [{"id": 3, "region": "eu", "tier": "gold"}]),  # back into eu
        ]
        for topic, op in ops:
            if isinstance(op, str):
                await admin.sow_delete(topic, filter=op)
            else:
                await admin.publish(topic, op)
            for r in readers:
                want = await wanted(admin, r)
                for t in DERIVED:
                    await follow(streams[(r, t)], mirrors[(r, t)], want[t])
                await follow(deltas[r], mirrors[(r, "delta")], want["by_tier"])
        for stream in [*streams.values(), *deltas.values()]:
            stream.cancel()


async def test_delta_and_aggregated_subscribers_get_their_own_groups(start_secured: StartSecured) -> None:
    """D-2 on the copy: eu's gold group changes its qty only (its count stays), us's is not
    touched by an eu order at all; Q-8 live over a derived topic counts the reader's rows."""
    s = await start(start_secured)
    async with s.client("admin") as admin, s.client("eu") as eu, s.client("us") as us:
        eu_delta = eu.sow_and_subscribe("by_tier", delta=True)
        us_delta = us.sow_and_subscribe("by_tier", delta=True)
        total = eu.sow_and_subscribe("by_region", grouping=["/region"], projection=["SUM(/qty) AS /qty"])
        await take(eu_delta, 4)
        await take(us_delta, 4)
        assert [r.json() for r in (await take(total, 4))[2].records] == [{"qty": 9}]  # eu's 5 + 1 + 3
        await admin.publish("trades", [{"id": 1, "customer": 1, "qty": 9}])
        await admin.publish("trades", [{"id": 2, "customer": 2, "qty": 8}])
        assert [r.json() for r in (await take(eu_delta, 1))[0].records] == [{"qty": 12}]
        assert [r.json() for r in (await take(us_delta, 1))[0].records] == [{"qty": 8}]  # not eu's change
        assert [r.json() for r in (await take(total, 1))[0].records] == [{"qty": 13}]  # at the next refresh
        for stream in (eu_delta, us_delta, total):
            stream.cancel()


async def test_rights_on_derived_topics(start_secured: StartSecured) -> None:
    """Reading a derived topic needs read on it and on every topic under it: without read on
    customers it is refused, as the joined view is."""
    s = await start(start_secured)
    async with s.client("no_customers") as reader:
        for topic in ["order_lines", *DERIVED]:
            with pytest.raises(PermissionDeniedError, match=topic):
                await reader.sow(topic).records()
            with pytest.raises(PermissionDeniedError, match=topic):
                await take(reader.sow_and_subscribe(topic), 1)


async def test_a_changed_row_filter_ends_the_subscriptions_and_copies_go(start_secured: StartSecured) -> None:
    """A-4: a reload that changes eu's filter ends its subscriptions to the derived topics; it
    then reads the copies of its new rows; no copy is held by a subscription once all end, and
    each copy still kept is held only by the copies that follow it."""
    s = await start(start_secured)
    engine = s.server.engine
    assert engine is not None
    joins = engine.placement.joins
    async with s.client("eu") as eu:
        streams = [eu.sow_and_subscribe(t, oof=True) for t in DERIVED]
        for stream in streams:
            await take(stream, 4)
        assert len(joins) == 5  # of order_lines, by_tier, order_lines_100ms, by_tier_100ms, by_region
        roles = [{**r, "filter": "/region = 'us'"} if r["name"] == "eu_customers" else r for r in DERIVED_ROLES]
        s.server.reload(config(Path(s.server.config.source).parent, roles))
        for topic, stream in zip(DERIVED, streams, strict=True):
            with pytest.raises(PermissionDeniedError, match=f"rights changed: the rows user 'eu' may see in '{topic}'"):
                await take(stream, 1)
        async with s.client("admin") as admin:
            want = await wanted(admin, "us")
        for topic in DERIVED:
            assert await settled(eu, topic, want[topic]) == want[topic]
    for _ in range(100):
        if all(held == sum(f == n for f in joins.follows.values()) for n, held in joins.holders.items()):
            break
        await asyncio.sleep(0.05)
    assert all(held == sum(f == n for f in joins.follows.values()) for n, held in joins.holders.items())
