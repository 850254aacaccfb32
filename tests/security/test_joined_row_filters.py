"""V-2 with A-2: a reader under a row filter on a topic a joined view joins reads the view as if
the join were computed over the rows it may see -- in queries, in sow_and_subscribe after live
changes on either side (a row whose customer leaves its filter leaves with an oof), in pages,
in aggregates over the join -- and a reader without filters reads every row. The randomized
test compares the restricted reader's view, queried and followed live, with the join computed
from scratch over the filtered topics."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sowdb_client import FailedPreconditionError, Mirror, PermissionDeniedError
from tests.security.conftest import ROLES, TOPICS, USERS, Secured, StartSecured, secured_config
from tests.support import serving, take

EU = "/region = 'eu'"
VIEWS: list[dict[str, Any]] = [
    {
        "name": "by_trade",
        "underlying": "trades",
        "join": ["[trades]./client = [clients]./id"],
        "grouping": ["[trades]./id"],
        "projection": [
            "[trades]./id AS /trade",
            "[clients]./name AS /name",
            "[clients]./region AS /region",
            "SUM([trades]./qty) AS /qty",
        ],
    },
    {
        "name": "by_trade_left",
        "underlying": "trades",
        "join": ["LEFT [trades]./client = [clients]./id"],
        "grouping": ["[trades]./id"],
        "projection": ["[trades]./id AS /trade", "[clients]./name AS /name", "SUM([trades]./qty) AS /qty"],
    },
    {
        "name": "per_region",
        "underlying": "trades",
        "join": ["[trades]./client = [clients]./id"],
        "grouping": ["[clients]./region"],
        "projection": ["[clients]./region AS /region", "COUNT([trades]./id) AS /trades", "SUM([trades]./qty) AS /qty"],
    },
]
OF_JOIN: dict[str, Any] = {  # a view of a joined view: copied per reader too
    "name": "of_by_trade",
    "underlying": "by_trade",
    "grouping": ["/region"],
    "projection": ["/region", "COUNT(/trade) AS /n"],
}
ROW_TOPICS: dict[str, Any] = {
    "topic": [*TOPICS["topic"], {"name": "trades", "key": ["/id"]}, {"name": "clients", "key": ["/id"]}],
    "view": [*VIEWS, OF_JOIN],
    "conflated_topic": [{"name": "by_trade_100ms", "underlying": "by_trade", "interval": "100ms"}],
}
VIEW_NAMES = [v["name"] for v in VIEWS]
DERIVED = ["of_by_trade", "by_trade_100ms"]  # topics derived from a joined view
ROW_ROLES: list[dict[str, Any]] = [
    *ROLES,
    {"name": "eu_clients", "read": ["clients"], "filter": EU},  # the row filter, on the right-hand side only
    {"name": "all_trades", "read": ["trades", *VIEW_NAMES, "^of_", "_100ms$"]},  # DERIVED by patterns
    {"name": "everything", "read": ["trades", "clients", *VIEW_NAMES, *DERIVED]},
    {"name": "derived_by_name", "read": DERIVED},  # names them: no different from a pattern
]
ROW_USERS = {
    **USERS,
    "eu": ["eu_clients", "all_trades"],
    "eu_named": ["eu_clients", "all_trades", "derived_by_name"],
    "everything": ["everything"],
}
CLIENTS = [
    {"id": 1, "name": "Ann", "region": "eu"},
    {"id": 2, "name": "Bob", "region": "us"},
    {"id": 3, "name": "Cy", "region": "eu"},
]
TRADES = [{"id": i, "client": c, "qty": q} for i, c, q in [(1, 1, 5), (2, 2, 7), (3, 3, 1), (4, 2, 2), (5, 9, 4)]]


async def start(start_secured: StartSecured) -> Secured:
    s = await start_secured(topics=ROW_TOPICS, roles=ROW_ROLES, users=ROW_USERS)
    async with s.client("admin") as admin:
        await admin.publish("clients", CLIENTS)
        await admin.publish("trades", TRADES)
    return s


async def rows(client: Any, topic: str, **options: Any) -> list[dict[str, Any]]:
    return sorted((r.json() for r in await client.sow(topic, **options).records()), key=repr)


async def next_records(stream: Any, n: int) -> list[tuple[str, int]]:
    """The next ``n`` records the stream delivers, as (event kind, trade)."""
    got: list[tuple[str, int]] = []
    while len(got) < n:
        got += [(e.kind, r.json()["trade"]) for e in await take(stream, 1) for r in e.records]
    return got


def expected(clients: list[dict[str, Any]], trades: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Every view of :data:`VIEWS` and topic of :data:`DERIVED`, computed from scratch over the
    given (visible) rows."""
    by_id = {c["id"]: c for c in clients}
    inner = [{"trade": t["id"], **_client(by_id[t["client"]]), "qty": t["qty"]} for t in trades if t["client"] in by_id]
    left = [
        {"trade": t["id"], **({"name": by_id[t["client"]]["name"]} if t["client"] in by_id else {}), "qty": t["qty"]}
        for t in trades
    ]
    regions: dict[str, dict[str, Any]] = {}
    for row in inner:
        g = regions.setdefault(row["region"], {"region": row["region"], "trades": 0, "qty": 0})
        g["trades"] += 1
        g["qty"] += row["qty"]
    views = {n: sorted(v, key=repr) for n, v in zip(VIEW_NAMES, (inner, left, list(regions.values())), strict=True)}
    of_join = [{"region": g["region"], "n": g["trades"]} for g in regions.values()]  # OF_JOIN over the reader's rows
    return {**views, "of_by_trade": sorted(of_join, key=repr), "by_trade_100ms": views["by_trade"]}


def _client(c: dict[str, Any]) -> dict[str, Any]:
    return {"name": c["name"], "region": c["region"]}


async def test_a_reader_filtered_on_a_joined_topic_reads_the_join_of_its_rows(start_secured: StartSecured) -> None:
    """eu reads every trade but only eu clients: the inner join holds the trades of eu clients,
    the LEFT join every trade (a hidden client's fields missing), the aggregate view and an
    aggregated query count only those rows; readers without filters read every row. A pattern
    does not reach the view for eu (name it), ListTopics counts none of its rows, and a
    historical query is refused naming the view."""
    s = await start(start_secured)
    eu_clients = [c for c in CLIENTS if c["region"] == "eu"]
    async with s.client("eu") as eu, s.client("everything") as everything, s.client("admin") as admin:
        want = expected(eu_clients, TRADES)
        for view in VIEW_NAMES:
            assert await rows(eu, view) == want[view], view
        assert [r["trade"] for r in await rows(eu, "by_trade")] == [1, 3]
        assert await rows(eu, "per_region") == [{"region": "eu", "trades": 2, "qty": 6}]
        counted = await rows(eu, "by_trade", grouping=["/region"], projection=["/region", "COUNT(/trade) AS /n"])
        assert counted == [{"region": "eu", "n": 2}]
        page = await rows(eu, "by_trade", top_n=1, order_by="/qty DESC")
        assert page == [{"trade": 1, "name": "Ann", "region": "eu", "qty": 5}]
        assert await rows(eu, "^by_trade$") == []  # a pattern reaches no view it reads under filters
        assert {t.name: t.record_count for t in await eu.list_topics()}["by_trade"] == 0  # counts hidden rows
        with pytest.raises(FailedPreconditionError, match="topic 'by_trade' keeps no history"):
            await rows(eu, "by_trade", bookmark="1")  # refused as the view is, by its name
        whole = expected(CLIENTS, TRADES)
        for reader in (everything, admin):
            for view in VIEW_NAMES:
                assert await rows(reader, view) == whole[view], view


async def test_a_topic_derived_from_a_joined_view_is_computed_from_the_readers_rows(
    start_secured: StartSecured,
) -> None:
    """A view of a joined view and a conflated copy of one are copied per reader too
    (``test_derived_row_filters.py`` for the whole story): a reader under a row filter on a
    joined topic reads them by name computed from its rows, whether a role names them or a
    pattern in ``read`` grants them; a reader without filters reads every client's rows. A
    pattern does not reach them for it (name them)."""
    s = await start(start_secured)
    whole = [{"region": "eu", "n": 2}, {"region": "us", "n": 2}]
    async with s.client("eu") as eu, s.client("eu_named") as named, s.client("everything") as everything:
        assert await rows(everything, "of_by_trade") == whole
        for reader in (eu, named):
            assert await rows(reader, "of_by_trade") == [{"region": "eu", "n": 2}]  # its own rows only
            conflated: list[int] = []
            for _ in range(100):  # refreshed every 100 ms
                conflated = sorted(r["trade"] for r in await rows(reader, "by_trade_100ms"))
                if conflated:
                    break
                await asyncio.sleep(0.05)
            assert conflated == [1, 3]
        assert await rows(eu, "^of_by_trade$") == []  # a pattern reaches no topic it reads through a copy
        assert await rows(everything, "^of_by_trade$") == whole


async def test_a_pattern_subscription_reads_no_joined_view_under_row_filters(start_secured: StartSecured) -> None:
    """A regex sow_and_subscribe, like a regex query, does not reach a joined view its caller
    reads under row filters: its query part must not send the shared view's rows (every
    client's), nor its live part their changes."""
    s = await start(start_secured)
    async with s.client("eu") as eu, s.client("everything") as everything, s.client("admin") as admin:
        stream = eu.sow_and_subscribe("^by_trade", oof=True)
        assert [e.kind for e in await take(stream, 3)] == ["subscribed", "group_begin", "group_end"]
        whole = everything.sow_and_subscribe("^by_trade$", oof=True)
        assert sorted(r.json()["trade"] for r in (await take(whole, 4))[2].records) == [1, 2, 3, 4]
        await admin.publish("trades", [{"id": 6, "client": 1, "qty": 1}])
        assert [r.json()["trade"] for r in (await take(whole, 1))[0].records] == [6]
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.5):
                await take(stream, 1)
        stream.cancel()
        whole.cancel()


async def test_live_changes_on_either_side_follow_the_readers_rows(start_secured: StartSecured) -> None:
    """sow_and_subscribe with oof: a trade of a hidden client never comes; a client moving out
    of the reader's filter takes its joined rows away with an oof, and back brings them; an
    aggregated subscription over the join counts only what the reader sees."""
    s = await start(start_secured)
    async with s.client("eu") as eu, s.client("admin") as admin:
        stream = eu.sow_and_subscribe("by_trade", oof=True)
        totals = eu.sow_and_subscribe("per_region", oof=True)
        first = await take(stream, 4)
        assert sorted(r.json()["trade"] for r in first[2].records) == [1, 3]
        assert [r.json() for r in (await take(totals, 4))[2].records] == [{"region": "eu", "trades": 2, "qty": 6}]
        await admin.publish("trades", [{"id": 6, "client": 2, "qty": 1}])  # Bob's: hidden
        await admin.publish("trades", [{"id": 7, "client": 1, "qty": 2}])  # Ann's: seen
        ((event,),) = [await take(stream, 1)]
        assert (event.kind, [r.json() for r in event.records]) == (
            "publish",
            [{"trade": 7, "name": "Ann", "region": "eu", "qty": 2}],
        )
        assert [r.json() for r in (await take(totals, 1))[0].records] == [{"region": "eu", "trades": 3, "qty": 8}]
        await admin.publish("clients", [{"id": 3, "name": "Cy", "region": "us"}])  # out of the filter
        (gone,) = await take(stream, 1)
        assert (gone.kind, gone.reason, [r.json()["trade"] for r in gone.records]) == ("oof", "deleted", [3])
        assert [r.json() for r in (await take(totals, 1))[0].records] == [{"region": "eu", "trades": 2, "qty": 7}]
        await admin.publish("clients", [{"id": 2, "name": "Bob", "region": "eu"}])  # into it: trades 2, 4, 6
        back: list[int] = []
        while len(back) < 3:
            back += [r.json()["trade"] for e in await take(stream, 1) for r in e.records if e.kind == "publish"]
        assert sorted(back) == [2, 4, 6]
        assert [r.json() for r in (await take(totals, 1))[0].records] == [{"region": "eu", "trades": 5, "qty": 17}]
        stream.cancel()
        totals.cancel()


async def test_pages_and_delta_follow_the_readers_rows(start_secured: StartSecured) -> None:
    """P-1 and D-2 on the restricted view: a page ranks only the rows the reader sees, and a
    client update reaches a delta subscriber as what changed of its joined rows."""
    s = await start(start_secured)
    async with s.client("eu") as eu, s.client("admin") as admin:
        page = eu.sow_and_subscribe("by_trade", top_n=1, skip_n=0, order_by="/qty DESC", oof=True)
        delta = eu.sow_and_subscribe("by_trade", delta=True)
        assert [r.json()["trade"] for r in (await take(page, 4))[2].records] == [1]  # not Bob's 7
        await take(delta, 4)
        await admin.publish("trades", [{"id": 3, "client": 3, "qty": 9}])  # Cy's passes Ann's 5
        got = [(e.kind, r.json()["trade"]) for e in await take(page, 2) for r in e.records]
        assert sorted(got) == [("oof", 1), ("publish", 3)]
        assert [r.json() for r in (await take(delta, 1))[0].records] == [{"qty": 9}]
        await admin.publish("clients", [{"id": 3, "name": "Cyd", "region": "eu"}])
        assert [r.json() for r in (await take(delta, 1))[0].records] == [{"name": "Cyd"}]
        page.cancel()
        delta.cancel()


async def test_aggregated_and_replaced_subscriptions_follow_the_readers_rows(start_secured: StartSecured) -> None:
    """Q-8 live over the restricted view counts only the reader's rows; R-1 re-runs the new
    filter over them: a row it sees now leaving it goes with an oof, a hidden one never comes."""
    s = await start(start_secured)
    async with s.client("eu") as eu, s.client("admin") as admin:
        grouped = eu.sow_and_subscribe("by_trade", grouping=["/region"], projection=["/region", "COUNT(/trade) AS /n"])
        assert [r.json() for r in (await take(grouped, 4))[2].records] == [{"region": "eu", "n": 2}]
        await admin.publish("trades", [{"id": 6, "client": 2, "qty": 1}, {"id": 7, "client": 3, "qty": 1}])
        assert [r.json() for r in (await take(grouped, 1))[0].records] == [{"region": "eu", "n": 3}]
        stream = eu.sow_and_subscribe("by_trade", oof=True)
        first = await take(stream, 4)
        assert sorted(r.json()["trade"] for r in first[2].records) == [1, 3, 7]
        await eu.replace_subscription(first[0].sub_id, filter="/qty > 2", oof=True)
        assert sorted(await next_records(stream, 2)) == [("oof", 3), ("oof", 7)]
        await admin.publish("trades", [{"id": 8, "client": 2, "qty": 9}, {"id": 9, "client": 1, "qty": 9}])
        assert await next_records(stream, 1) == [("publish", 9)]
        grouped.cancel()
        stream.cancel()


async def test_a_changed_row_filter_ends_the_subscription_and_copies_go(start_secured: StartSecured) -> None:
    """A-4: a reload that changes the reader's filter on a joined topic ends its subscription
    to the view (its rows were those of the old filter); once no subscription holds the view's
    restricted copies, none is kept beyond the idle few."""
    s = await start(start_secured)
    engine = s.server.engine
    assert engine is not None
    async with s.client("eu") as eu:
        stream = eu.sow_and_subscribe("by_trade", oof=True)
        await take(stream, 4)
        assert len(engine.placement.joins) == 1
        roles = [{**r, "filter": "/region = 'us'"} if r["name"] == "eu_clients" else r for r in ROW_ROLES]
        home = Path(s.server.config.source).parent
        s.server.reload(secured_config(home, topics=ROW_TOPICS, roles=roles, users=ROW_USERS))
        with pytest.raises(PermissionDeniedError, match="rights changed: the rows user 'eu' may see in 'by_trade'"):
            await take(stream, 1)
        assert [r["trade"] for r in await rows(eu, "by_trade")] == [2, 4]  # now Bob's, a second copy
        assert len(engine.placement.joins) == 2
        assert sum(engine.placement.joins.holders.values()) == 0


CLIENT_OPS = st.tuples(st.just("clients"), st.integers(1, 4), st.sampled_from(["eu", "us", None]))
TRADE_OPS = st.tuples(st.just("trades"), st.integers(1, 6), st.one_of(st.none(), st.integers(1, 5)))
OPS = st.lists(st.one_of(CLIENT_OPS, TRADE_OPS), max_size=25)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=OPS)
def test_the_restricted_view_is_the_join_of_the_filtered_topics(ops: list[tuple[str, int, Any]]) -> None:
    """Random publishes and deletes on both sides (a client's region None: deleted; a trade's
    client None: deleted): the eu reader's views and the topics derived from one, queried at
    the end and followed live from the start, are computed from scratch over the trades and
    the eu clients."""
    asyncio.run(_random_run(ops))


async def _random_run(ops: list[tuple[str, int, Any]]) -> None:
    with tempfile.TemporaryDirectory() as home:
        async with serving(secured_config(Path(home), topics=ROW_TOPICS, roles=ROW_ROLES, users=ROW_USERS)) as server:
            s = Secured(server)
            async with s.client("eu") as eu, s.client("admin") as admin:
                await admin.publish("clients", CLIENTS)
                await admin.publish("trades", TRADES)
                streams = {view: eu.sow_and_subscribe(view, oof=True) for view in [*VIEW_NAMES, *DERIVED]}
                mirrors = {view: Mirror() for view in streams}
                for view, stream in streams.items():
                    for e in await take(stream, 4):
                        mirrors[view].apply(e)
                for topic, key, value in ops:
                    if value is None:
                        await admin.sow_delete(topic, filter=f"/id = {key}")
                    elif topic == "clients":
                        await admin.publish(topic, [{"id": key, "name": f"c{key}", "region": value}])
                    else:
                        await admin.publish(topic, [{"id": key, "client": value, "qty": key * value}])
                clients = [r.json() for r in await admin.sow("clients").records()]
                trades = [r.json() for r in await admin.sow("trades").records()]
                want = expected([c for c in clients if c["region"] == "eu"], trades)
                for view, stream in streams.items():
                    if view != "by_trade_100ms":  # refreshed every 100 ms: followed only
                        assert await rows(eu, view) == want[view], view
                    await _follow(stream, mirrors[view], want[view])
                    stream.cancel()


async def _follow(stream: Any, mirror: Mirror, want: list[dict[str, Any]]) -> None:
    """Apply the stream's events to ``mirror`` until it holds ``want`` (fails after 5 s)."""
    try:
        async with asyncio.timeout(5):
            while sorted(mirror.values(), key=repr) != want:
                for e in await take(stream, 1):
                    mirror.apply(e)
    except TimeoutError:
        assert sorted(mirror.values(), key=repr) == want
