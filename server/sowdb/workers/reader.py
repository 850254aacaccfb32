"""A reader process of ``sowd --workers N``: live subscriptions served from the writer's feed.

A reader joins its writer's feed (:mod:`sowdb.workers.feed_rpc`) before it listens, then serves
the group's port beside the writer and the other readers. It places and delivers plain
subscriptions itself (``Subscribe`` with a topic or pattern, a filter and options), at its feed
position, with its own queues and slow-consumer cut-off: that is where a process spends its
time when many subscribers each have their own connection. It answers a SOW query of a topic
whose records are in an arena (``record_store = "arena"``) from the arena, mapped read-only
(``ReaderLive.sow``). Every other call is relayed to the writer (:mod:`sowdb.workers.forward`),
and so are the queries and subscriptions that need the writer's state or journal: a query of a
topic of objects, a pattern or a past point, a subscription with a bookmark (a replay), with
``oof`` or ``delta`` (the records a subscriber holds), and a joined view read under row filters
(its restricted copy). Health checks are answered from the writer's health as last seen
(:mod:`sowdb.workers.health`).

When the feed ends (the writer died or cut this reader off), the reader ends its
subscriptions UNAVAILABLE and exits; the supervisor starts what is needed again.
"""

from __future__ import annotations

import asyncio
import logging
import marshal
import os
import signal
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

import grpc

from sowdb.api import convert
from sowdb.api.service import method_handler
from sowdb.api.servicer import READ_FROM_KEY, Context, error_boundary
from sowdb.api.wire import packed_asked, query_frame, stream_frames
from sowdb.auth import Authenticator, view_sources
from sowdb.config import Config, ConfigError, is_regex_topic, load_config
from sowdb.engine import ReaderLive, SubscriptionStream
from sowdb.engine.access import Access
from sowdb.errors import ResourceExhausted, Unavailable
from sowdb.ports import bind, connection_limits, credentials
from sowdb.workers.feed_rpc import CLAIM_METHOD, FEED_METHOD
from sowdb.workers.forward import Relay, relay
from sowdb.workers.health import CHECK, WriterHealth
from sowdb.workers.reports import send_reports
from sowdb_api.v1 import sow_pb2 as pb

log = logging.getLogger("sowdb.workers.reader")

SOW = "/sowdb.v1.SowService/Sow"
SUBSCRIBE = "/sowdb.v1.SowService/Subscribe"
SOW_AND_SUBSCRIBE = "/sowdb.v1.SowService/SowAndSubscribe"
REPLACE = "/sowdb.v1.SowService/ReplaceSubscription"
GRACE_S = 1.0


class ReaderServicer:
    """The calls a reader answers itself; ``engine`` is its :class:`ReaderLive` (the error
    boundary counts the calls there), ``channel`` the writer's socket for what it relays."""

    service = "SowService"

    def __init__(self, live: ReaderLive, auth: Authenticator, channel: grpc.aio.Channel) -> None:
        self.engine = live
        self.auth = auth
        self.channel = channel
        self._releases: set[asyncio.Future[bool]] = set()

    @error_boundary
    async def Subscribe(self, request: pb.SubscribeRequest, context: Context, access: Access) -> AsyncIterator[Any]:
        if not self._served_here(request, access):
            async for relayed in relay(self.channel, SUBSCRIBE, request.SerializeToString(), context, streamed=False):
                yield relayed
            return
        options = convert.subscription_options(request.options, deleted_events=True)
        claimed = await self._claim(access, 1)
        try:
            stream = self.engine.subscribe(
                request.topic,
                filter=request.filter,
                options=options,
                sub_id=request.sub_id,
                owner=context.peer(),
                access=access,
            )
            async for response in _frames(stream):
                yield response
        finally:
            self._unclaim(claimed, access)

    @error_boundary
    async def SowAndSubscribe(
        self, request: pb.SowAndSubscribeRequest, context: Context, access: Access
    ) -> AsyncIterator[Any]:
        opts = convert.query_options(request.query)
        here = not _primary_asked(context) and self.engine.may_serve(opts)
        stream = None
        claimed = await self._claim(access, 1) if here else False
        try:
            if here:
                await self.engine.caught_up(opts.topic)  # the caller's own acknowledged writes
                options = convert.subscription_options(request.options)
                stream = self.engine.sow_and_subscribe(
                    opts, options=options, sub_id=request.sub_id, owner=context.peer(), access=access
                )
            if stream is None:
                self._unclaim(claimed, access)
                claimed = False
                raw = request.SerializeToString()
                async for relayed in relay(self.channel, SOW_AND_SUBSCRIBE, raw, context, streamed=False):
                    yield relayed
                return
            async for response in _frames(stream, packed_asked(request.query)):
                yield response
        finally:
            self._unclaim(claimed, access)

    def _unclaim(self, claimed: bool, access: Access) -> None:
        if claimed:  # not awaited: the call may be ending by cancellation
            release = asyncio.ensure_future(self._claim(access, -1))
            self._releases.add(release)
            release.add_done_callback(self._releases.discard)

    async def _claim(self, access: Access, adding: int) -> bool:
        """Count a subscription of ``access``'s user at the writer, which holds the group's
        count against its ``max_subscriptions``; False when the user has no such quota.

        Raises:
            ResourceExhausted: the user holds its quota across the group already.
        """
        if access.quota("max_subscriptions") is None:
            return False
        claim: Any = self.channel.unary_unary(CLAIM_METHOD)
        try:
            await claim(marshal.dumps((self.engine.reader, access.user, adding)))
        except grpc.aio.AioRpcError as exc:
            if adding < 0:
                return True  # the writer forgets a reader's claims when it goes
            if exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED:
                raise ResourceExhausted(exc.details() or "max_subscriptions", field="topic") from None
            raise Unavailable(f"the writer did not count the subscription: {exc.details()}") from None
        return True

    @error_boundary
    async def Sow(self, request: pb.SowRequest, context: Context, access: Access) -> AsyncIterator[Any]:
        events = None if _primary_asked(context) else self.engine.sow(convert.query_options(request), access)
        if events is None:
            async for relayed in relay(self.channel, SOW, request.SerializeToString(), context, streamed=False):
                yield relayed
            return
        packed = packed_asked(request)
        async with aclosing(events):
            async for event in events:
                yield query_frame(event, packed)

    @error_boundary
    async def ReplaceSubscription(
        self, request: pb.ReplaceSubscriptionRequest, context: Context, access: Access
    ) -> Any:
        bookmark = self.engine.replace_subscription(
            request.sub_id, convert.replacement(request), owner=context.peer(), user=access.user
        )
        if bookmark is not None:
            return pb.ReplaceSubscriptionResponse(bookmark=bookmark)
        # not one of this reader's: the writer's (or no one's, which the writer says)
        async for response in relay(self.channel, REPLACE, request.SerializeToString(), context, streamed=False):
            return response
        raise Unavailable("the writer did not answer the replacement")

    @staticmethod
    def _served_here(request: pb.SubscribeRequest, access: Access) -> bool:
        options = request.options
        if request.bookmark.strip() or options.oof or options.delta:
            return False  # the writer's journal, or the records its subscriber holds
        return is_regex_topic(request.topic) or access.join_filters(request.topic) is None


async def _frames(stream: SubscriptionStream, packed: bool = False) -> AsyncIterator[Any]:
    """A subscription's events as responses (``packed``: its query results as columns); the
    subscription never outlives the call."""
    async with stream, aclosing(stream.events()) as events:
        async for event in events:
            for response in stream_frames(event, packed):
                yield response


def _primary_asked(context: Context) -> bool:
    """Whether the caller asked for the primary's answer (a cluster's ``read-from``): the
    writer's, then."""
    return any(key == READ_FROM_KEY for key, _ in context.invocation_metadata() or ())


async def run_reader(config: Config, port: int, socket_path: str) -> int:
    """Serve as a reader until SIGTERM (0) or the end of the feed (1)."""
    cfg = config.server
    auth = Authenticator(config.security, view_sources(config))

    def reload_rights() -> None:  # a rights entry of the feed: the writer reloaded at this point
        try:
            fresh = load_config(config.source)
        except ConfigError as exc:
            log.error("the writer reloaded its rights but this reader cannot read the config: %s", exc)
            return
        auth.load(fresh.security)
        ended = live.reauthorize(auth.rights)
        log.info("reader %d reloaded users and roles; %d subscriptions ended", os.getpid(), ended)

    live = ReaderLive(cfg, config.topics, reload_rights)
    limits = [("grpc.max_receive_message_length", cfg.max_message_bytes), ("grpc.max_send_message_length", -1)]
    channel = grpc.aio.insecure_channel(f"unix:{socket_path}", options=limits)
    follow_feed: Any = channel.unary_stream(FEED_METHOD)
    feed = follow_feed(b"", wait_for_ready=True)
    first = await feed.read()
    if first is grpc.aio.EOF:
        raise ConnectionError("the writer ended its feed at once")
    live.apply(first)
    server = grpc.aio.server(
        options=[
            ("grpc.max_receive_message_length", cfg.max_message_bytes),
            ("grpc.max_send_message_length", cfg.max_message_bytes),
            ("grpc.so_reuseport", 1),
            ("grpc.keepalive_permit_without_calls", 1),
            ("grpc.http2.min_ping_interval_without_data_ms", 500),
            *connection_limits(cfg),
        ]
    )
    servicer = ReaderServicer(live, auth, channel)
    local = {
        SOW: method_handler(servicer.Sow, pb.SowRequest, streaming=True),
        SUBSCRIBE: method_handler(servicer.Subscribe, pb.SubscribeRequest, streaming=True),
        SOW_AND_SUBSCRIBE: method_handler(servicer.SowAndSubscribe, pb.SowAndSubscribeRequest, streaming=True),
        REPLACE: method_handler(servicer.ReplaceSubscription, pb.ReplaceSubscriptionRequest, streaming=False),
    }
    health = WriterHealth(channel)  # checks answered here while the writer serves (a long commit holds it)
    local[CHECK] = health.handler()
    server.add_generic_rpc_handlers((Relay(channel, local),))
    host = cfg.listen.rsplit(":", 1)[0]
    bind(server, f"{host}:{port}", credentials(config.security), shared=True)
    await server.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print(f"sowd reader {os.getpid()} serving {host}:{port} from bookmark {live.position}", flush=True)
    follow = asyncio.ensure_future(_follow(feed, live))
    reporting = asyncio.ensure_future(send_reports(channel, live, config))  # its figures in the writer's
    stopping = asyncio.ensure_future(stop.wait())
    await asyncio.wait([follow, stopping], return_when=asyncio.FIRST_COMPLETED)
    lost = follow.done()
    if lost:
        why = follow.exception() if not follow.cancelled() else None
        log.error("reader %d: the writer's feed ended (%s); ending its subscriptions", os.getpid(), why or "EOF")
        live.end_all(Unavailable("the server's writer process is gone; the group restarts: subscribe again"))
        await asyncio.sleep(0.2)  # the streams send their status
    for task in (follow, stopping, reporting):
        task.cancel()
    health.close()
    await server.stop(0.0 if lost else GRACE_S)
    await channel.close()
    return 1 if lost else 0


async def _follow(feed: Any, live: ReaderLive) -> None:
    """Apply the feed's entries in order until it ends."""
    while (entry := await feed.read()) is not grpc.aio.EOF:
        live.apply(entry)
