"""The writer's ordered feed, carried to its readers over the group's Unix socket.

The writer serves its usual services on a Unix socket in a directory only its user can enter
(the readers forward calls there) and, on that socket alone, :data:`FEED_METHOD`: a stream of
:class:`sowdb.engine.Feed` entries, the first one the position it starts at;
:data:`CLAIM_METHOD`, by which a reader counts its users' subscriptions against their quotas;
and :data:`REPORT_METHOD`, by which it sends the figures of its subscriptions. Asked on the
public port, the feed is refused: it carries every record, and its callers are the group's own
processes, which the socket's directory proves (a reader never relays these methods for a
client: ``sowdb.workers.forward.INTERNAL``).
"""

from __future__ import annotations

import marshal
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc

from sowdb.api.status import status_code
from sowdb.engine import Feed
from sowdb.engine.access import Access
from sowdb.errors import ResourceExhausted, SowdbError
from sowdb.workers.forward import INTERNAL

FEED_METHOD = f"{INTERNAL}Workers/Feed"
CLAIM_METHOD = f"{INTERNAL}Workers/Claim"
"""A reader's subscription placed (+1) or ended (-1), counted against its user's quota across
the group: ``marshal((reader, user, adding))``; refused RESOURCE_EXHAUSTED over the quota."""
REPORT_METHOD = f"{INTERNAL}Workers/Report"
"""A reader's figures (its subscriptions, queues and calls) for the writer's Stats and metrics:
``ReaderLive.report``'s bytes, sent about once a second when they changed."""


class FeedService(grpc.GenericRpcHandler):
    """:data:`FEED_METHOD` for the writer's readers; ``feed`` gives the engine's feed once the
    state is loaded (None before)."""

    def __init__(self, feed: Callable[[], Feed | None], rights: Callable[[str], Access | None]) -> None:
        self.feed = feed
        self.rights = rights  # a user's current rights (its quotas)

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler[Any, Any] | None:
        if handler_call_details.method == FEED_METHOD:
            return grpc.unary_stream_rpc_method_handler(self._follow)
        if handler_call_details.method == CLAIM_METHOD:
            return grpc.unary_unary_rpc_method_handler(self._claim)
        if handler_call_details.method == REPORT_METHOD:
            return grpc.unary_unary_rpc_method_handler(self._report)
        return None

    async def _claim(self, request: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> bytes:
        feed = self.feed()
        if not context.peer().startswith("unix:") or feed is None:
            await context.abort(grpc.StatusCode.PERMISSION_DENIED, "claims come from the group's readers only")
        assert feed is not None
        reader, user, adding = marshal.loads(request)
        access = self.rights(user)
        if access is None:
            await context.abort(grpc.StatusCode.PERMISSION_DENIED, f"user {user!r} no longer exists")
        assert access is not None
        try:
            feed.claim(reader, access, adding)
        except SowdbError as exc:
            await context.abort(status_code(exc), str(exc))
        return b""

    async def _report(self, request: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> bytes:
        feed = self.feed()
        if not context.peer().startswith("unix:") or feed is None:
            await context.abort(grpc.StatusCode.PERMISSION_DENIED, "reports come from the group's readers only")
        assert feed is not None
        feed.report(request)
        return b""

    async def _follow(self, request: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> AsyncIterator[bytes]:
        if not context.peer().startswith("unix:"):
            await context.abort(grpc.StatusCode.PERMISSION_DENIED, "the feed is served to the group's readers only")
        feed = self.feed()
        if feed is None:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "the writer is loading its state")
        assert feed is not None
        queue = feed.attach()
        try:
            async for entry in queue.stream():
                yield entry
        except ResourceExhausted as exc:
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, str(exc))
        finally:
            feed.detach(queue)


def serve_feed(
    server: grpc.aio.Server, socket_path: str, feed: Callable[[], Feed | None], rights: Callable[[str], Access | None]
) -> None:
    """Listen on the group's Unix socket too, and serve the feed and the claims there."""
    server.add_insecure_port(f"unix:{socket_path}")
    server.add_generic_rpc_handlers((FeedService(feed, rights),))
