"""A reader's calls that the writer serves: relayed over the group's Unix socket, bytes as they are.

Every method that a reader does not serve itself (but the group's own, :data:`INTERNAL`,
refused as the writer refuses them on the public port) is relayed whole (its requests, its responses,
its status and rich error details, the caller's metadata with its token), so a caller cannot
tell which process answered. gRPC frames a unary call as a stream of one message each way, so
one stream-to-stream relay serves every kind of method.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc

from sowdb.api.servicer import RELAYED_PEER_KEY

Context = grpc.aio.ServicerContext[Any, Any]

_NOT_RELAYED = ("user-agent", "grpc-")
"""Metadata the relaying channel sets for itself."""

INTERNAL = "/sowdb.internal."
"""The group's own methods (the feed, claims, reports): served on the writer's Unix socket to
its readers, never relayed for a client (the writer would take the relayed call for a reader's:
the feed carries every record, unchecked)."""


def relayed_metadata(context: Context) -> list[tuple[str, Any]]:
    """The caller's metadata (its token, its ``sowdb-*`` keys) as the relayed call carries it,
    and the caller's address, for the writer to know whose call it is (R-1's owner, refusals);
    an address the caller claimed is dropped."""
    mine = [
        (k, v)
        for k, v in context.invocation_metadata() or ()
        if not k.startswith((":", *_NOT_RELAYED)) and k != RELAYED_PEER_KEY
    ]
    return [*mine, (RELAYED_PEER_KEY, context.peer())]


async def relay(
    channel: grpc.aio.Channel, method: str, requests: Any, context: Context, *, streamed: bool = True
) -> AsyncIterator[bytes]:
    """The writer's responses to ``requests`` (an async iterator of request bytes, or one
    request's bytes when not ``streamed``); its refusal ends this call with the same status.

    Raises:
        grpc.aio.AbortError: the writer refused the call (this call was aborted with its status).
    """
    if not streamed:
        one = requests

        async def single() -> AsyncIterator[bytes]:
            yield one

        requests = single()
    call: grpc.aio.StreamStreamCall[Any, Any] = channel.stream_stream(method)(
        requests, metadata=relayed_metadata(context), timeout=context.time_remaining()
    )
    try:
        async for response in call:
            yield response
    except grpc.aio.AioRpcError as exc:
        code = exc.code()
        if code == grpc.StatusCode.CANCELLED and context.cancelled():
            return  # the caller went
        await context.abort(code, exc.details() or "", tuple(exc.trailing_metadata() or ()))
    finally:
        call.cancel()


async def _refuse_internal(requests: AsyncIterator[bytes], context: Context) -> AsyncIterator[bytes]:
    """A group's own method asked on the public port: refused, as the writer refuses it there."""
    await context.abort(grpc.StatusCode.PERMISSION_DENIED, "the group's own methods are served to its processes only")
    yield b""  # never reached: an async generator, as gRPC wants for a stream's handler


class Relay(grpc.GenericRpcHandler):
    """Every method not in ``local``, relayed to the writer on ``channel``.

    A relay's handler is made per call, not kept by method: a caller may name any path, and a
    table of them would grow with every name a client made up.
    """

    def __init__(self, channel: grpc.aio.Channel, local: dict[str, grpc.RpcMethodHandler[Any, Any]]) -> None:
        self.channel = channel
        self.local = local

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler[Any, Any] | None:
        method = handler_call_details.method
        handler = self.local.get(method)
        if handler is not None:
            return handler
        if method.startswith(INTERNAL):
            return grpc.stream_stream_rpc_method_handler(_refuse_internal)
        channel = self.channel

        async def relay_call(requests: AsyncIterator[bytes], context: Context) -> AsyncIterator[bytes]:
            async for response in relay(channel, method, requests, context):  # an async generator:
                yield response  # gRPC runs any other function returning an iterator on a thread

        return grpc.stream_stream_rpc_method_handler(relay_call)
