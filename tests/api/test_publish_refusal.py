"""A multi-request publish stops at its first refused request (issue 14, item 7).

The SDK keeps requests in flight, so before ``stop_on_error`` the server went on applying the
requests sent after a refused one: a 250-message publish with a bad message 151 stored 1-100
and 201-250. Now nothing after the refusal is applied: the server's side, on raw gRPC streams
(the SDK's: ``tests/client/test_publish_refusal.py``).
"""

from __future__ import annotations

import asyncio

import grpc

from sowdb_api.v1 import sow_pb2 as pb
from sowdb_api.v1 import sow_pb2_grpc
from tests.support import BAD_MESSAGE, Running, orders_with_a_bad_message


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
        for i, data in enumerate(orders_with_a_bad_message(300))
    ]

    def publish() -> tuple[list[pb.PublishResponse], grpc.StatusCode]:
        with grpc.insecure_channel(sowd.target) as channel:
            call = sow_pb2_grpc.SowServiceStub(channel).Publish(iter(requests))
            acks = list(call)
            return acks, call.code()

    acks, code = await asyncio.to_thread(publish)
    assert code == grpc.StatusCode.OK
    assert [a.correlation_id for a in acks] == [str(i) for i in range(BAD_MESSAGE + 1)]
    assert acks[-1].error.code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert len(await sowd.client.sow("orders", batch_size=1000).records()) == BAD_MESSAGE


async def test_without_the_flag_the_stream_goes_on_after_a_refusal(sowd: Running) -> None:
    async with grpc.aio.insecure_channel(sowd.target) as channel:
        call = sow_pb2_grpc.SowServiceStub(channel).Publish()
        for data in orders_with_a_bad_message(5, bad=2):
            await call.write(pb.PublishRequest(topic="orders", messages=[pb.PublishMessage(data=data)]))
        await call.done_writing()
        acks = [r async for r in call]
    assert [a.HasField("error") for a in acks] == [False, False, True, False, False]
