"""The synchronous client. Its twin is :mod:`sowdb_client.aio`: the calls that return a stream
are defined once for both (:class:`~sowdb_client.calls.Calls`), with the options of
:mod:`sowdb_client.options`; here are only the ones that wait for their answer."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar, Unpack

import grpc

from sowdb_api.v1 import admin_pb2
from sowdb_api.v1 import sow_pb2 as pb
from sowdb_client import calls
from sowdb_client import options as o
from sowdb_client.calls import DEFAULT_KEEPALIVE, Calls, Connection, EventStream, SowFrames
from sowdb_client.errors import DataLossError, NotFoundError, SowdbError, from_rpc_error
from sowdb_client.events import Event
from sowdb_client.publishing import PublishTally, publish_requests
from sowdb_client.servers import DEFAULT_FAILOVER_TIMEOUT, PROBE_TIMEOUT, Failover, Outbox, ReadFrom, Resume, Servers
from sowdb_client.types import (
    DEFAULT_MAX_MESSAGE_BYTES,
    DEFAULT_TARGET,
    PublishAck,
    PublishItem,
    Record,
    Tls,
    records_of,
)

T = TypeVar("T")


class SowResult(SowFrames):
    """The result of a ``sow`` query: iterate it for the records; :meth:`events` gives the raw
    frames instead. ``group_begin`` and ``group_end`` (with the counts) are set as they arrive."""

    def events(self) -> Iterator[pb.SowResponse]:
        """Every response of the stream: group_begin, record batches, group_end. The SDK asks
        for packed batches: a batch's records are in ``resp.records.packed`` (columns), or in
        ``resp.records.records`` from a server older than that layout;
        :func:`sowdb_client.records_of` reads either."""
        if self._call is None and self._opener is not None:
            self._call = self._opener()
        if self._call is None:  # cancelled before it was opened
            return
        with calls.rpc_errors():
            for resp in self._call:
                self._note(resp)
                yield resp

    def __iter__(self) -> Iterator[Record]:
        for resp in self.events():
            if resp.WhichOneof("event") == "records":
                yield from records_of(resp.records)

    def records(self) -> list[Record]:
        """Every record of the result, as a list (a batch at a time, not through the iterator)."""
        out: list[Record] = []
        for resp in self.events():
            if resp.WhichOneof("event") == "records":
                out += records_of(resp.records)
        return out


class SubscriptionStream(EventStream):
    """A live subscription: iterate it for :class:`Event` objects; :meth:`cancel` ends it.
    Given a server list, it resumes on another server when its own fails (HA-5)."""

    def __iter__(self) -> Iterator[Event]:
        if self._reopen is None:
            try:
                for resp in self._call:
                    yield self._event(resp)
            except grpc.RpcError as exc:
                self._failed(exc)
            return
        error: SowdbError | None = None
        progressed = False
        while not self._cancelled:
            self._call = self._reopen(error, progressed)
            error, progressed = None, False
            try:
                for resp in self._call:
                    progressed = True
                    event = self._event(resp)
                    shown = self._resume.admit(event) if self._resume is not None else event
                    if shown is not None:
                        yield shown
                return
            except grpc.RpcError as exc:
                error = from_rpc_error(exc)
            except DataLossError:  # resumed on a history that is not the one it delivered
                self._call.cancel()
                raise
            except SowdbError as exc:  # its server is behind the resume point
                self._call.cancel()
                error = exc
            if self._resume is None and not self._cancelled:  # sow_and_subscribe: not resumed
                raise error


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
        target: str | Sequence[str] = DEFAULT_TARGET,
        *,
        token: str | None = None,
        tls: bool | Tls | None = None,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        read_from: ReadFrom = "primary",
        failover_timeout: float = DEFAULT_FAILOVER_TIMEOUT,
        keepalive: float | None = DEFAULT_KEEPALIVE,
    ) -> None:
        """Connect to ``target`` (``host:port``), or to a cluster's servers (SPEC §13, HA-5):
        ``"h1:9007,h2:9007,h3:9007"`` or a list. ``token``: sent with every call (a server with
        users asks for one); ``tls``: ``True`` for TLS with the system's CAs, or a :class:`Tls`
        with a CA file and, for mutual TLS, a client certificate.

        With a list, writes go to the primary, found and found again after a failover for up
        to ``failover_timeout`` seconds; publishes carry a J-4 producer id (this client's, when
        the call names none) so that one sent again is applied once; reads go to the primary,
        or with ``read_from="any"`` to each server in turn; a subscription resumes on another
        server from the last bookmark it delivered. ``keepalive``: seconds between pings that
        notice a connection that answers nothing (None: none)."""
        self.target = target if isinstance(target, str) else ",".join(target)
        self._servers = Servers(target, read_from=read_from, failover_timeout=failover_timeout)
        self._max_message_bytes = max_message_bytes

        def connect(address: str) -> Connection[grpc.Channel]:
            insecure, secure = grpc.insecure_channel, grpc.secure_channel
            extra = calls.SINGLE_THREADED  # a query's responses read on the caller's thread: no thread per call
            channel = calls.open_channel(insecure, secure, address, tls, max_message_bytes, keepalive, extra)
            return Connection(address, channel)

        self._connect = connect
        self._conns = {address: connect(address) for address in self._servers.addresses[:1]}
        first = self._conns[self._servers.addresses[0]]
        self._metadata = calls.token_metadata(token)
        self._stub = first.stub  # a single server's calls go straight to it, as before server lists

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for conn in self._conns.values():
            conn.channel.close()

    def _conn(self, address: str) -> Connection[grpc.Channel]:
        if address not in self._conns:
            self._conns[address] = self._connect(address)
        return self._conns[address]

    def _sow_result(self, call: Any, opener: Any = None) -> SowResult:
        result = SowResult(call, opener)
        result.owner = self  # its stream is read on the caller's thread: nothing else holds the channel
        return result

    def _subscription(self, call: Any, reopen: Any = None, resume: Resume | None = None) -> SubscriptionStream:
        stream = SubscriptionStream(call, reopen, resume)
        stream.owner = self
        return stream

    def _publish(self, tally: PublishTally, call: Any) -> Iterator[PublishAck]:
        try:
            with calls.rpc_errors():
                for resp in call:
                    yield tally.ack(resp)
            tally.end()
        finally:
            call.cancel()  # a no-op once the call has ended; stops sending when we stop early

    # --- a server list (HA-5): the decisions are sowdb_client.servers'; here they are carried out

    def _reach(self, failover: Failover, *, probe: bool = False) -> Connection[grpc.Channel]:
        """A server to call: the one ``failover`` names, asked its role first when it must be
        the primary and is not known to be, or probed when ``probe``."""
        while True:
            conn = self._conn(failover.address())
            try:
                if failover.needs_confirm(conn.address):
                    failover.confirmed(conn.address, calls.role_of(self._status_of(conn)))
                elif probe or not failover.to_primary:
                    with calls.rpc_errors():
                        calls.health_check(conn, PROBE_TIMEOUT, self._metadata)
                return conn
            except SowdbError as exc:
                time.sleep(failover.failed(conn.address, exc))

    def _status_of(self, conn: Connection[grpc.Channel]) -> list[admin_pb2.ClusterNode] | SowdbError:
        try:
            with calls.rpc_errors():
                reply = conn.admin.ClusterStatus(
                    admin_pb2.ClusterStatusRequest(), timeout=PROBE_TIMEOUT, metadata=self._metadata
                )
                return list(reply.nodes)
        except SowdbError as exc:
            return exc

    def _call(self, fn: Callable[[Connection[grpc.Channel]], T], *, write: bool = False) -> T:
        """A unary call, on the server its kind goes to, again elsewhere after a failover."""
        if not self._servers.many:
            with calls.rpc_errors():
                return fn(self._conns[self._servers.addresses[0]])
        failover = self._servers.failover(write=write)
        while True:
            conn = self._reach(failover)
            try:
                with calls.rpc_errors():
                    return fn(conn)
            except SowdbError as exc:
                time.sleep(failover.failed(conn.address, exc))

    def _opener(self, method: str, request: Any, timeout: float | None) -> Callable[[], Any]:
        def open_call() -> Any:
            failover = self._servers.failover(write=False)
            metadata = self._servers.read_metadata(self._metadata)
            while True:  # a read refused at once by a node that is not the primary goes on to it
                conn = self._reach(failover)
                call = getattr(conn.stub, method)(request, timeout=timeout, metadata=metadata)
                refused = calls.refused_at_once(call) if failover.to_primary else None
                if refused is None:
                    return call
                time.sleep(failover.failed(conn.address, refused))

        return open_call

    def _reopener(self, resume: Resume, timeout: float | None) -> Callable[[SowdbError | None, bool], Any]:
        failover = self._servers.failover(write=False)

        def reopen(error: SowdbError | None, progressed: bool) -> Any:
            if progressed:
                failover.succeeded()
            if error is not None:
                time.sleep(failover.failed(resume.address, resume.judged(error)))
            conn = self._reach(failover, probe=error is not None)
            resume.address = conn.address
            metadata = self._servers.read_metadata(self._metadata)
            return conn.stub.Subscribe(resume.resumed_request(), timeout=timeout, metadata=metadata)

        return reopen

    def _publish_failover(
        self,
        tally: PublishTally,
        topic: str,
        messages: Iterable[PublishItem],
        options: Mapping[str, Any],
        timeout: float | None,
    ) -> Iterator[PublishAck]:
        with self._servers.producing(options, tally.sizes) as given:
            outbox = Outbox(publish_requests(topic, iter(messages), given, tally, self._max_message_bytes))
            failover = self._servers.failover(write=True)
            while True:
                conn = self._reach(failover)
                call = conn.stub.Publish(outbox.attempt(), timeout=timeout, metadata=self._metadata)
                try:
                    with calls.rpc_errors():
                        for resp in call:
                            ack = tally.ack(resp)
                            outbox.acknowledged()
                            failover.succeeded()
                            yield ack
                    tally.end()
                    return
                except SowdbError as exc:
                    time.sleep(failover.failed(conn.address, exc))
                finally:
                    call.cancel()

    def find_primary(self) -> str:
        """The address of the primary among this client's servers (SPEC §13), waiting up to
        ``failover_timeout`` for one; with a single server, that server. For tools that hand
        one address on (the Spark sources plan on the driver and read and write there).

        Raises:
            UnavailableError: no server of the list is the primary within ``failover_timeout``.
        """
        return self._call(lambda c: c.address, write=True)

    def ping(self, *, timeout: float = 5.0) -> float:
        """Round-trip time in seconds of a health check.

        Raises:
            SowdbError: the server is unreachable or not serving.
        """
        start = time.perf_counter()
        self._call(lambda c: calls.health_check(c, timeout, self._metadata))
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
        request = self._replace(sub_id, options)
        for conn in list(self._conns.values())[:-1]:  # a server list: where the subscription is
            try:
                with calls.rpc_errors():
                    return int(
                        conn.stub.ReplaceSubscription(request, timeout=timeout, metadata=self._metadata).bookmark
                    )
            except NotFoundError:
                continue
        with calls.rpc_errors():
            last = list(self._conns.values())[-1]
            return int(last.stub.ReplaceSubscription(request, timeout=timeout, metadata=self._metadata).bookmark)

    def sow_delete(self, topic: str, *, timeout: float | None = None, **options: Unpack[o.DeleteOptions]) -> int:
        """Delete by exactly one of filter, SowKeys or data; returns the number deleted."""
        request = self._delete(topic, options)
        return int(
            self._call(
                lambda c: c.stub.SowDelete(request, timeout=timeout, metadata=self._metadata).deleted_count, write=True
            )
        )

    def list_topics(self, *, timeout: float | None = None) -> list[pb.TopicInfo]:
        """The configured topics with kind, key, durability and record count."""
        return self._call(
            lambda c: list(c.stub.ListTopics(pb.ListTopicsRequest(), timeout=timeout, metadata=self._metadata).topics)
        )

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
        request = admin_pb2.StatsRequest(topic=topic, topics_only=topics_only)
        reply: admin_pb2.StatsResponse = self._call(
            lambda c: c.admin.Stats(request, timeout=timeout, metadata=self._metadata)
        )
        return reply

    def cluster_status(self, *, timeout: float | None = None) -> list[admin_pb2.ClusterNode]:
        """The cluster as this server sees it (SPEC §13): itself first, then (on the primary)
        every replica following it, each with its role, epoch, applied bookmark and lag.

        Raises:
            FailedPreconditionError: the server runs alone (no ``[cluster]``).
            PermissionDeniedError: security is on and the user has no admin role.
        """
        request = admin_pb2.ClusterStatusRequest()
        return self._call(
            lambda c: list(c.admin.ClusterStatus(request, timeout=timeout, metadata=self._metadata).nodes)
        )
