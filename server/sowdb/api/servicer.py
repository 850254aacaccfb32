"""The gRPC servicer: validate, delegate to the engine, map errors — nothing else.

Request-shape checks that need no state happen in the engine's option parsing too, so the
servicer stays a translation layer; every domain error leaves through :func:`_abort`, which
attaches the rich status of :mod:`sowdb.api.status`.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any, NoReturn

import grpc
from grpc_status import rpc_status

from sowdb.api import convert
from sowdb.api.status import internal_status, rich_status
from sowdb.engine import Engine
from sowdb.errors import SowdbError, Unimplemented
from sowdb_api.v1 import sow_pb2 as pb
from sowdb_api.v1 import sow_pb2_grpc

log = logging.getLogger("sowdb.api")

Context = grpc.aio.ServicerContext[Any, Any]


async def _abort(context: Context, exc: BaseException) -> NoReturn:
    if isinstance(exc, SowdbError):
        status = rich_status(exc)
    else:
        log.exception("internal error", exc_info=exc)
        status = internal_status(f"internal error: {type(exc).__name__}; see the server log")
    await context.abort_with_status(rpc_status.to_status(status))
    raise AssertionError("abort_with_status returned")  # pragma: no cover


class SowServicer(sow_pb2_grpc.SowServiceServicer):
    """``sowdb.v1.SowService`` over an :class:`Engine`."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    async def Publish(
        self, request_iterator: AsyncIterator[pb.PublishRequest], context: Context
    ) -> AsyncIterator[pb.PublishResponse]:
        publish = self.engine.publish
        async for req in request_iterator:
            try:
                first, last = publish(req.topic, req.messages, delta=req.delta, ttls=convert.ttls(req))
            except SowdbError as exc:
                yield pb.PublishResponse(correlation_id=req.correlation_id, error=rich_status(exc))
                continue
            yield pb.PublishResponse(correlation_id=req.correlation_id, first_bookmark=first, last_bookmark=last)

    async def Sow(self, request: pb.SowRequest, context: Context) -> AsyncIterator[pb.SowResponse | bytes]:  # type: ignore[override]
        try:
            events = self.engine.sow(convert.query_options(request))
        except Exception as exc:
            await _abort(context, exc)
        to_response = convert.sow_response
        async for event in events:
            yield to_response(event)

    async def SowDelete(self, request: pb.SowDeleteRequest, context: Context) -> pb.SowDeleteResponse:
        try:
            count, bookmark = self.engine.sow_delete(
                request.topic, filter=request.filter, sow_keys=list(request.sow_keys), data=request.data
            )
        except Exception as exc:
            await _abort(context, exc)
        return pb.SowDeleteResponse(deleted_count=count, bookmark=bookmark)

    async def ListTopics(self, request: pb.ListTopicsRequest, context: Context) -> pb.ListTopicsResponse:
        return pb.ListTopicsResponse(topics=[convert.topic_info(t) for t in self.engine.list_topics()])

    async def SowAndSubscribe(
        self, request: pb.SowAndSubscribeRequest, context: Context
    ) -> AsyncIterator[pb.SowAndSubscribeResponse]:
        await _abort(context, Unimplemented("subscriptions are not available in this version"))
        yield pb.SowAndSubscribeResponse()  # pragma: no cover  (makes this an async generator)

    async def Subscribe(self, request: pb.SubscribeRequest, context: Context) -> AsyncIterator[pb.SubscribeResponse]:
        await _abort(context, Unimplemented("subscriptions are not available in this version"))
        yield pb.SubscribeResponse()  # pragma: no cover

    async def ReplaceSubscription(
        self, request: pb.ReplaceSubscriptionRequest, context: Context
    ) -> pb.ReplaceSubscriptionResponse:
        await _abort(context, Unimplemented("subscriptions are not available in this version"))
