"""The gRPC servicer: validate, delegate to the engine, encode, map errors — nothing else.

Every handler is wrapped by :func:`error_boundary`, the one place where an exception becomes a
gRPC status (through the table of :mod:`sowdb.api.status`), whether it is raised before the
first response or in the middle of a stream. What a subscription sends when is the engine's
(:mod:`sowdb.engine.live.streams`); here its events are only encoded (:mod:`sowdb.api.wire`).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing, asynccontextmanager
from typing import Any, NoReturn, TypeVar

import grpc
from grpc_status import rpc_status

from sowdb.api import convert
from sowdb.api.refusals import Call, limiter_for, topic_of
from sowdb.api.service import Undecodable
from sowdb.api.status import internal_status, rich_status, status_code
from sowdb.api.wire import packed_asked, query_frame, stream_frames
from sowdb.auth import Authenticator
from sowdb.engine import Engine, SowAndSubscribeArgs, SubscriptionOptions, SubscriptionStream
from sowdb.engine.access import Access
from sowdb.errors import SowdbError
from sowdb_api.v1 import sow_pb2 as pb

Context = grpc.aio.ServicerContext[Any, Any]

PUBLISH_ACKS_AHEAD = 64
"""Acks a Publish call may have waiting to be sent before it stops receiving requests."""

PUBLISH_TASK_NAME = "sowdb-publish"
"""The name of the task that applies a Publish call's requests (tests look for it by name)."""


async def _abort(context: Context, exc: BaseException, call: Call, request: Any) -> NoReturn:
    if isinstance(exc, SowdbError):
        code, status = status_code(exc), rich_status(exc)
    else:
        code = grpc.StatusCode.INTERNAL
        status = internal_status(f"internal error: {type(exc).__name__}; see the server log")
    call.refused(code, exc, topic_of(request))
    await context.abort_with_status(rpc_status.to_status(status))
    raise AssertionError("abort_with_status returned")  # pragma: no cover


_Handler = TypeVar("_Handler", bound=Callable[..., Any])


def authorization_of(context: Context) -> str | None:
    for key, value in context.invocation_metadata() or ():
        if key == "authorization":
            return str(value)
    return None


READ_FROM_KEY = "sowdb-read-from"
"""Call metadata of a read that must be served by a cluster's primary (value ``primary``): the
SDKs' ``read_from="primary"`` over a server list. A replica refuses it FAILED_PRECONDITION naming
the primary, as it refuses a write, so a client whose idea of the primary is stale (an old
primary back as a replica) is sent on instead of being answered from a replica (HA-5)."""


RELAYED_PEER_KEY = "sowdb-peer"
"""Metadata a reader process of the group (``sowd --workers``) sets on a call it relays: the
address of the caller it relays for."""


def caller_peer(context: Context) -> str:
    """The caller's address: the connection that owns its subscriptions (R-1) and that refusals
    are logged and limited by. A call relayed by a reader process comes over the group's Unix
    socket (a 0700 directory: the group's processes only) and says whose it is; on any other
    connection that key is not believed."""
    peer: str = context.peer()
    if peer.startswith("unix:"):
        for key, value in context.invocation_metadata() or ():
            if key == RELAYED_PEER_KEY:
                return str(value)
    return peer


def _read_where_asked(engine: Engine, context: Context) -> None:
    for key, value in context.invocation_metadata() or ():
        if key == READ_FROM_KEY and value == "primary":
            engine.require_primary()
            return


def error_boundary(method: _Handler) -> _Handler:
    """Wrap a handler so that any exception it raises — before its first response or while
    streaming — ends the call with the status the table gives (like grpclib's
    ``Stream.__aexit__``). A call the handler already aborted passes through untouched.

    It is also the call's one entry and exit: the caller is authenticated here, once (A-1), and
    the handler is given the caller's :class:`Access`, which the engine enforces; the call is
    counted (calls, duration, refusals by code) and a refusal logged, once
    (:mod:`sowdb.api.refusals`). The servicer's ``service`` names the RPC.
    """
    name = method.__name__
    if inspect.isasyncgenfunction(method):

        @functools.wraps(method)
        async def streaming(self: Any, request: Any, context: Context) -> AsyncIterator[Any]:
            async with (
                _guarded(self, name, request, context) as access,
                aclosing(method(self, request, context, access)) as responses,
            ):
                async for response in responses:
                    yield response

        return streaming  # type: ignore[return-value]

    @functools.wraps(method)
    async def unary(self: Any, request: Any, context: Context) -> Any:
        async with _guarded(self, name, request, context) as access:
            return await method(self, request, context, access)
        raise AssertionError("the boundary ended the call")  # pragma: no cover  # _abort raised

    return unary  # type: ignore[return-value]


@asynccontextmanager
async def _guarded(servicer: Servicer, name: str, request: Any, context: Context) -> AsyncIterator[Access]:
    """One call inside the boundary: counted, its caller authenticated, its request checked
    decodable; whatever the body raises ends the call with its status (:func:`_abort`)."""
    call = _call(servicer, name, context)
    try:
        access = servicer.auth.access(authorization_of(context))
        call.user = access.user
        if isinstance(request, Undecodable):
            raise request.error()
        yield access
    except grpc.aio.AbortError:
        raise
    except Exception as exc:
        await _abort(context, exc, call, request)
    finally:
        call.ended()


def _call(servicer: Servicer, method: str, context: Context) -> Call:
    """A new call of ``servicer.service``/``method``, counted as started."""
    rpc = f"{servicer.service}/{method}"
    counters = servicer.engine.rpc_counters(rpc)
    counters.calls += 1
    return Call(rpc, caller_peer(context), counters, limiter=limiter_for(servicer.engine))


def _placing(sub_id: str, options: SubscriptionOptions, context: Context, access: Access) -> SowAndSubscribeArgs:
    """What every subscription is placed with: its options, id, owner (the caller's connection,
    R-1) and the caller's rights."""
    return {"options": options, "sub_id": sub_id, "owner": caller_peer(context), "access": access}


class Servicer:
    """What every service's handlers need: the engine they delegate to, and the authenticator
    :func:`error_boundary` asks who the caller is (no users configured: everyone may do all).
    ``service`` names the service in the per-RPC figures (``SowService/Publish``)."""

    service = ""

    def __init__(self, engine: Engine, auth: Authenticator | None = None) -> None:
        self.engine = engine
        self.auth = auth or Authenticator(None)


class SowServicer(Servicer):
    """``sowdb.v1.SowService`` over an :class:`Engine`."""

    service = "SowService"

    @error_boundary
    async def Publish(
        self, request_iterator: AsyncIterator[pb.PublishRequest], context: Context, access: Access
    ) -> AsyncIterator[pb.PublishResponse]:
        """Apply each request and acknowledge it, in order.

        Receiving runs ahead of acknowledging (a task applies requests while this generator
        sends their acks), so a receive is always outstanding: the next request has come
        through gRPC's completion thread while this one was applied, instead of the writer
        waiting for that hand-off after every ack.

        Each request is applied under the caller's rights of the moment (A-4): after a reload a
        request outside them is refused, and a user who no longer exists ends the call with
        PERMISSION_DENIED.

        A refused request with ``stop_on_error`` ends the call (OK status) after its error
        response: the task applies each request as it receives it, so stopping there means that
        no later request — however many the client already sent — is applied. Clients that keep
        requests in flight rely on this to store nothing after the first refusal.
        """
        acks: asyncio.Queue[pb.PublishResponse | Exception | None] = asyncio.Queue(PUBLISH_ACKS_AHEAD)
        rpc = f"{self.service}/Publish"
        refusals = Call(  # a request refused
            rpc, caller_peer(context), self.engine.rpc_counters(rpc), access.user, limiter=limiter_for(self.engine)
        )
        authorization = authorization_of(context)

        async def apply_all() -> None:
            rights = access
            try:
                async for req in request_iterator:
                    rights = self.auth.current(authorization, rights)  # a reload holds for open streams
                    ack = self._apply(req, rights, refusals)
                    await acks.put(ack)
                    if ack.HasField("error") and not isinstance(req, Undecodable) and req.stop_on_error:
                        break
            except asyncio.CancelledError:
                raise  # the sender has gone: no one to tell
            except Exception as exc:  # the sender is alive and draining: it raises this
                await acks.put(exc)
                return
            await acks.put(None)

        applying = asyncio.create_task(apply_all(), name=PUBLISH_TASK_NAME)
        try:
            while (ack := await acks.get()) is not None:
                if isinstance(ack, Exception):
                    raise ack
                if self.engine.acknowledge is not None and (ack.last_bookmark or ack.duplicate):  # a cluster (§13)
                    ack = await self._acknowledged(ack, refusals)
                yield ack
        finally:
            applying.cancel()

    async def _acknowledged(self, ack: pb.PublishResponse, refusals: Call) -> pb.PublishResponse:
        """The ack, once the cluster lets it be given (HA-1, HA-3), else an error response. A J-4
        duplicate waits for everything written so far: the request it repeats may be journaled
        here but not yet held by the replicas, and acknowledging its retry must not say more."""
        assert self.engine.acknowledge is not None
        try:
            await self.engine.acknowledge(ack.last_bookmark or self.engine.last_seq)
        except SowdbError as exc:
            refusals.refused(status_code(exc), exc, "")
            return pb.PublishResponse(correlation_id=ack.correlation_id, error=rich_status(exc))
        return ack

    def _apply(self, req: pb.PublishRequest | Undecodable, access: Access, refusals: Call) -> pb.PublishResponse:
        """One request applied, or refused in an error response (the stream goes on: the
        refusal is counted and logged here, as the boundary does for a call's)."""
        if isinstance(req, Undecodable):
            error = req.error()
            refusals.refused(status_code(error), error, "")
            return pb.PublishResponse(error=rich_status(error))
        try:
            messages = list(req.messages)  # each pass over req.messages wraps every message anew
            producer = (req.producer_id, req.producer_seq) if req.producer_id else None
            first, last = self.engine.publish(
                req.topic, messages, delta=req.delta, ttls=convert.ttls(messages), producer=producer, access=access
            )
        except SowdbError as exc:
            refusals.refused(status_code(exc), exc, req.topic)
            return pb.PublishResponse(correlation_id=req.correlation_id, error=rich_status(exc))
        if producer is not None and not first:
            return pb.PublishResponse(correlation_id=req.correlation_id, duplicate=True)
        return pb.PublishResponse(correlation_id=req.correlation_id, first_bookmark=first, last_bookmark=last)

    @error_boundary
    async def Sow(
        self, request: pb.SowRequest, context: Context, access: Access
    ) -> AsyncIterator[pb.SowResponse | bytes]:
        _read_where_asked(self.engine, context)
        packed = packed_asked(request)
        async for event in self.engine.sow(convert.query_options(request), access):
            yield query_frame(event, packed)

    @error_boundary
    async def SowDelete(self, request: pb.SowDeleteRequest, context: Context, access: Access) -> pb.SowDeleteResponse:
        count, bookmark = self.engine.sow_delete(
            request.topic, filter=request.filter, sow_keys=list(request.sow_keys), data=request.data, access=access
        )
        if self.engine.acknowledge is not None and bookmark:  # a cluster (SPEC §13)
            await self.engine.acknowledge(bookmark)
        return pb.SowDeleteResponse(deleted_count=count, bookmark=bookmark)

    @error_boundary
    async def ListTopics(
        self, request: pb.ListTopicsRequest, context: Context, access: Access
    ) -> pb.ListTopicsResponse:
        return pb.ListTopicsResponse(topics=[convert.topic_info(t) for t in self.engine.list_topics(access)])

    @error_boundary
    async def SowAndSubscribe(
        self, request: pb.SowAndSubscribeRequest, context: Context, access: Access
    ) -> AsyncIterator[pb.SowAndSubscribeResponse | pb.SowResponse | bytes]:
        _read_where_asked(self.engine, context)
        options = convert.subscription_options(request.options)
        args = _placing(request.sub_id, options, context, access)
        stream = self.engine.sow_and_subscribe(convert.query_options(request.query), **args)
        async for frame in _frames(stream, packed_asked(request.query)):
            yield frame

    @error_boundary
    async def Subscribe(
        self, request: pb.SubscribeRequest, context: Context, access: Access
    ) -> AsyncIterator[pb.SubscribeResponse | bytes]:
        _read_where_asked(self.engine, context)
        options = convert.subscription_options(request.options, deleted_events=True)
        args = _placing(request.sub_id, options, context, access)
        stream = self.engine.subscribe(request.topic, filter=request.filter, bookmark=request.bookmark, **args)
        async for frame in _frames(stream):
            yield frame

    @error_boundary
    async def ReplaceSubscription(
        self, request: pb.ReplaceSubscriptionRequest, context: Context, access: Access
    ) -> pb.ReplaceSubscriptionResponse:
        change = convert.replacement(request)
        owner = caller_peer(context)
        bookmark = self.engine.replace_subscription(request.sub_id, change, owner=owner, user=access.user)
        return pb.ReplaceSubscriptionResponse(bookmark=bookmark)


async def _frames(stream: SubscriptionStream, packed: bool = False) -> AsyncIterator[Any]:
    """A subscription's events as responses (``packed``: its query results as columns); the
    subscription never outlives the call."""
    async with stream, aclosing(stream.events()) as events:
        async for event in events:
            for frame in stream_frames(event, packed):
                yield frame
