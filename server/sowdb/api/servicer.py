"""The gRPC servicer: validate, delegate to the engine, map errors — nothing else.

Request-shape checks that need no state happen in the engine's option parsing too, so the
servicer stays a translation layer; every domain error leaves through :func:`_abort`, which
attaches the rich status of :mod:`sowdb.api.status`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from typing import Any, NoReturn

import grpc
from grpc_status import rpc_status

from sowdb.api import convert
from sowdb.api.status import internal_status, rich_status
from sowdb.api.wire import live_frames
from sowdb.engine import Engine, RecordBatch, StoredRecord
from sowdb.engine.query import QueryEvent
from sowdb.engine.subscriptions import SlowConsumer, Subscription
from sowdb.errors import ResourceExhausted, SowdbError
from sowdb_api.v1 import sow_pb2 as pb
from sowdb_api.v1 import sow_pb2_grpc

log = logging.getLogger("sowdb.api")

Context = grpc.aio.ServicerContext[Any, Any]

FRAME_BUDGET = 2000.0
"""Live frames per second that all subscribers together aim at (see ``_live``)."""


async def _abort(context: Context, exc: BaseException) -> NoReturn:
    if isinstance(exc, SowdbError):
        status = rich_status(exc)
    else:
        log.exception("internal error", exc_info=exc)
        status = internal_status(f"internal error: {type(exc).__name__}; see the server log")
    await context.abort_with_status(rpc_status.to_status(status))
    raise AssertionError("abort_with_status returned")  # pragma: no cover


PUBLISH_ACKS_AHEAD = 64
"""Acks a Publish call may have waiting to be sent before it stops receiving requests."""
PUBLISH_TASK_NAME = "sowdb-publish"
"""The name of the task that applies a Publish call's requests (tests look for it by name)."""


class SowServicer(sow_pb2_grpc.SowServiceServicer):
    """``sowdb.v1.SowService`` over an :class:`Engine`."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    async def Publish(
        self, request_iterator: AsyncIterator[pb.PublishRequest], context: Context
    ) -> AsyncIterator[pb.PublishResponse]:
        """Apply each request and acknowledge it, in order.

        Receiving runs ahead of acknowledging (a task applies requests while this generator
        sends their acks), so a receive is always outstanding: the next request has come
        through gRPC's completion thread while this one was applied, instead of the writer
        waiting for that hand-off after every ack.

        A refused request with ``stop_on_error`` ends the call (OK status) after its error
        response: the task applies each request as it receives it, so stopping there means that
        no later request — however many the client already sent — is applied. Clients that keep
        requests in flight rely on this to store nothing after the first refusal.
        """
        acks: asyncio.Queue[pb.PublishResponse | Exception | None] = asyncio.Queue(PUBLISH_ACKS_AHEAD)

        async def apply_all() -> None:
            try:
                async for req in request_iterator:
                    ack = self._apply(req)
                    await acks.put(ack)
                    if req.stop_on_error and ack.HasField("error"):
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
                    await _abort(context, ack)
                yield ack
        finally:
            applying.cancel()

    def _apply(self, req: pb.PublishRequest) -> pb.PublishResponse:
        try:
            messages = list(req.messages)  # each pass over req.messages wraps every message anew
            first, last = self.engine.publish(req.topic, messages, delta=req.delta, ttls=convert.ttls(messages))
        except SowdbError as exc:
            return pb.PublishResponse(correlation_id=req.correlation_id, error=rich_status(exc))
        return pb.PublishResponse(correlation_id=req.correlation_id, first_bookmark=first, last_bookmark=last)

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

    async def SowAndSubscribe(  # type: ignore[override]
        self, request: pb.SowAndSubscribeRequest, context: Context
    ) -> AsyncIterator[pb.SowAndSubscribeResponse | pb.SowResponse | bytes]:
        try:
            opts = convert.query_options(request.query)
            sub, events = self.engine.sow_and_subscribe(
                opts, options=convert.subscription_options(request.options), sub_id=request.sub_id, owner=context.peer()
            )
        except Exception as exc:
            await _abort(context, exc)
        async with aclosing(self._serve(sub, context, self._prelude(sub, events))) as frames:
            async for frame in frames:
                yield frame

    async def _prelude(self, sub: Subscription, query: AsyncIterator[QueryEvent] | None) -> AsyncIterator[Any]:
        """What a subscription sends before going live: its query's results (the subscription
        is held meanwhile), then the journal replay of a bookmark and ``completed``; then the
        changes held since the registration point are evaluated and it is live."""
        delivered: list[StoredRecord] = []
        if query is not None:
            async for event in query:
                if isinstance(event, RecordBatch) and sub.focus is not None:
                    delivered.extend(event.records)
                yield convert.sow_response(event)  # same field numbers as SowAndSubscribeResponse
        sub.accept(delivered)
        if sub.replay_from is not None:
            async for changes in self.engine.replay(sub):
                sub.evaluate(changes)
                for frame in live_frames(sub.drain()):
                    yield frame
            # ``completed`` has field number 8 in both subscription responses
            yield pb.SubscribeResponse(completed=pb.Completed(bookmark=sub.replay_from[1]))
        sub.release()

    async def Subscribe(  # type: ignore[override]
        self, request: pb.SubscribeRequest, context: Context
    ) -> AsyncIterator[pb.SubscribeResponse | bytes]:
        try:
            sub = self.engine.subscribe(
                request.topic,
                filter=request.filter,
                options=convert.subscription_options(request.options, deleted_events=True),
                sub_id=request.sub_id,
                owner=context.peer(),
                bookmark=request.bookmark,
            )
        except Exception as exc:
            await _abort(context, exc)
        async with aclosing(self._serve(sub, context, self._prelude(sub, None))) as frames:
            async for frame in frames:
                yield frame

    async def _serve(self, sub: Subscription, context: Context, prelude: AsyncIterator[Any]) -> AsyncGenerator[Any]:
        """A subscription stream: ``subscribed``, the prelude's frames, then live frames until
        the client leaves or falls too far behind; the subscription never outlives it."""
        try:
            # ``subscribed`` has field number 1 in both SowAndSubscribeResponse and SubscribeResponse
            yield pb.SubscribeResponse(subscribed=pb.Subscribed(sub_id=sub.id, bookmark=self.engine.last_seq))
            async for frame in prelude:
                yield frame
            async for frame in self._live(sub):
                yield frame
        except SlowConsumer as exc:
            await _abort(context, ResourceExhausted(str(exc)))
        finally:
            self.engine.unsubscribe(sub)

    async def _live(self, sub: Subscription) -> AsyncIterator[bytes]:
        """Live frames for a subscriber, drained in batches; a heartbeat when idle.

        gRPC's Python server sends only some 15k stream messages a second per core, whatever
        their size, so busy subscribers must get fewer, larger frames. All subscribers together
        aim at :data:`FRAME_BUDGET` frames a second: a subscriber sends at most one frame per
        ``subscribers / FRAME_BUDGET`` seconds and lets events accumulate in between. A stream
        that was idle for that long sends at once, so sparse traffic keeps its latency.
        """
        heartbeat = self.engine.config.server.heartbeat_s
        period = sub.options.conflation_s  # C-1: flush the conflated publishes this often
        loop = asyncio.get_running_loop()
        hub = self.engine.hub
        last_send = last_activity = loop.time()
        next_flush = last_activity + period
        while True:
            timeout = min(heartbeat, max(0.0, next_flush - loop.time())) if period else heartbeat
            woke = await sub.wakeup.wait(timeout)
            now = loop.time()
            if period and now >= next_flush:
                sub.flush()
                next_flush = now + period
                woke = woke or sub.wakeup.is_set()
            if not woke:
                if now - last_activity >= heartbeat:
                    last_activity = now
                    yield pb.SubscribeResponse(
                        heartbeat=pb.Heartbeat(bookmark=self.engine.last_seq)
                    ).SerializeToString()
                continue
            gap = len(hub.subs) / FRAME_BUDGET
            wait = last_send + gap - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            last_send = last_activity = loop.time()
            for frame in live_frames(sub.drain()):
                yield frame

    async def ReplaceSubscription(
        self, request: pb.ReplaceSubscriptionRequest, context: Context
    ) -> pb.ReplaceSubscriptionResponse:
        try:
            bookmark = self.engine.replace_subscription(
                request.sub_id,
                owner=context.peer(),
                filter=request.filter,
                options=convert.subscription_options(request.options),
                order_by=request.order_by,
                top_n=request.top_n if request.HasField("top_n") else None,
                skip_n=request.skip_n if request.HasField("skip_n") else None,
            )
        except Exception as exc:
            await _abort(context, exc)
        return pb.ReplaceSubscriptionResponse(bookmark=bookmark)
