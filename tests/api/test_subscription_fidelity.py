"""What a subscriber receives is exactly what it asked for, in the live part as in the query
part: delta entry (D-2), replays that cannot be complete (H-3, H-4), replacement options (R-1),
a mirror over several topics, select and sow_keys live, and one tie-break for pages and queries.
Each through the real server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import grpc
import pytest

from sowdb_client import AsyncClient, InvalidArgumentError, Mirror, OutOfRangeError
from tests.support import Running, docs, make_config, serving, take


async def test_a_delta_subscriber_gets_a_record_entering_its_result_whole(sowd: Running) -> None:
    """D-2 applies to records the subscriber holds: one that enters the result set arrives
    whole, so a delta mirror learns every field; later changes arrive as deltas."""
    c = sowd.client
    await c.publish("markers", [{"id": 1, "sym": "A", "px": 100}])
    stream = c.sow_and_subscribe("markers", filter="/px > 150", delta=True)
    mirror = Mirror(delta=True)
    mirror.apply_all(await take(stream, 3))  # subscribed, group_begin, group_end: nothing matches
    await c.publish("markers", [{"id": 1, "sym": "A", "px": 160}])
    await c.publish("markers", [{"id": 1, "sym": "A", "px": 170}])
    events = await take(stream, 2)
    assert docs(events) == [
        ("publish", {"id": 1, "sym": "A", "px": 160}),  # entering: whole
        ("publish", {"id": 1, "px": 170}),  # held: the key and what changed
    ]
    mirror.apply_all(events)
    assert mirror.values() == [{"id": 1, "sym": "A", "px": 170}]
    stream.cancel()


async def test_a_plain_delta_subscription_sends_each_record_whole_first(sowd: Running) -> None:
    c = sowd.client
    await c.publish("markers", [{"id": 1, "sym": "A", "px": 1}])  # before the subscription
    stream = c.subscribe("markers", delta=True)
    await take(stream, 1)
    await c.publish("markers", [{"id": 1, "sym": "A", "px": 2}])
    await c.publish("markers", [{"id": 1, "sym": "A", "px": 3}])
    got: list[tuple[str, Any]] = []
    while len(got) < 2:
        got += docs(await take(stream, 1))
    assert got == [("publish", {"id": 1, "sym": "A", "px": 2}), ("publish", {"id": 1, "px": 3})]
    stream.cancel()


async def test_a_historical_sow_and_subscribe_before_the_retained_journal_is_out_of_range(tmp_path: Path) -> None:
    """H-3 from a point the journal no longer covers would be the state then plus a partial
    replay, a silent gap: it is OUT_OF_RANGE with the oldest bookmark, like Subscribe (H-4)."""
    async with (
        serving(make_config(tmp_path / "data", journal_max_entries=5)) as server,
        AsyncClient(f"127.0.0.1:{server.port}") as c,
    ):
        for i in range(12):
            await c.publish("book", [{"id": i % 3, "v": i}])
        assert server.engine is not None
        assert server.engine.journal.trim() == 7
        for bookmark in ("0", "3", "6"):
            with pytest.raises(OutOfRangeError) as err:
                async for _ in c.sow_and_subscribe("book", bookmark=bookmark):
                    pass
            assert err.value.oldest_bookmark == 7, bookmark
        stream = c.sow_and_subscribe("book", bookmark="7", batch_size=100)  # covered: state at 7, then 8..12
        events = await take(stream, 5)
        assert [e.kind for e in events] == ["subscribed", "group_begin", "sow", "group_end", "publish"]
        stream.cancel()


async def test_replacing_turns_oof_on_only_where_it_can_take_effect(sowd: Running) -> None:
    """R-1: an option a replacement accepts takes effect. A plain Subscribe does not know which
    records its subscriber holds, so turning oof on for it is refused naming the option; a
    delta subscription does, so there oof works from the replacement on."""
    c = sowd.client
    plain = c.subscribe("markers", filter="/px > 0")
    await take(plain, 1)
    with pytest.raises(InvalidArgumentError) as err:
        await c.replace_subscription(plain.sub_id, filter="/px > 0", oof=True)
    assert err.value.field == "options.oof"
    plain.cancel()

    tracked = c.subscribe("markers", filter="/px > 0", delta=True)
    await take(tracked, 1)
    await c.publish("markers", [{"id": 5, "px": 1}])
    assert docs(await take(tracked, 1)) == [("publish", {"id": 5, "px": 1})]
    await c.replace_subscription(tracked.sub_id, filter="/px > 0", oof=True, delta=True)
    await c.publish("markers", [{"id": 5, "px": 0}])
    (oof,) = await take(tracked, 1)
    assert (oof.kind, oof.reason, oof.records[0].sow_key) == ("oof", "match", "5")
    tracked.cancel()


async def test_a_mirror_over_several_topics_keys_records_by_topic_and_sow_key(sowd: Running) -> None:
    c = sowd.client
    await c.publish("orders", [{"orderId": 1, "what": "order"}])
    await c.publish("markers", [{"id": 1, "what": "marker"}])  # the same SowKey "1"
    stream = c.sow_and_subscribe("^(orders|markers)$", batch_size=10)
    mirror = Mirror()
    mirror.apply_all(await take(stream, 4))
    assert mirror.ready
    assert {k: r.json()["what"] for k, r in mirror.records.items()} == {
        ("markers", "1"): "marker",
        ("orders", "1"): "order",
    }
    stream.cancel()


async def test_select_and_sow_keys_shape_the_live_part_too(sowd: Running) -> None:
    """Options that shape or restrict a result apply to the live part as to the query part."""
    c = sowd.client
    await c.publish("orders", [{"orderId": i, "symbol": "S", "price": i, "qty": 1} for i in (42, 43)])
    stream = c.sow_and_subscribe("orders", sow_keys=["42"], select="[-/,+/orderId,+/price]", oof=True)
    head = await take(stream, 4)
    assert docs(head) == [("sow", {"orderId": 42, "price": 42})]
    await c.publish("orders", [{"orderId": 43, "symbol": "S", "price": 0, "qty": 2}])  # not one of its keys
    await c.publish("orders", [{"orderId": 42, "symbol": "S", "price": 7, "qty": 2}])
    await c.sow_delete("orders", sow_keys=["43", "42"])
    events = await take(stream, 2)
    assert [(e.kind, e.reason) for e in events] == [("publish", ""), ("oof", "deleted")]
    assert docs(events) == [("publish", {"orderId": 42, "price": 7}), ("oof", {"orderId": 42, "price": 7})]
    stream.cancel()


async def test_a_page_applies_select_to_its_query_and_live_parts(sowd: Running) -> None:
    c = sowd.client
    await c.publish("orders", [{"orderId": i, "price": i, "pad": "x"} for i in range(5)])
    stream = c.sow_and_subscribe(
        "orders", order_by="/price DESC", top_n=2, skip_n=0, select="[-/,+/orderId]", oof=True, batch_size=10
    )
    head = await take(stream, 4)
    assert docs(head) == [("sow", {"orderId": 4}), ("sow", {"orderId": 3})]
    await c.publish("orders", [{"orderId": 9, "price": 99, "pad": "x"}])
    events = await take(stream, 2)
    assert sorted(docs(events)) == [("oof", {"orderId": 3}), ("publish", {"orderId": 9})]
    stream.cancel()


async def test_a_page_restricted_to_sow_keys_sees_only_those_records(sowd: Running) -> None:
    c = sowd.client
    await c.publish("orders", [{"orderId": i, "price": i} for i in range(5)])
    stream = c.sow_and_subscribe("orders", order_by="/price", top_n=2, skip_n=0, sow_keys=["3", "4"], batch_size=10)
    head = await take(stream, 4)
    assert docs(head) == [("sow", {"orderId": 3, "price": 3}), ("sow", {"orderId": 4, "price": 4})]
    await c.publish("orders", [{"orderId": 0, "price": -1}, {"orderId": 4, "price": 0}])
    events = await take(stream, 1)
    assert docs(events) == [("publish", {"orderId": 4, "price": 0})]
    stream.cancel()


async def test_a_delta_page_sends_changes_of_records_it_shows_as_deltas(sowd: Running) -> None:
    c = sowd.client
    await c.publish("orders", [{"orderId": i, "price": i, "side": "B"} for i in range(3)])
    stream = c.sow_and_subscribe("orders", order_by="/price", top_n=2, skip_n=0, delta=True, batch_size=10)
    await take(stream, 4)
    await c.publish("orders", [{"orderId": 1, "price": 1, "side": "S"}])  # shown: a delta
    await c.publish("orders", [{"orderId": 2, "price": -5, "side": "B"}])  # enters: whole
    events = await take(stream, 2)
    assert docs(events) == [
        ("publish", {"orderId": 1, "side": "S"}),
        ("publish", {"orderId": 2, "price": -5, "side": "B"}),
    ]
    stream.cancel()


@pytest.mark.parametrize("order_by", ["/price", "/price DESC", ""])
async def test_pages_and_queries_break_ties_the_same_way(sowd: Running, order_by: str) -> None:
    """Records with equal sort values are ordered by SowKey in a live page and in a query
    alike (and by SowKey alone with no order_by), so both hold the same records."""
    c = sowd.client
    # inserted in an order unlike the SowKey order, all with the same price
    await c.publish("orders", [{"orderId": i, "price": 5} for i in (7, 3, 11, 5, 2, 9, 1)])
    for skip in (0, 2, 5):
        page = c.sow_and_subscribe("orders", order_by=order_by, top_n=3, skip_n=skip, batch_size=10)
        shown = [r.sow_key for e in await take(page, 4) for r in e.records]
        page.cancel()
        queried = [
            r.sow_key for r in await c.sow("orders", order_by=order_by, top_n=3, skip_n=skip, batch_size=10).records()
        ]
        assert shown == queried, (order_by, skip)
        assert shown == sorted(["7", "3", "11", "5", "2", "9", "1"])[skip : skip + 3]


async def test_delta_with_a_conflation_key_is_refused(sowd: Running) -> None:
    """Conflating deltas of different records under one key would lose changed fields."""
    with pytest.raises(InvalidArgumentError) as err:
        async for _ in sowd.client.sow_and_subscribe("orders", delta=True, conflation=0.5, conflation_key=["/symbol"]):
            pass
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert err.value.field == "options.conflation_key"


async def test_conflated_deltas_carry_every_field_changed_in_the_interval(sowd: Running) -> None:
    c = sowd.client
    await c.publish("markers", [{"id": 1, "a": 0, "b": 0}])
    stream = c.sow_and_subscribe("markers", delta=True, conflation=0.3)
    await take(stream, 4)
    await c.publish("markers", [{"id": 1, "a": 1, "b": 0}])
    await c.publish("markers", [{"id": 1, "a": 1, "b": 2}])
    (event,) = await take(stream, 1)
    assert docs([event]) == [("publish", {"id": 1, "a": 1, "b": 2})]
    stream.cancel()
