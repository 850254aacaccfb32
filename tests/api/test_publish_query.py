"""Publishing, deletes and SOW queries through a real server (K-*, D-1, Q-*)."""

from __future__ import annotations

import asyncio
import json
import random
from typing import Any

import grpc
import pytest

from sowdb.api.servicer import PUBLISH_TASK_NAME
from sowdb.engine.state import columns
from sowdb_api.v1 import sow_pb2 as pb
from sowdb_api.v1 import sow_pb2_grpc
from sowdb_client import (
    AsyncClient,
    FailedPreconditionError,
    InvalidArgumentError,
    Message,
    PublishError,
    records_of,
)
from tests.support import Running, acollect, take


def order(i: int, **extra: Any) -> dict[str, Any]:
    return {"orderId": i, "symbol": f"SYM{i % 5}", "price": 100 + i, "side": "B" if i % 2 else "S", **extra}


async def rows(c: AsyncClient, topic: str, **kw: Any) -> list[Any]:
    return [r.json() for r in await c.sow(topic, **kw).records()]


async def test_publish_then_query_returns_the_latest_version_of_each_key(sowd: Running) -> None:
    c = sowd.client
    ack = await c.publish("orders", [order(i) for i in range(10)])
    assert (ack.count, ack.first_bookmark, ack.last_bookmark) == (10, 1, 10)
    await c.publish("orders", [order(3, price=1)])  # K-2: full replace
    got = {r["orderId"]: r for r in await rows(c, "orders")}
    assert len(got) == 10
    assert got[3] == order(3, price=1)
    records = await c.sow("orders", filter="/orderId = 3").records()
    assert [(r.sow_key, r.bookmark, r.topic) for r in records] == [("3", 11, "orders")]


async def test_batch_is_atomic_and_the_error_names_the_message(sowd: Running) -> None:
    c = sowd.client
    await c.publish("orders", [order(1)])
    bad = [json.dumps(order(2)).encode(), b'{"orderId": 3, "price": ', json.dumps(order(4)).encode()]
    with pytest.raises(PublishError) as err:
        await c.publish("orders", bad)
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert err.value.message_index == 1
    assert err.value.field == "messages[1].data"
    assert "message 1" in err.value.message
    assert "not valid JSON" in err.value.message
    assert await rows(c, "orders") == [order(1)]
    # the refused request used no bookmark: the next publish continues the sequence
    ack = await c.publish("orders", [order(5)])
    assert ack.first_bookmark == 2


async def test_missing_key_field_and_missing_sow_key_are_refused(sowd: Running) -> None:
    c = sowd.client
    with pytest.raises(PublishError) as err:
        await c.publish("orders", [{"symbol": "X"}])
    assert "lacks the key field /orderId" in err.value.message
    with pytest.raises(PublishError) as err:
        await c.publish("notes", [{"text": "hi"}])
    assert err.value.field == "messages[0].sow_key"
    assert "sow_key" in err.value.message
    with pytest.raises(PublishError) as err:
        await c.publish("orders", [Message(order(1), sow_key="mine")])
    assert "leave sow_key empty" in err.value.message
    with pytest.raises(PublishError):
        await c.publish("orders", [b"[1, 2]"])
    assert await rows(c, "orders") == []
    assert await rows(c, "notes") == []


async def test_explicit_keys_are_returned_as_given(sowd: Running) -> None:
    c = sowd.client
    await c.publish("notes", [Message({"text": "a"}, sow_key="note-1"), Message({"text": "b"}, sow_key="note 2")])
    await c.publish("notes", [Message({"text": "c"}, sow_key="note-1")])
    recs = await c.sow("notes", order_by="/text").records()
    assert [(r.sow_key, r.json()) for r in recs] == [("note 2", {"text": "b"}), ("note-1", {"text": "c"})]


async def test_composite_and_string_keys_are_distinct_from_numbers(sowd: Running) -> None:
    c = sowd.client
    await c.publish("pairs", [{"region": "EU", "id": 1}, {"region": "EU", "id": "1"}, {"region": "US", "id": 1.0}])
    await c.publish("pairs", [{"region": "US", "id": 1, "v": 2}])  # 1.0 and 1 are the same key
    keys = sorted(r.sow_key for r in await c.sow("pairs").records())
    assert keys == ['"EU","1"', '"EU",1', '"US",1']


async def test_publish_to_an_unconfigured_topic_is_journaled_but_keeps_no_state(sowd: Running) -> None:
    c = sowd.client
    ack = await c.publish("ticks", [{"px": 1}, {"px": 2}])
    assert (ack.first_bookmark, ack.last_bookmark) == (1, 2)
    with pytest.raises(FailedPreconditionError) as err:
        await rows(c, "ticks")
    assert "not a SOW topic" in err.value.message
    assert err.value.field == "topic"
    assert [e.seq for e in sowd.engine.store.iter_journal()] == [1, 2]


async def test_publish_to_a_view_is_refused(sowd: Running) -> None:
    with pytest.raises(PublishError) as err:
        await sowd.client.publish("orders_by_symbol", [order(1)])
    assert err.value.code == grpc.StatusCode.FAILED_PRECONDITION
    assert "read-only" in err.value.message


async def test_delta_publish_merges_fields(sowd: Running) -> None:
    c = sowd.client
    await c.publish("orders", [{"orderId": 1, "px": 10, "tags": [1, 2], "book": {"bid": 1, "ask": 2}}])
    await c.publish("orders", [{"orderId": 1, "qty": 5, "tags": [3], "book": {"ask": 3}}], delta=True)
    # a delta for a key with no record is a plain publish; two deltas in one batch both apply
    await c.publish("orders", [{"orderId": 2, "a": 1}, {"orderId": 2, "b": 2}], delta=True)
    got = {r["orderId"]: r for r in await rows(c, "orders")}
    assert got[1] == {"orderId": 1, "px": 10, "tags": [3], "book": {"bid": 1, "ask": 3}, "qty": 5}
    assert got[2] == {"orderId": 2, "a": 1, "b": 2}


async def test_sow_delete_by_filter_keys_and_data(sowd: Running) -> None:
    c = sowd.client
    await c.publish("orders", [order(i) for i in range(10)])
    assert await c.sow_delete("orders", filter="/price >= 108") == 2
    assert await c.sow_delete("orders", sow_keys=["1", "2", "nope"]) == 2
    assert await c.sow_delete("orders", data={"orderId": 3, "whatever": True}) == 1
    assert await c.sow_delete("orders", filter="/price > 1000") == 0
    assert sorted(r["orderId"] for r in await rows(c, "orders")) == [0, 4, 5, 6, 7]
    with pytest.raises(InvalidArgumentError) as err:
        await c.sow_delete("orders", filter="/a = 1", sow_keys=["1"])
    assert "exactly one" in err.value.message
    with pytest.raises(InvalidArgumentError) as err:
        await c.sow_delete("orders")
    with pytest.raises(InvalidArgumentError) as err:
        await c.sow_delete("orders", filter="/a = = 1")
    assert err.value.field == "filter"
    assert err.value.column == 6
    with pytest.raises(FailedPreconditionError):
        await c.sow_delete("ticks", filter="/a = 1")


async def test_group_frames_counts_query_id_and_batches(sowd: Running) -> None:
    c = sowd.client
    await c.publish("orders", [order(i) for i in range(25)])
    result = c.sow("orders", filter="/price >= 110", query_id="q-7", batch_size=4, order_by="/orderId", top_n=10)
    events = [e async for e in result.events()]
    kinds = [e.WhichOneof("event") for e in events]
    assert kinds == ["group_begin", "records", "records", "records", "group_end"]
    assert [len(records_of(e.records)) for e in events[1:-1]] == [4, 4, 2]
    assert events[0].group_begin.query_id == "q-7"
    assert events[0].group_begin.bookmark == 25
    end = events[-1].group_end
    assert (end.query_id, end.records_returned, end.records_matched, end.records_scanned) == ("q-7", 10, 15, 25)


async def test_server_default_batch_size_is_one(sowd: Running) -> None:
    await sowd.client.publish("orders", [order(i) for i in range(3)])
    result = sowd.client.sow("orders", batch_size=None)  # type: ignore[arg-type]  # unset on the wire: the server's default
    sizes = [len(records_of(e.records)) async for e in result.events() if e.WhichOneof("event") == "records"]
    assert sizes == [1, 1, 1]


async def test_order_by_top_n_skip_n_and_select(sowd: Running) -> None:
    c = sowd.client
    await c.publish("orders", [order(i) for i in range(10)])
    got = await rows(c, "orders", order_by="/side DESC, /price DESC", top_n=3, skip_n=1, select="[-/,+/orderId]")
    assert got == [{"orderId": 6}, {"orderId": 4}, {"orderId": 2}]  # S > B, then price DESC, skip 8
    assert [r["orderId"] for r in await rows(c, "orders", order_by="/orderId DESC", top_n=2)] == [9, 8]
    assert await rows(c, "orders", top_n=0) == []
    # select never changes which records match
    assert len(await rows(c, "orders", filter="/price > 105", select="[-/,+/nope]")) == 4


async def test_sow_keys_restrict_and_the_filter_still_applies(sowd: Running) -> None:
    c = sowd.client
    await c.publish("orders", [order(i) for i in range(10)])
    got = await rows(c, "orders", sow_keys=["1", "2", "3", "404"], filter="/side = 'B'")
    assert sorted(r["orderId"] for r in got) == [1, 3]


async def test_regex_topics_return_every_matching_sow_topic(sowd: Running) -> None:
    c = sowd.client
    await c.publish("orders", [order(1)])
    await c.publish("orders_noindex", [order(2)])
    await c.publish("markers", [{"id": 1}])
    recs = await c.sow("^orders.*", batch_size=10).records()
    assert sorted((r.topic, r.sow_key) for r in recs) == [
        ("orders", "1"),
        ("orders_by_symbol", '["SYM1"]'),  # views are SOW topics too
        ("orders_noindex", "2"),
    ]
    assert await rows(c, "^nothing$") == []
    with pytest.raises(InvalidArgumentError) as err:
        await rows(c, "orders(")
    assert err.value.field == "topic"


async def test_aggregated_query(sowd: Running) -> None:
    c = sowd.client
    await c.publish("orders", [order(i) for i in range(10)])
    got = await rows(
        c, "orders", grouping=["/symbol"], projection=["/symbol", "SUM(/price) AS /total"], order_by="/symbol"
    )
    assert got[0] == {"symbol": "SYM0", "total": 100 + 105}
    assert len(got) == 5


FILTERS = [
    "/symbol = 'SYM3'",
    "/symbol = 'SYM3' AND /price > 150",
    "/symbol IN ('SYM1', 'SYM4', 'nope')",
    "/symbol = 'SYM3' OR /price < 110",
    "/symbol = 42",
    "/symbol = '42'",
    "/symbol = 42.0",
    "/symbol IN (7, '7', 'SYM2') AND /side = 'B'",
    "/symbol = true",
    "/symbol IS NULL",
    "NOT /symbol = 'SYM3'",
]


async def test_index_gives_the_same_results_as_a_scan(sowd: Running) -> None:
    """The /symbol hash index must be invisible except in speed: every query returns the same
    records from the indexed topic as from the identical unindexed one."""
    rnd = random.Random(7)
    symbols: list[Any] = ["SYM1", "SYM2", "SYM3", "SYM4", 42, "42", "042", 42.0, "4.2e1", 7, "7", True, 1, None]
    symbols += [["SYM3", 7], ["x"], [], {"a": 1}, ""]
    docs = []
    for i in range(400):
        d: dict[str, Any] = {"orderId": i, "price": rnd.randint(100, 200), "side": rnd.choice("BS")}
        s = rnd.choice([*symbols, "missing"])
        if s != "missing":
            d["symbol"] = s
        docs.append(d)
    c = sowd.client
    for topic in ("orders", "orders_noindex"):
        await c.publish(topic, docs)
        # updates and deletes move records between index buckets
        await c.publish(topic, [{"orderId": i, "symbol": "SYM3", "price": 150, "side": "B"} for i in range(0, 400, 7)])
        await c.sow_delete(topic, filter="/orderId > 380")
    for f in FILTERS:
        indexed = sorted(r["orderId"] for r in await rows(c, "orders", filter=f, batch_size=1000))
        scanned = sorted(r["orderId"] for r in await rows(c, "orders_noindex", filter=f, batch_size=1000))
        assert indexed == scanned, f
    end = c.sow("orders", filter="/symbol = 'SYM3'", batch_size=1000)
    await end.records()
    assert end.group_end is not None
    assert end.group_end.records_scanned < 200  # the index served it


async def test_one_record_by_its_key_field_is_a_lookup_not_a_scan(sowd: Running) -> None:
    """SPEC §10: a filter that fixes every key field reads only the records of those keys
    (records_scanned), in one topic or over a composite key."""
    c = sowd.client
    await c.publish("orders", [order(i) for i in range(2000)])
    await c.publish("pairs", [{"region": r, "id": i} for r in ("EU", "US") for i in range(500)])
    for topic, flt, found in [
        ("orders", "/orderId = 777", [777]),
        ("orders", "/orderId IN (3, '4', 99999)", [3, 4]),
        ("pairs", "/region = 'US' AND /id = 7", [7]),
    ]:
        stream = c.sow(topic, filter=flt, batch_size=100)
        got = [r.json()["orderId" if topic == "orders" else "id"] for r in await stream.records()]
        assert sorted(got) == found
        assert stream.group_end is not None
        assert stream.group_end.records_scanned == len(found)


async def test_list_topics(sowd: Running) -> None:
    await sowd.client.publish("orders", [order(i) for i in range(3)])
    topics = {t.name: t for t in await sowd.client.list_topics()}
    assert topics["orders"].record_count == 3
    assert list(topics["orders"].key) == ["/orderId"]
    assert list(topics["orders"].indexes) == ["/symbol"]
    assert topics["quotes"].durability == 2  # DURABILITY_TRANSIENT
    assert topics["orders_by_symbol"].kind == 2
    assert topics["orders_by_symbol"].underlying == "orders"
    assert "ticks" not in topics


async def test_state_survives_a_restart(sowd: Running) -> None:
    c = sowd.client
    await c.publish("orders", [order(i) for i in range(5)])
    await c.publish("quotes", [{"symbol": "A", "px": 1}, {"symbol": "B", "px": 1}])
    await c.publish("quotes", [{"symbol": "A", "px": 2}])
    await c.sow_delete("quotes", sow_keys=['"B"'])
    await c.sow_delete("orders", sow_keys=["0"])
    before = sorted(map(json.dumps, await rows(c, "orders")))
    server = sowd.server
    await server.stop(grace=0)
    await server.start()
    c2 = AsyncClient(f"127.0.0.1:{server.port}")
    try:
        assert sorted(map(json.dumps, await rows(c2, "orders"))) == before
        assert await rows(c2, "quotes") == [{"symbol": "A", "px": 2}]  # transient: rebuilt from the journal (J-3)
        ack = await c2.publish("orders", [order(9)])
        assert ack.first_bookmark == 11  # the journal sequence continues
    finally:
        await c2.close()


async def test_a_request_may_repeat_a_key(sowd: Running) -> None:
    """The messages of one request apply in order: a key repeated in a request ends at its last
    version, the index files only that version, a history topic keeps each version at its own
    bookmark, and a subscriber sees every change against the version it replaced (oof)."""
    c = sowd.client
    stream = c.sow_and_subscribe("orders", filter="/symbol = 'A'", oof=True, batch_size=10)
    assert [e.kind for e in await take(stream, 3)] == ["subscribed", "group_begin", "group_end"]
    versions = [
        {"orderId": 1, "symbol": "A", "v": 1},
        {"orderId": 1, "symbol": "B", "v": 2},  # leaves the filter (and the 'A' bucket)
        {"orderId": 2, "symbol": "A", "v": 1},
        {"orderId": 1, "symbol": "A", "v": 3},  # back
        {"orderId": 1, "symbol": "A", "v": 4},  # same bucket, new version
    ]
    ack = await c.publish("orders", versions)
    assert (ack.first_bookmark, ack.last_bookmark) == (1, 5)
    got: list[tuple[str, int, int]] = []
    while len(got) < 5:  # the server may send the changes in one frame or several
        got += [(e.kind, r.json()["orderId"], r.json()["v"]) for e in await take(stream, 1) for r in e.records]
    assert got == [("publish", 1, 1), ("oof", 1, 2), ("publish", 2, 1), ("publish", 1, 3), ("publish", 1, 4)]
    stream.cancel()
    for topic in ("orders", "orders_noindex"):
        if topic == "orders_noindex":
            await c.publish(topic, versions)
        assert sorted((r["orderId"], r["v"]) for r in await rows(c, topic, filter="/symbol = 'A'")) == [(1, 4), (2, 1)]
        assert await rows(c, topic, filter="/symbol = 'B'") == []
    await c.publish("book", [{"id": 1, "v": 1}, {"id": 1, "v": 2}, {"id": 2, "v": 1}, {"id": 1, "v": 3}])
    last = (await c.publish("book", [{"id": 1, "v": 4}])).last_bookmark
    for back, expected in (
        (4, [(1, 1)]),
        (3, [(1, 2)]),
        (2, [(1, 2), (2, 1)]),
        (1, [(1, 3), (2, 1)]),
        (0, [(1, 4), (2, 1)]),
    ):
        point = str(last - back)
        assert sorted((r["id"], r["v"]) for r in await rows(c, "book", bookmark=point)) == expected, point


async def test_publish_acks_come_in_order_however_far_the_publisher_runs_ahead(sowd: Running) -> None:
    """Receiving runs ahead of acknowledging (a bounded queue of acks): a publisher that sends
    hundreds of requests before reading any response still gets one ack per request, in order,
    with the refused one in its place; cancelling a call leaves no receiving task behind."""

    def request(i: int) -> pb.PublishRequest:
        data = b"{bad" if i == 150 else json.dumps(order(i)).encode()
        return pb.PublishRequest(topic="orders", messages=[pb.PublishMessage(data=data)], correlation_id=str(i))

    async with grpc.aio.insecure_channel(sowd.target) as channel:
        call = sow_pb2_grpc.SowServiceStub(channel).Publish()
        for i in range(300):
            await call.write(request(i))
        await call.done_writing()
        acks = [r async for r in call]
    assert [a.correlation_id for a in acks] == [str(i) for i in range(300)]
    assert [a.first_bookmark for a in acks] == [*range(1, 151), 0, *range(151, 300)]
    assert acks[150].error.code == grpc.StatusCode.INVALID_ARGUMENT.value[0]

    # a publisher that never reads its acks, then cancels
    async with grpc.aio.insecure_channel(sowd.target) as channel:
        call = sow_pb2_grpc.SowServiceStub(channel).Publish()
        for i in range(400):
            await call.write(request(1000 + i))
        call.cancel()
    for _ in range(100):
        if not [t for t in asyncio.all_tasks() if t.get_name() == PUBLISH_TASK_NAME]:
            break
        await asyncio.sleep(0.01)
    assert not [t for t in asyncio.all_tasks() if t.get_name() == PUBLISH_TASK_NAME]


async def test_a_failure_while_receiving_ends_the_publish_call_with_an_error(
    sowd: Running, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unexpected failure in the receiving task reaches the client as the call's status,
    INTERNAL like any other handler's (after the acks before it), instead of leaving the call
    waiting."""
    engine = sowd.server.engine
    assert engine is not None
    real = engine.publish

    def publish(topic: str, messages: Any, **kw: Any) -> tuple[int, int]:
        if messages[0].data == b'{"orderId": 13}':
            raise RuntimeError("boom")
        return real(topic, messages, **kw)

    monkeypatch.setattr(engine, "publish", publish)
    async with grpc.aio.insecure_channel(sowd.target) as channel:
        call = sow_pb2_grpc.SowServiceStub(channel).Publish()
        for i in (12, 13, 14):
            data = b'{"orderId": %d}' % i
            await call.write(pb.PublishRequest(topic="orders", messages=[pb.PublishMessage(data=data)]))
        await call.done_writing()
        acks: list[pb.PublishResponse] = []
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await acollect(call, acks)
    assert [a.first_bookmark for a in acks] == [1]
    assert err.value.code() == grpc.StatusCode.INTERNAL
    assert "see the server log" in (err.value.details() or "")


async def test_the_server_builds_the_columns_a_range_query_asks_for(
    sowd: Running, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first range query scans and asks for columns; the server's upkeep builds them in the
    background, and later queries read only what the columns let through, with the same answer.

    The columns are built one after the other, and the planner uses those that are ready: while
    only ``/price``'s is, a query reads the 199 records it lets through (a correct superset: the
    filter still runs on each), so the test waits for the plan of both columns, not any narrowing.
    """
    monkeypatch.setattr(columns, "MIN_RECORDS", 100)
    c = sowd.client
    await c.publish("orders", [order(i) for i in range(600)])
    flt = "/price > 500 AND /side = 'B'"
    first = c.sow("orders", filter=flt, batch_size=1000)
    expected = sorted(r.sow_key for r in await first.records())
    assert first.group_end is not None
    assert first.group_end.records_scanned == 600
    scanned = 600
    for _ in range(500):  # the upkeep's steps, a few ms apart
        later = c.sow("orders", filter=flt, batch_size=1000)
        got = sorted(r.sow_key for r in await later.records())
        assert got == expected
        assert later.group_end is not None
        scanned = later.group_end.records_scanned
        # a scan; /price's column alone (i > 400); /side's alone (odd i); both
        assert scanned in (600, 199, 300, 100)
        if scanned == 100:
            break
        await asyncio.sleep(0.02)
    assert scanned == len(expected) == 100
