"""What the sync and asyncio clients share: the calls that return a stream (:class:`Calls`),
translating a call's failure, and the bookkeeping of a query's frames and of a subscription's
events. The two clients differ only in how they wait (iterate or ``async for``, call or
``await``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Generic, TypeVar, Unpack

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from sowdb_address import dial_target
from sowdb_api.v1 import admin_pb2, admin_pb2_grpc, sow_pb2_grpc
from sowdb_api.v1 import sow_pb2 as pb
from sowdb_client import options as o
from sowdb_client.errors import SowdbError, from_rpc_error
from sowdb_client.events import Event, event_from_pb
from sowdb_client.publishing import PublishTally, publish_requests
from sowdb_client.servers import Resume, Servers
from sowdb_client.types import DEFAULT_MAX_MESSAGE_BYTES, PublishItem, Tls

SERVICE = "sowdb.v1.SowService"
HEALTH_CHECK = health_pb2.HealthCheckRequest(service=SERVICE)


DEFAULT_KEEPALIVE = 5.0
"""Seconds between keepalive pings, and how long one may go unanswered: a connection that
answers nothing (a blackholed node, a cable pulled) fails within about twice this, instead of
waiting for TCP's timeouts (minutes), so that a client given a server list moves on (HA-5)."""
MIN_KEEPALIVE = 1.0
"""The shortest interval the server accepts pings at (``sowdb.server``'s ping policy)."""


def channel_options(
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES, tls: Tls | None = None, keepalive: float | None = None
) -> list[tuple[str, Any]]:
    options: list[tuple[str, Any]] = [
        ("grpc.max_receive_message_length", max_message_bytes),
        ("grpc.max_send_message_length", max_message_bytes),
    ]
    if keepalive:
        if keepalive < MIN_KEEPALIVE:
            raise ValueError(f"keepalive must be at least {MIN_KEEPALIVE:g} s (the server refuses faster pings)")
        ms = round(keepalive * 1000)
        options += [
            ("grpc.keepalive_time_ms", ms),
            ("grpc.keepalive_timeout_ms", ms),
            ("grpc.http2.ping_timeout_ms", ms),  # what this gRPC waits on a ping's answer for (default 1 min)
            ("grpc.keepalive_permit_without_calls", 1),  # an idle subscription is watched too
            ("grpc.http2.max_pings_without_data", 0),
        ]
    if tls is not None and tls.server_name:
        options.append(("grpc.ssl_target_name_override", tls.server_name))
    return options


def tls_of(tls: bool | Tls | None) -> Tls | None:
    """``tls=True`` is TLS with the system's CAs; a :class:`Tls` says more; falsy is plaintext."""
    if isinstance(tls, Tls):
        return tls
    return Tls() if tls else None


def credentials(tls: Tls) -> grpc.ChannelCredentials:
    """The channel credentials of a :class:`Tls` (file names are read here)."""

    def pem(value: str | bytes | None) -> bytes | None:
        if value is None or isinstance(value, bytes):
            return value
        with open(value, "rb") as f:
            return f.read()

    return grpc.ssl_channel_credentials(
        root_certificates=pem(tls.ca), private_key=pem(tls.key), certificate_chain=pem(tls.cert)
    )


_Channel = TypeVar("_Channel")


SINGLE_THREADED: list[tuple[str, Any]] = [("SingleThreadedUnaryStream", 1)]  # grpc.experimental.ChannelOptions
"""The blocking client's option: a server-streaming call (a query, a subscription) is read on
the thread that iterates it, instead of grpc starting a thread per call to drive it — some
0.2 ms of a point lookup's ~1.3 (issue 29). The client's calls only iterate, cancel and read the
status, which such a call supports."""


def open_channel(
    insecure: Callable[..., _Channel],
    secure: Callable[..., _Channel],
    target: str,
    tls: bool | Tls | None,
    max_message_bytes: int,
    keepalive: float | None = None,
    extra: Sequence[tuple[str, Any]] = (),
) -> _Channel:
    """A channel to ``target``, plaintext or TLS, made by grpc's (or grpc.aio's) factories: the
    one place both clients' connection settings are decided (``extra``: options of one kind of
    client only, :data:`SINGLE_THREADED`).

    Raises:
        ValueError: ``target``'s port is out of 1..65535 (gRPC would dial it modulo 65536).
    """
    target = dial_target(target)
    settings = tls_of(tls)
    options = channel_options(max_message_bytes, settings, keepalive) + list(extra)
    if settings is None:
        return insecure(target, options=options)
    return secure(target, credentials(settings), options=options)


class Connection(Generic[_Channel]):
    """A channel to one server and the stubs of the services a client calls on it."""

    def __init__(self, address: str, channel: _Channel) -> None:
        self.address = address
        self.channel = channel
        any_channel: Any = channel  # sync or asyncio: the stubs are typed by overloads of each
        self.stub: Any = sow_pb2_grpc.SowServiceStub(any_channel)
        self.admin: Any = admin_pb2_grpc.AdminServiceStub(any_channel)
        self.health: Any = health_pb2_grpc.HealthStub(any_channel)  # its stubs omit Check


def role_of(nodes: Sequence[admin_pb2.ClusterNode] | SowdbError) -> str:
    """A server's role from its ``ClusterStatus`` (itself first), or "" when it cannot say: it
    runs alone (FAILED_PRECONDITION) or the user may not ask (PERMISSION_DENIED).

    Raises:
        SowdbError: any other failure (the server is unreachable).
    """
    if isinstance(nodes, SowdbError):
        if nodes.code in (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.PERMISSION_DENIED):
            return ""
        raise nodes
    return nodes[0].role if nodes else ""


def token_metadata(token: str | None) -> tuple[tuple[str, str], ...] | None:
    """The metadata that authenticates every call (A-1), or None without a token."""
    return (("authorization", f"Bearer {token}"),) if token else None


@contextmanager
def rpc_errors() -> Iterator[None]:
    """Raise a failed call as the typed :class:`SowdbError` of its status (rich details read)."""
    try:
        yield
    except grpc.RpcError as exc:
        raise from_rpc_error(exc) from None


NOT_SERVING_KEY = "sowdb-not-serving"
"""The trailing metadata in which a NOT_SERVING health check says why (e.g. ``starting: 12 of
50 records loaded`` while the server loads its state)."""


def check_serving(resp: Any, trailing: Iterable[tuple[str, Any]] | None = None) -> None:
    """Raises:
    SowdbError: the health check says the server is not serving (UNAVAILABLE, with the reason
        the server gave in its ``trailing`` metadata: starting, or its disk is full).
    """
    if resp.status != health_pb2.HealthCheckResponse.SERVING:
        why = dict(trailing or ()).get(NOT_SERVING_KEY)
        raise SowdbError(grpc.StatusCode.UNAVAILABLE, str(why) if why else "server is not serving")


def health_check(conn: Connection[grpc.Channel], timeout: float, metadata: Any) -> None:
    """A health check over ``conn``, checked (:func:`check_serving`)."""
    resp, call = conn.health.Check.with_call(HEALTH_CHECK, timeout=timeout, metadata=metadata)
    check_serving(resp, call.trailing_metadata())


async def health_check_async(conn: Connection[grpc.aio.Channel], within_s: float, metadata: Any) -> None:
    """:func:`health_check` over an asyncio channel."""
    call = conn.health.Check(HEALTH_CHECK, timeout=within_s, metadata=metadata)
    resp = await call
    check_serving(resp, await call.trailing_metadata())


def refused_at_once(call: Any) -> SowdbError | None:
    """A stream call's error when the server refused it before answering anything (a node that
    is not the primary refusing a primary read), else None; waits for the call's headers, which
    come with its first answer, so it costs a caller about to read that answer nothing."""
    try:
        call.initial_metadata()
    except grpc.RpcError as exc:
        return from_rpc_error(exc)
    if call.done() and call.code() != grpc.StatusCode.OK:
        return from_rpc_error(call)
    return None


async def refused_at_once_async(call: Any) -> SowdbError | None:
    """:func:`refused_at_once` of an asyncio call."""
    try:
        await call.initial_metadata()
    except grpc.RpcError as exc:
        return from_rpc_error(exc)
    if call.done():
        code = await call.code()
        if code != grpc.StatusCode.OK:
            error = grpc.aio.AioRpcError(
                code, await call.initial_metadata(), await call.trailing_metadata(), await call.details()
            )
            return from_rpc_error(error)
    return None


class SowFrames:
    """A query's frames as they arrive: ``group_begin`` and ``group_end`` (with the counts)."""

    def __init__(self, call: Any, opener: Callable[[], Any] | None = None) -> None:
        """``call``: the query's call; or None and ``opener``, which makes it on first use (a
        client of a server list chooses the server then)."""
        self._call = call
        self._opener = opener
        self.owner: object = None  # the client: it keeps the channel alive while this is read
        self.group_begin: pb.GroupBegin | None = None
        self.group_end: pb.GroupEnd | None = None

    def _note(self, resp: pb.SowResponse) -> None:
        kind = resp.WhichOneof("event")
        if kind == "group_begin":
            self.group_begin = resp.group_begin
        elif kind == "group_end":
            self.group_end = resp.group_end

    def cancel(self) -> None:
        """Stop receiving (the server stops sending)."""
        self._opener = None
        if self._call is not None:
            self._call.cancel()


class EventStream:
    """A subscription's events as they arrive; ``sub_id`` once ``subscribed`` has come."""

    def __init__(self, call: Any, reopen: Callable[..., Any] | None = None, resume: Resume | None = None) -> None:
        """``call``: the subscription's call; or None, with ``reopen`` (called with the error
        that ended the last call, None at first, and whether that call delivered anything; it
        returns the next call, on a server it chose) and ``resume`` (what was delivered)."""
        self._call = call
        self._reopen = reopen
        self._resume = resume
        self._cancelled = False
        self.owner: object = None  # the client: it keeps the channel alive while this is read
        self.sub_id = ""

    def _event(self, resp: pb.SowAndSubscribeResponse | pb.SubscribeResponse) -> Event:
        event = event_from_pb(resp)
        if event.kind == "subscribed":
            self.sub_id = event.sub_id
        return event

    def _failed(self, exc: grpc.RpcError) -> None:
        """The stream ended with an error: silently if this side cancelled it, else raised."""
        if not self._cancelled:
            raise from_rpc_error(exc) from None

    def cancel(self) -> None:
        """End the subscription (the iteration then stops)."""
        self._cancelled = True
        if self._call is not None:
            self._call.cancel()


S = TypeVar("S")  # the client's query result type
E = TypeVar("E")  # the client's subscription stream type
P = TypeVar("P")  # the client's publish_iter type


class Calls(Generic[S, E, P]):
    """The calls that return a stream, defined once for both clients (the stub is the sync or
    the asyncio one; the result wrappers are each client's own), and the requests of the rest.

    With a server list (:mod:`sowdb_client.servers`) a stream's call is made by the client's
    ``_opener``/``_reopener`` on the server they choose, and a publish by ``_publish_failover``.
    """

    _stub: Any
    _metadata: tuple[tuple[str, str], ...] | None = None
    _servers: Servers
    _max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES  # a publish splits its requests to fit

    def _sow_result(self, call: Any, opener: Any = None) -> S:
        raise NotImplementedError

    def _subscription(self, call: Any, reopen: Any = None, resume: Resume | None = None) -> E:
        raise NotImplementedError

    def _publish(self, tally: PublishTally, call: Any) -> P:
        raise NotImplementedError

    def _opener(self, method: str, request: Any, timeout: float | None) -> Any:
        raise NotImplementedError

    def _reopener(self, resume: Resume, timeout: float | None) -> Any:
        raise NotImplementedError

    def _publish_failover(
        self,
        tally: PublishTally,
        topic: str,
        messages: Iterable[PublishItem],
        options: Mapping[str, Any],
        timeout: float | None,
    ) -> P:
        raise NotImplementedError

    def sow(self, topic: str, *, timeout: float | None = None, **options: Unpack[o.QueryOptions]) -> S:
        """Query the state of a topic (or of every topic a regex matches); iterate the result
        for its records (``group_end`` has the counts once it has been read)."""
        req = o.sow_request(topic, o.checked(options, o.QueryOptions, "sow"))
        if self._servers.many:
            return self._sow_result(None, self._opener("Sow", req, timeout))
        return self._sow_result(self._stub.Sow(req, timeout=timeout, metadata=self._metadata))

    def subscribe(self, topic: str, *, timeout: float | None = None, **options: Unpack[o.SubscribeOptions]) -> E:
        """Subscribe to every later message of a topic (or of every topic a regex matches);
        ``bookmark`` replays the journal after that point first (then ``completed``). Given a
        server list, the subscription resumes on another server when its own fails, from the
        last bookmark it delivered (HA-5)."""
        req = o.subscribe_request(topic, o.checked(options, o.SubscribeOptions, "subscribe"))
        if self._servers.many:
            resume = Resume(req, deadline=timeout is not None)
            return self._subscription(None, self._reopener(resume, timeout), resume)
        return self._subscription(self._stub.Subscribe(req, timeout=timeout, metadata=self._metadata))

    def sow_and_subscribe(
        self, topic: str, *, timeout: float | None = None, **options: Unpack[o.SowAndSubscribeOptions]
    ) -> E:
        """Query and subscribe at one atomic point: ``subscribed``, ``group_begin``, ``sow``
        batches, ``group_end``, then live events (feed them to a :class:`Mirror`). Given a
        server list, it is placed as reads are, and ends with an error when its server fails
        (issue it again for a fresh state)."""
        req = o.sow_and_subscribe_request(topic, o.checked(options, o.SowAndSubscribeOptions, "sow_and_subscribe"))
        if self._servers.many:
            opener = self._opener("SowAndSubscribe", req, timeout)
            return self._subscription(None, lambda _error, _progressed: opener())
        return self._subscription(self._stub.SowAndSubscribe(req, timeout=timeout, metadata=self._metadata))

    def publish_iter(
        self,
        topic: str,
        messages: Iterable[PublishItem],
        *,
        timeout: float | None = None,
        **options: Unpack[o.PublishOptions],
    ) -> P:
        """Publish as ``publish`` does, yielding one :class:`PublishAck` per acknowledged batch
        (its size and bookmarks) as it arrives, for progress reports and running totals.
        Closing the iterator early cancels the call; batches already sent may still be stored.

        Raises:
            PublishError: as for ``publish``, after the acks of the batches stored before.
            SowdbError: the call failed.
        """
        tally = PublishTally()
        given = o.checked(options, o.PublishOptions, "publish")
        if self._servers.many:
            return self._publish_failover(tally, topic, messages, given, timeout)
        requests = publish_requests(topic, messages, given, tally, self._max_message_bytes)
        return self._publish(tally, self._stub.Publish(requests, timeout=timeout, metadata=self._metadata))

    @staticmethod
    def _replace(sub_id: str, options: Mapping[str, Any]) -> pb.ReplaceSubscriptionRequest:
        return o.replace_request(sub_id, o.checked(options, o.ReplaceOptions, "replace_subscription"))

    @staticmethod
    def _delete(topic: str, options: Mapping[str, Any]) -> pb.SowDeleteRequest:
        return o.sow_delete_request(topic, o.checked(options, o.DeleteOptions, "sow_delete"))
