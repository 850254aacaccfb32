"""Packed record batches (``RECORD_LAYOUT_PACKED``, issue 39) against a real server: the same
records, in the same order and the same batches, as the ``Record`` layout, for every query
option; the ``Record`` layout stays the default on the wire; the SDK asks for packed batches and
reads either layout."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sowdb_api.v1 import sow_pb2 as pb
from sowdb_api.v1 import sow_pb2_grpc
from sowdb_client import AsyncClient, Client, Event, Message, Record, records_of
from sowdb_client.types import records_from_pb
from tests.support import TOPICS_TOML, Process, Running, start_sowd


@pytest.fixture
def sowd_topics(tmp_path: Path) -> Iterator[Process]:
    """``sowd`` as a process with the test topics (a topic of SowKeys given by publishers, one
    with history), as the SDKs' shared cases run it."""
    p = start_sowd(tmp_path / "data", "--config", str(TOPICS_TOML))
    try:
        yield p
    finally:
        if p.proc.poll() is None:
            p.stop()


_CHARS = st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00")
_TEXT = st.text(_CHARS, max_size=12)
_ORDER = st.fixed_dictionaries(
    {
        "orderId": st.integers(0, 40),
        "symbol": st.sampled_from(["SYM0", "SYM1", "SÿM2", "記号3"]),
        "qty": st.integers(-5, 1000),
        "note": _TEXT,
    }
)
_ITEM = st.fixed_dictionaries({"id": st.integers(0, 20), "name": _TEXT, "tags": st.lists(_TEXT, max_size=3)})
_NOTE = st.tuples(st.text(_CHARS, min_size=1, max_size=8), _ITEM)
_WRITES = st.fixed_dictionaries(
    {
        "orders": st.lists(_ORDER, max_size=15),
        "items": st.lists(_ITEM, max_size=8),
        "notes": st.lists(_NOTE, max_size=8),  # publisher-provided SowKeys: any text but NUL
        "book": st.lists(_ITEM, max_size=6),  # a topic with history, for queries as of a bookmark
    }
)
_QUERIES = st.one_of(
    st.fixed_dictionaries(
        {"topic": st.just("orders")},
        optional={
            "filter": st.sampled_from(["/symbol = 'SYM1'", "/qty > 100", "/note LIKE '.'", "/orderId IN (1, 2, 3)"]),
            "order_by": st.sampled_from(["/qty DESC", "/symbol, /orderId", "/note"]),
            "top_n": st.integers(0, 12),
            "skip_n": st.integers(0, 5),
            "select": st.sampled_from(["[-/,+/orderId,+/note]", "[-/note]", "[-/]"]),
            "sow_keys": st.lists(st.integers(0, 40).map(str), min_size=1, max_size=4),
        },
    ).filter(lambda q: "skip_n" not in q or "top_n" in q),
    st.fixed_dictionaries(
        {
            "topic": st.just("orders"),
            "grouping": st.just(["/symbol"]),
            "projection": st.just(["/symbol", "COUNT(/orderId) AS /n", "SUM(/qty) AS /total"]),
        },
        optional={"filter": st.just("/qty > 10"), "order_by": st.just("/n DESC, /symbol")},
    ),
    st.fixed_dictionaries(
        {"topic": st.sampled_from(["^(items|notes)$", "^(orders|items|notes|book)$", "notes", "items"])},
        optional={"filter": st.sampled_from(["/id > 5", "/name LIKE 'a'"]), "order_by": st.just("/id")},
    ),
    st.fixed_dictionaries({"topic": st.just("book"), "bookmark": st.sampled_from(["first", "middle", "0", "now"])}),
)


def _layout(stub: sow_pb2_grpc.SowServiceStub, query: dict[str, Any], layout: pb.RecordLayout.ValueType) -> list[Any]:
    """The query's frames with ``layout``: group_begin, each batch's records, group_end."""
    req = pb.SowRequest(record_layout=layout, **{k: v for k, v in query.items() if k not in ("top_n", "skip_n")})
    for name in ("top_n", "skip_n"):
        if name in query:
            setattr(req, name, query[name])
    out: list[Any] = []
    for resp in stub.Sow(req, timeout=30):
        kind = resp.WhichOneof("event")
        if kind == "records":
            assert resp.records.HasField("packed") == (layout == pb.RECORD_LAYOUT_PACKED)
            assert not (resp.records.records and resp.records.HasField("packed"))
            out.append(records_of(resp.records))
        else:
            out.append(resp.group_begin if kind == "group_begin" else resp.group_end)
    return out


def _untimed(frames: list[Any]) -> list[Any]:
    return [[r._replace(timestamp_us=0) for r in f] if isinstance(f, list) else f for f in frames]


def _publish_all(c: Client, writes: dict[str, Any]) -> list[int]:
    """Publish an example's writes; the bookmarks of the history topic's publishes."""
    for topic in ("orders", "items"):
        if writes[topic]:
            c.publish(topic, writes[topic])
    if writes["notes"]:
        c.publish("notes", [Message(doc, sow_key=key) for key, doc in writes["notes"]])
    return [c.publish("book", [doc]).last_bookmark for doc in writes["book"]]


def _as_of(query: dict[str, Any], history: list[int]) -> dict[str, Any]:
    point = query.get("bookmark")
    if point in ("first", "middle"):
        at = history[0] if point == "first" else history[len(history) // 2]
        return query | {"bookmark": str(at)}
    return query


@settings(max_examples=50, suppress_health_check=[HealthCheck.function_scoped_fixture])  # one server for all
@given(writes=_WRITES, queries=st.lists(_QUERIES, min_size=1, max_size=3), batch_size=st.integers(1, 7))
def test_packed_batches_hold_the_records_of_the_record_layout(
    sowd_topics: Process, writes: dict[str, Any], queries: list[dict[str, Any]], batch_size: int
) -> None:
    """Every query, both layouts: the same group_begin, the same records in the same batches,
    the same group_end; and the SDK (which asks for packed batches) yields those records."""
    with grpc.insecure_channel(sowd_topics.target) as channel, Client(sowd_topics.target) as c:
        stub = sow_pb2_grpc.SowServiceStub(channel)
        history = _publish_all(c, writes) or [c.publish("book", [{"id": 0, "name": "", "tags": []}]).last_bookmark]
        for query in queries:
            q = _as_of(query, history) | {"batch_size": batch_size}
            timed = "grouping" not in q  # an aggregate's timestamp is its query's time

            def frames(layout: pb.RecordLayout.ValueType, timed: bool = timed, q: dict[str, Any] = q) -> list[Any]:
                got = _layout(stub, q, layout)
                return got if timed else _untimed(got)

            records = frames(pb.RECORD_LAYOUT_RECORDS)
            assert frames(pb.RECORD_LAYOUT_PACKED) == records, q
            assert frames(pb.RECORD_LAYOUT_UNSPECIFIED) == records, q
            options = {k: v for k, v in q.items() if k != "topic"}
            sdk = (
                _untimed([c.sow(q["topic"], **options).records()])[0]
                if not timed
                else c.sow(q["topic"], **options).records()
            )
            assert sdk == [r for frame in records if isinstance(frame, list) for r in frame], q


def _order(i: int, symbol: str = "SYM1") -> dict[str, Any]:
    return {"orderId": i, "symbol": symbol, "qty": i, "note": f"nöte {i}"}


def test_the_record_layout_is_the_default_on_the_wire(sowd_topics: Process) -> None:
    """A client that does not ask (grpcurl, the Node, Go and Java SDKs) gets ``Record``
    messages; the SDK's request asks for packed batches and gets them."""
    with Client(sowd_topics.target) as c, grpc.insecure_channel(sowd_topics.target) as channel:
        c.publish("orders", [_order(i) for i in range(5)])
        stub = sow_pb2_grpc.SowServiceStub(channel)
        batches = [r.records for r in stub.Sow(pb.SowRequest(topic="orders", batch_size=2)) if r.HasField("records")]
        assert [len(b.records) for b in batches] == [2, 2, 1]
        assert not any(b.HasField("packed") for b in batches)
        frames = [r for r in c.sow("orders", batch_size=2).events() if r.HasField("records")]
        assert [len(f.records.packed.sow_keys) for f in frames] == [2, 2, 1]
        assert not any(f.records.records for f in frames)
        assert sorted(r for f in frames for r in records_of(f.records)) == sorted(
            r for b in batches for r in records_from_pb(b.records)
        )


def test_a_packed_batch_of_several_topics_names_each_topic_once(sowd_topics: Process) -> None:
    with Client(sowd_topics.target) as c:
        c.publish("orders", [_order(1), _order(2)])
        c.publish("items", [{"id": 1}])
        c.publish("notes", [Message({"n": 1}, sow_key="ключ")])
        frames = [
            r.records.packed for r in c.sow("^(orders|items|notes)$", batch_size=10).events() if r.HasField("records")
        ]
        assert len(frames) == 1
        packed = frames[0]
        assert sorted(packed.topics) == ["items", "notes", "orders"]
        assert sorted(packed.topics[i] for i in packed.topic_indexes) == ["items", "notes", "orders", "orders"]
        got = {(r.topic, r.sow_key): r.json() for r in records_of(pb.RecordBatch(packed=packed))}
        assert got[("notes", "ключ")] == {"n": 1}
        assert got[("orders", "2")] == _order(2)


def _events(events: Iterator[Event], until: str, count: int = 1) -> list[Event]:
    out: list[Event] = []
    for e in events:
        out.append(e)
        if e.kind == until:
            count -= 1
            if not count:
                return out
    raise AssertionError("the stream ended")


def test_sow_and_subscribe_query_results_are_packed_and_live_events_are_not(sowd_topics: Process) -> None:
    """SowAndSubscribe's query part asks for the layout too: its results come packed; publishes
    and oofs (a replaced page's new window included) stay ``Record`` messages."""
    with Client(sowd_topics.target) as c, grpc.insecure_channel(sowd_topics.target) as channel:
        c.publish("orders", [_order(i) for i in range(6)])
        stub = sow_pb2_grpc.SowServiceStub(channel)
        query = pb.SowRequest(
            topic="orders", order_by="/orderId", top_n=3, skip_n=0, batch_size=2, record_layout=pb.RECORD_LAYOUT_PACKED
        )
        call = stub.SowAndSubscribe(pb.SowAndSubscribeRequest(query=query, options=pb.SubscriptionOptions(oof=True)))
        responses = iter(call)
        first = [next(responses) for _ in range(5)]
        assert [r.WhichOneof("event") for r in first] == [
            "subscribed",
            "group_begin",
            "records",
            "records",
            "group_end",
        ]
        assert [len(r.records.packed.sow_keys) for r in first[2:4]] == [2, 1]
        assert [r.sow_key for f in first[2:4] for r in records_of(f.records)] == ["0", "1", "2"]
        c.publish("orders", [_order(1, symbol="SYM2")])
        live = next(responses)
        assert live.WhichOneof("event") == "publish"
        assert [r.sow_key for r in live.publish.records] == ["1"]
        replace = pb.ReplaceSubscriptionRequest(
            sub_id=first[0].subscribed.sub_id,
            order_by="/orderId DESC",
            top_n=2,
            skip_n=0,
            options=pb.SubscriptionOptions(oof=True),
        )
        stub.ReplaceSubscription(replace, timeout=10)  # the new window arrives as live events
        delivered: set[str] = set()
        while delivered != {"4", "5"}:
            r = next(responses)
            assert r.WhichOneof("event") in ("publish", "oof")
            if r.WhichOneof("event") == "publish":
                delivered.update(rec.sow_key for rec in r.publish.records)
        call.cancel()
        events = c.sow_and_subscribe("orders", filter="/orderId < 3", order_by="/orderId", batch_size=2)
        got = _events(iter(events), "group_end")
        events.cancel()
        assert [r.sow_key for e in got if e.kind == "sow" for r in e.records] == ["0", "1", "2"]
        assert all(isinstance(r, Record) for e in got for r in e.records)


async def test_the_asyncio_client_reads_packed_batches(sowd: Running) -> None:
    c: AsyncClient = sowd.client
    await c.publish("orders", [_order(i) for i in range(7)])
    records = await c.sow("orders", order_by="/orderId DESC", batch_size=3).records()
    assert [r.sow_key for r in records] == ["6", "5", "4", "3", "2", "1", "0"]
    assert [json.loads(r.data)["note"] for r in records[:2]] == ["nöte 6", "nöte 5"]
    frames = [f async for f in c.sow("orders", batch_size=3).events() if f.HasField("records")]
    assert [f.records.HasField("packed") for f in frames] == [True, True, True]


def test_a_packed_batch_whose_columns_disagree_is_refused() -> None:
    """A malformed frame raises instead of yielding records cut to its shortest column."""
    good = pb.PackedRecords(topics=["t"], bookmarks=[1, 2], timestamps_us=[3, 4], sow_keys=["a", "b"], data=[b"{}"] * 2)
    assert [r.sow_key for r in records_of(pb.RecordBatch(packed=good))] == ["a", "b"]
    assert records_of(pb.RecordBatch(packed=pb.PackedRecords())) == []
    for bad in (
        pb.PackedRecords(topics=["t"], bookmarks=[1], timestamps_us=[3, 4], sow_keys=["a", "b"], data=[b"{}"] * 2),
        pb.PackedRecords(
            topics=["t", "u"], bookmarks=[1, 2], timestamps_us=[3, 4], sow_keys=["a", "b"], data=[b""] * 2
        ),
        pb.PackedRecords(bookmarks=[1], timestamps_us=[3], sow_keys=["a"], data=[b"{}"]),
    ):
        with pytest.raises(ValueError, match="different lengths"):
            records_of(pb.RecordBatch(packed=bad))
