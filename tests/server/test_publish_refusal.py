"""A multi-request publish stops at its first refused request (issue 14, item 7).

The SDK keeps requests in flight, so before ``stop_on_error`` the server went on applying the
requests sent after a refused one: a 250-message publish with a bad message 151 stored 1-100
and 201-250. Now nothing after the refusal is applied, and the error says what was stored.
"""

from __future__ import annotations

import asyncio
import json

import grpc
import pytest

from sowdb_api.v1 import sow_pb2 as pb
from sowdb_api.v1 import sow_pb2_grpc
from sowdb_client import Client, PublishAck, PublishError
from tests.support import Process, Running

BAD = 150  # the 151st message: the second request of 100 is refused


def messages(n: int = 250, bad: int = BAD) -> list[bytes]:
    return [b'{"orderId": ' if i == bad else json.dumps({"orderId": i}).encode() for i in range(n)]


async def test_the_server_applies_nothing_after_a_refused_stop_on_error_request(sowd: Running) -> None:
    """300 one-message requests go out as fast as gRPC sends them; the 151st is refused, and
    the stream ends there with an OK status: the requests after it are not applied.

    The call runs on the synchronous gRPC client (in a thread): the asyncio client reports its
    own write that failed after the server had ended the stream as the call's status
    (``INTERNAL: Internal error from Core``), which would hide the server's OK.
    """
    requests = [
        pb.PublishRequest(
            topic="orders", messages=[pb.PublishMessage(data=data)], stop_on_error=True, correlation_id=str(i)
        )
        for i, data in enumerate(messages(300))
    ]

    def publish() -> tuple[list[pb.PublishResponse], grpc.StatusCode]:
        with grpc.insecure_channel(sowd.target) as channel:
            call = sow_pb2_grpc.SowServiceStub(channel).Publish(iter(requests))
            acks = list(call)
            return acks, call.code()

    acks, code = await asyncio.to_thread(publish)
    assert code == grpc.StatusCode.OK
    assert [a.correlation_id for a in acks] == [str(i) for i in range(BAD + 1)]
    assert acks[-1].error.code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert len(await sowd.client.sow("orders", batch_size=1000).records()) == BAD


async def test_without_the_flag_the_stream_goes_on_after_a_refusal(sowd: Running) -> None:
    async with grpc.aio.insecure_channel(sowd.target) as channel:
        call = sow_pb2_grpc.SowServiceStub(channel).Publish()
        for data in messages(5, bad=2):
            await call.write(pb.PublishRequest(topic="orders", messages=[pb.PublishMessage(data=data)]))
        await call.done_writing()
        acks = [r async for r in call]
    assert [a.HasField("error") for a in acks] == [False, False, True, False, False]


async def test_async_publish_stops_at_the_first_refusal_and_says_what_was_stored(sowd: Running) -> None:
    c = sowd.client
    with pytest.raises(PublishError) as err:
        await c.publish("orders", messages())
    e = err.value
    assert (e.message_index, e.stored, e.first_bookmark, e.last_bookmark) == (BAD, 100, 1, 100)
    assert e.code == grpc.StatusCode.INVALID_ARGUMENT
    stored = sorted(r.json()["orderId"] for r in await c.sow("orders", batch_size=1000).records())
    assert stored == list(range(100))
    assert (await c.publish("orders", [{"orderId": 999}])).first_bookmark == 101  # nothing else used one


async def test_async_publish_iter_yields_one_ack_per_request(sowd: Running) -> None:
    acks = [a async for a in sowd.client.publish_iter("orders", messages(250, bad=-1), batch_size=100)]
    assert acks == [PublishAck(100, 1, 100), PublishAck(100, 101, 200), PublishAck(50, 201, 250)]


def test_sync_publish_stops_at_the_first_refusal_and_says_what_was_stored(sowd_process: Process) -> None:
    with Client(sowd_process.target) as c:
        with pytest.raises(PublishError) as err:
            c.publish("orders", messages())
        e = err.value
        assert (e.message_index, e.stored, e.first_bookmark, e.last_bookmark) == (BAD, 100, 1, 100)
        assert sorted(r.json()["orderId"] for r in c.sow("orders", batch_size=1000)) == list(range(100))
        seen: list[PublishAck] = []
        with pytest.raises(PublishError) as err:
            for ack in c.publish_iter("orders", messages(250, bad=220), batch_size=100):
                seen.append(ack)
        assert seen == [PublishAck(100, 101, 200), PublishAck(100, 201, 300)]
        assert (err.value.message_index, err.value.stored) == (220, 200)
        assert (err.value.first_bookmark, err.value.last_bookmark) == (101, 300)
