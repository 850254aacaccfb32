"""E-1: every bad input gets the right status, an actionable message and rich details, and
changes nothing — each case through the real server."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from sowdb_api.v1 import sow_pb2 as pb
from sowdb_api.v1 import sow_pb2_grpc
from sowdb_client import InvalidArgumentError, PublishError, SowdbError
from tests.support import Running, acollect

SEED = [{"orderId": i, "symbol": f"SYM{i}", "price": 100 + i} for i in range(5)]


@pytest.fixture
async def seeded(sowd: Running) -> Running:
    await sowd.client.publish("orders", SEED)
    return sowd


async def state(s: Running) -> list[Any]:
    return sorted((r.json()["orderId"], r.bookmark) for r in await s.client.sow("orders").records())


def details(err: grpc.aio.AioRpcError) -> tuple[list[str], dict[str, str]]:
    status = rpc_status.from_call(err)  # type: ignore[arg-type]  # the stubs take grpc.Call only; an aio error has its metadata too
    assert status is not None, "no rich status attached"
    fields: list[str] = []
    meta: dict[str, str] = {}
    for d in status.details:
        if d.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad = error_details_pb2.BadRequest()
            d.Unpack(bad)
            fields += [v.field for v in bad.field_violations]
            assert all(v.description for v in bad.field_violations)
        elif d.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            d.Unpack(info)
            assert info.domain == "sowdb.dev"
            assert info.reason
            meta = dict(info.metadata)
    return fields, meta


QUERY_CASES = [
    ({"batch_size": 0}, "batch_size", "between 1 and 10000"),
    ({"batch_size": 10001}, "batch_size", "between 1 and 10000"),
    ({"skip_n": 5}, "skip_n", "requires top_n"),
    ({"filter": "/price > AND /x = 1"}, "filter", "column 10"),
    ({"filter": "/price >> 3"}, "filter", "column"),
    ({"order_by": "/price SIDEWAYS"}, "order_by", "column"),
    ({"select": "[+/a,"}, "select", "column"),
    ({"grouping": ["/symbol"]}, "projection", "together"),
]


@pytest.mark.parametrize(("options", "field", "words"), QUERY_CASES)
async def test_bad_query_options(seeded: Running, options: dict[str, Any], field: str, words: str) -> None:
    before = await state(seeded)
    async with grpc.aio.insecure_channel(seeded.target) as channel:
        stub = sow_pb2_grpc.SowServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as err:
            async for _ in stub.Sow(pb.SowRequest(topic="orders", **options)):
                pass
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert words in (err.value.details() or "")
    fields, meta = details(err.value)
    assert fields == [field]
    if field in ("filter", "order_by", "select"):
        assert int(meta["column"]) >= 1
        assert "token" in meta
    assert await state(seeded) == before


async def test_bad_filter_position_reaches_the_sdk(seeded: Running) -> None:
    with pytest.raises(InvalidArgumentError) as err:
        await seeded.client.sow("orders", filter="/price > 1 AND (/side = 'B'").records()
    assert err.value.field == "filter"
    assert err.value.column is not None
    assert err.value.reason == "EXPRESSION_ERROR"


async def test_sow_on_a_non_sow_topic_is_a_failed_precondition(seeded: Running) -> None:
    with pytest.raises(SowdbError) as err:
        await seeded.client.sow("ticks").records()
    assert err.value.code == grpc.StatusCode.FAILED_PRECONDITION
    assert "not a SOW topic" in err.value.message
    assert "orders" in err.value.message  # lists the SOW topics


PUBLISH_CASES = [
    ([pb.PublishMessage(data=b"{not json")], "orders", grpc.StatusCode.INVALID_ARGUMENT, "messages[0].data", "JSON"),
    (
        [pb.PublishMessage(data=b'{"orderId": 9}'), pb.PublishMessage(data=b'{"symbol": "X"}')],
        "orders",
        grpc.StatusCode.INVALID_ARGUMENT,
        "messages[1].data",
        "lacks the key field /orderId",
    ),
    (  # the first invalid message is named, whichever check it fails
        [
            pb.PublishMessage(data=b'{"orderId": 9}'),
            pb.PublishMessage(data=b'{"orderId": 10}'),
            pb.PublishMessage(data=b"[1]"),
            pb.PublishMessage(data=b"{not json"),
        ],
        "orders",
        grpc.StatusCode.INVALID_ARGUMENT,
        "messages[2].data",
        "must be a JSON object",
    ),
    (
        [pb.PublishMessage(data=b'{"orderId": 9}'), pb.PublishMessage(data=b'{"orderId": 10}', sow_key="10")],
        "orders",
        grpc.StatusCode.INVALID_ARGUMENT,
        "messages[1].sow_key",
        "leave sow_key empty",
    ),
    (
        [pb.PublishMessage(data=b'{"a": 1}', sow_key="k"), pb.PublishMessage(data=b'{"a": 1}', sow_key="a\x00b")],
        "notes",
        grpc.StatusCode.INVALID_ARGUMENT,
        "messages[1].sow_key",
        "without NUL",
    ),
    (
        [pb.PublishMessage(data=b'{"a": 1}')],
        "notes",
        grpc.StatusCode.INVALID_ARGUMENT,
        "messages[0].sow_key",
        "sow_key",
    ),
    (
        [pb.PublishMessage(data=json.dumps({"orderId": 1, "pad": "x" * 5000}).encode())],
        "orders",
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        "messages[0].data",
        "max_document_bytes",
    ),
    ([], "orders", grpc.StatusCode.INVALID_ARGUMENT, "messages", "at least one"),
    ([pb.PublishMessage(data=b"{}")], "", grpc.StatusCode.INVALID_ARGUMENT, "topic", "topic is required"),
]


@pytest.mark.parametrize(("messages", "topic", "code", "field", "words"), PUBLISH_CASES)
async def test_bad_publish_gets_an_error_response_and_the_stream_stays_open(
    seeded: Running, messages: list[pb.PublishMessage], topic: str, code: grpc.StatusCode, field: str, words: str
) -> None:
    before = await state(seeded)

    async def requests() -> AsyncIterator[pb.PublishRequest]:
        yield pb.PublishRequest(topic=topic, messages=messages, correlation_id="bad")
        yield pb.PublishRequest(
            topic="orders", messages=[pb.PublishMessage(data=b'{"orderId": 77}')], correlation_id="ok"
        )

    async with grpc.aio.insecure_channel(seeded.target) as channel:
        responses = [r async for r in sow_pb2_grpc.SowServiceStub(channel).Publish(requests())]
    assert [r.correlation_id for r in responses] == ["bad", "ok"]
    bad, ok = responses
    assert bad.error.code == code.value[0]
    assert words in bad.error.message
    assert bad.first_bookmark == 0
    err = error_details_pb2.BadRequest()
    assert bad.error.details[0].Unpack(err)
    assert err.field_violations[0].field == field
    assert ok.first_bookmark == ok.last_bookmark == len(SEED) + 1  # the refused request used no bookmark
    after = await state(seeded)
    assert after == [*before, (77, len(SEED) + 1)]


async def test_sdk_raises_a_typed_publish_error(seeded: Running) -> None:
    with pytest.raises(PublishError) as err:
        await seeded.client.publish("orders", [{"orderId": 1}, {"orderId": 2}, b"nope"], batch_size=2)
    assert err.value.message_index == 2
    assert err.value.field == "messages[0].data"


async def test_message_over_the_transport_limit_is_resource_exhausted(seeded: Running) -> None:
    before = await state(seeded)
    big = [pb.PublishMessage(data=json.dumps({"orderId": i, "pad": "x" * 2000}).encode()) for i in range(100)]
    async with grpc.aio.insecure_channel(seeded.target) as channel:
        stub = sow_pb2_grpc.SowServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as err:
            async for _ in stub.Publish(iter([pb.PublishRequest(topic="orders", messages=big)])):
                pass
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "larger than max" in (err.value.details() or "")
    assert await state(seeded) == before


async def test_bad_bookmarks_are_refused_and_unknown_sub_ids_not_found(seeded: Running) -> None:
    async with grpc.aio.insecure_channel(seeded.target) as channel:
        stub = sow_pb2_grpc.SowServiceStub(channel)
        for bookmark, code, words in [
            ("99999999", grpc.StatusCode.INVALID_ARGUMENT, "after the latest bookmark"),
            ("yesterday", grpc.StatusCode.INVALID_ARGUMENT, "is not a sequence number"),
        ]:
            with pytest.raises(grpc.aio.AioRpcError) as err:
                async for _ in stub.Subscribe(pb.SubscribeRequest(topic="orders", bookmark=bookmark)):
                    pass
            assert err.value.code() == code
            assert words in (err.value.details() or "")
            assert details(err.value)[0] == ["bookmark"]
        with pytest.raises(grpc.aio.AioRpcError) as err:
            async for _ in stub.Sow(pb.SowRequest(topic="orders", bookmark="1")):
                pass
        assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "keeps no history" in (err.value.details() or "")
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.ReplaceSubscription(pb.ReplaceSubscriptionRequest(sub_id="x"))
        assert err.value.code() == grpc.StatusCode.NOT_FOUND
        assert details(err.value)[0] == ["sub_id"]


async def test_a_failure_while_a_sow_streams_is_mapped_through_the_status_table(
    seeded: Running, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Item 8 of the correctness issue: an error raised after the first response of a stream
    (here, while the query pages its results) leaves through the same table as any other, not
    as a bare UNKNOWN."""
    from sowdb.engine.read import prepared as query_module
    from sowdb.errors import ResourceExhausted

    def refuse(self: Any, *args: Any) -> Any:
        raise ResourceExhausted("a limit passed while streaming", field="batch_size")

    monkeypatch.setattr(query_module.PreparedQuery, "_page", refuse)
    async with grpc.aio.insecure_channel(seeded.target) as channel:
        stub = sow_pb2_grpc.SowServiceStub(channel)
        got: list[pb.SowResponse] = []
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await acollect(stub.Sow(pb.SowRequest(topic="orders")), got)
        assert [r.WhichOneof("event") for r in got] == ["group_begin"]  # it failed mid-stream
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert details(err.value)[0] == ["batch_size"]

        def crash(self: Any, *args: Any) -> Any:
            raise RuntimeError("boom")

        monkeypatch.setattr(query_module.PreparedQuery, "_page", crash)
        with pytest.raises(grpc.aio.AioRpcError) as err:
            async for _ in stub.Sow(pb.SowRequest(topic="orders")):
                pass
        assert err.value.code() == grpc.StatusCode.INTERNAL
        assert "RuntimeError" in (err.value.details() or "")
        assert "server log" in (err.value.details() or "")
