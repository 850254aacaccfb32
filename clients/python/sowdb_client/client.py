"""The synchronous client. Its twin is :mod:`sowdb_client.aio`: the calls that return a stream
are defined once for both (:class:`~sowdb_client.calls.Calls`), with the options of
:mod:`sowdb_client.options`; here are only the ones that wait for their answer."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from typing import Any, Unpack

import grpc
from grpc_health.v1 import health_pb2_grpc

from sowdb_api.v1 import admin_pb2, admin_pb2_grpc, sow_pb2_grpc
from sowdb_api.v1 import sow_pb2 as pb
from sowdb_client import calls
from sowdb_client import options as o
from sowdb_client.calls import Calls, EventStream, SowFrames
from sowdb_client.events import Event
from sowdb_client.publishing import PublishTally
from sowdb_client.types import (
    DEFAULT_MAX_MESSAGE_BYTES,
    DEFAULT_TARGET,
    PublishAck,
    PublishItem,
    Record,
    Tls,
    records_from_pb,
)


class SowResult(SowFrames):
    """The result of a ``sow`` query: iterate it for the records; :meth:`events` gives the raw
    frames instead. ``group_begin`` and ``group_end`` (with the counts) are set as they arrive."""

    def events(self) -> Iterator[pb.SowResponse]:
        """Every response of the stream: group_begin, record batches, group_end."""
        with calls.rpc_errors():
            for resp in self._call:
                self._note(resp)
                yield resp

    def __iter__(self) -> Iterator[Record]:
        for resp in self.events():
            if resp.WhichOneof("event") == "records":
                yield from records_from_pb(resp.records.records)

    def records(self) -> list[Record]:
        """Every record of the result, as a list."""
        return list(self)


class SubscriptionStream(EventStream):
    """A live subscription: iterate it for :class:`Event` objects; :meth:`cancel` ends it."""

    def __iter__(self) -> Iterator[Event]:
        try:
            for resp in self._call:
                yield self._event(resp)
        except grpc.RpcError as exc:
            self._failed(exc)


class Client(Calls[SowResult, SubscriptionStream, Iterator[PublishAck]]):
    """A connection to a sowdb server.

    Usage::

        with Client("127.0.0.1:9007") as c:
            c.publish("orders", [{"orderId": 1, "symbol": "SYM1"}])
            for rec in c.sow("orders", filter="/symbol = 'SYM1'"):
                print(rec.json())
    """

    def __init__(
        self,
        target: str = DEFAULT_TARGET,
        *,
        token: str | None = None,
        tls: bool | Tls | None = None,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    ) -> None:
        """Connect to ``target`` (``host:port``). ``token``: sent with every call (a server with
        users asks for one); ``tls``: ``True`` for TLS with the system's CAs, or a :class:`Tls`
        with a CA file and, for mutual TLS, a client certificate."""
        self.target = target
        self._channel = calls.open_channel(
            grpc.insecure_channel, grpc.secure_channel, target, tls, max_message_bytes, calls.SINGLE_THREADED
        )
        self._metadata = calls.token_metadata(token)
        self._stub = sow_pb2_grpc.SowServiceStub(self._channel)
        self._admin = admin_pb2_grpc.AdminServiceStub(self._channel)
        self._health: Any = health_pb2_grpc.HealthStub(self._channel)  # its stubs omit Check

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._channel.close()

    def _sow_result(self, call: Any) -> SowResult:
        return SowResult(call)

    def _subscription(self, call: Any) -> SubscriptionStream:
        return SubscriptionStream(call)

    def _publish(self, tally: PublishTally, call: Any) -> Iterator[PublishAck]:
        try:
            with calls.rpc_errors():
                for resp in call:
                    yield tally.ack(resp)
        finally:
            call.cancel()  # a no-op once the call has ended; stops sending when we stop early

    def ping(self, *, timeout: float = 5.0) -> float:
        """Round-trip time in seconds of a health check.

        Raises:
            SowdbError: the server is unreachable or not serving.
        """
        start = time.perf_counter()
        with calls.rpc_errors():
            calls.check_serving(self._health.Check(calls.HEALTH_CHECK, timeout=timeout, metadata=self._metadata))
        return time.perf_counter() - start

    def publish(
        self,
        topic: str,
        messages: Iterable[PublishItem],
        *,
        timeout: float | None = None,
        **options: Unpack[o.PublishOptions],
    ) -> PublishAck:
        """Publish messages in atomic batches (``batch_size``, default 100) over one stream.

        Messages are JSON bytes or str, mappings (encoded here), or :class:`Message` for a
        SowKey or expiration. Returns once every batch is acknowledged, with the count and the
        bookmarks of the first and last message. With ``producer_id`` (J-4) each request is
        applied once however often it is sent (see :class:`~sowdb_client.PublishOptions` for the
        numbering); ``duplicates`` counts the messages acknowledged as applied before.

        Raises:
            PublishError: a batch was refused. That batch and every later one are not stored
                (the server stops at the first refusal, even with batches in flight); the
                earlier ones are, and the error says how many (``stored``, ``first_bookmark``,
                ``last_bookmark``). ``message_index`` counts from the first message of this call.
            SowdbError: the call failed; the batches acknowledged before are stored (use
                :meth:`publish_iter` to know which).
        """
        count = first = last = duplicates = 0
        for ack in self.publish_iter(topic, messages, timeout=timeout, **options):
            count, duplicates = count + ack.count, duplicates + ack.duplicates
            first, last = first or ack.first_bookmark, ack.last_bookmark or last
        return PublishAck(count, first, last, duplicates)

    def replace_subscription(
        self, sub_id: str, *, timeout: float | None = None, **options: Unpack[o.ReplaceOptions]
    ) -> int:
        """R-1: new filter and options for a live subscription of this client; records newly
        in scope arrive on its stream, records leaving it get an oof. Returns the bookmark at
        which the change took effect. A paginated subscription takes its page again.

        Raises:
            NotFoundError: no such subscription on this client's connection.
        """
        with calls.rpc_errors():
            return int(
                self._stub.ReplaceSubscription(
                    self._replace(sub_id, options), timeout=timeout, metadata=self._metadata
                ).bookmark
            )

    def sow_delete(self, topic: str, *, timeout: float | None = None, **options: Unpack[o.DeleteOptions]) -> int:
        """Delete by exactly one of filter, SowKeys or data; returns the number deleted."""
        with calls.rpc_errors():
            return int(
                self._stub.SowDelete(
                    self._delete(topic, options), timeout=timeout, metadata=self._metadata
                ).deleted_count
            )

    def list_topics(self, *, timeout: float | None = None) -> list[pb.TopicInfo]:
        """The configured topics with kind, key, durability and record count."""
        with calls.rpc_errors():
            listed = self._stub.ListTopics(pb.ListTopicsRequest(), timeout=timeout, metadata=self._metadata)
            return list(listed.topics)

    def stats(
        self, topic: str = "", *, topics_only: bool = False, timeout: float | None = None
    ) -> admin_pb2.StatsResponse:
        """The server's figures (SPEC §12), taken at one point: per topic (records, publishes,
        deletes, bytes, subscriptions), the live subscriptions with their queues, and server-wide
        figures (journal, disk, calls per RPC with errors by code, CPU and memory).

        ``topic`` (a name or a regex) narrows the topics and subscriptions. With security on, a
        user without an admin role asks with ``topics_only=True``: the topics it may read and its
        own subscriptions, without the server-wide figures.

        Raises:
            PermissionDeniedError: server-wide figures without an admin role, or a topic named
                that the user may not read.
        """
        with calls.rpc_errors():
            request = admin_pb2.StatsRequest(topic=topic, topics_only=topics_only)
            return self._admin.Stats(request, timeout=timeout, metadata=self._metadata)

    def cluster_status(self, *, timeout: float | None = None) -> list[admin_pb2.ClusterNode]:
        """The cluster as this server sees it (SPEC §13): itself first, then (on the primary)
        every replica following it, each with its role, epoch, applied bookmark and lag.

        Raises:
            FailedPreconditionError: the server runs alone (no ``[cluster]``).
            PermissionDeniedError: security is on and the user has no admin role.
        """
        with calls.rpc_errors():
            request = admin_pb2.ClusterStatusRequest()
            return list(self._admin.ClusterStatus(request, timeout=timeout, metadata=self._metadata).nodes)
