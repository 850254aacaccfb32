"""The Connect / gRPC-web gateway of the console: every RPC of the server, for the browser.

A browser cannot speak gRPC (no HTTP/2 trailers from ``fetch``), so the console's page calls
the server through the Connect protocol (or gRPC-web), which ``connectrpc``'s ASGI application
serves. Each of its endpoints is a thin forwarder to the server's own gRPC port over a local
``grpc.aio`` channel, passing the ``authorization`` header through as metadata. So a call from
the console goes through the one authentication and the one error boundary of
:mod:`sowdb.api.servicer` exactly as a call from an SDK does (SPEC §11 and E-1 hold with no
second copy of either), and the gateway's only work on the way back is to carry the gRPC status,
with its rich details (``BadRequest``, ``ErrorInfo`` with a filter's column), over as a Connect
error.

Messages cross the gateway as bytes, never decoded: the codec below hands the protobuf encoding
through in both directions, so the endpoints are made from the services' descriptors alone and
a new RPC in ``proto/`` is served here with no change.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

import grpc
from connectrpc.code import Code
from connectrpc.errors import ConnectError, ErrorDetail
from connectrpc.method import IdempotencyLevel, MethodInfo, StreamType
from connectrpc.request import RequestContext
from connectrpc.server import ConnectASGIApplication, Endpoint
from google.protobuf.descriptor import MethodDescriptor, ServiceDescriptor
from google.rpc import status_pb2
from protobuf.wkt import Any as AnyDetail

from sowdb.api.service import ADMIN_SERVICE, DATA_SERVICE, SERVICE

SERVICES: tuple[ServiceDescriptor, ...] = (SERVICE, ADMIN_SERVICE, DATA_SERVICE)
"""What the gateway serves: the server's own services (health and reflection stay gRPC-only)."""

_DETAILS_KEY = "grpc-status-details-bin"

Context = RequestContext[bytes, bytes]


class PassThroughCodec:
    """The ``proto`` codec of the gateway: a message is its protobuf encoding, as bytes.

    The gRPC port decodes (and validates) every request anyway; decoding it here too would only
    cost time and risk the two disagreeing. Only the binary format is offered: the console's
    page uses it, and a JSON client would need the gateway to know every message type.
    """

    def name(self) -> str:
        return "proto"

    def encode(self, message: bytes) -> bytes:
        return message

    def decode(self, data: bytes | bytearray, message_class: type[bytes]) -> bytes:
        return bytes(data)


def connect_error(exc: grpc.aio.AioRpcError) -> ConnectError:
    """The Connect error for a gRPC status: the same code, message and details.

    The details travel in the ``grpc-status-details-bin`` trailer as a ``google.rpc.Status``;
    each ``Any`` in it is handed on unopened, so the page finds the ``BadRequest`` and
    ``ErrorInfo`` the servicer attached (a filter error's column and token) where a gRPC client
    would.
    """
    name = exc.code().name
    code = Code.CANCELED if name == "CANCELLED" else Code.__members__.get(name, Code.UNKNOWN)
    details: list[ErrorDetail] = []
    for key, value in exc.trailing_metadata() or ():
        if key == _DETAILS_KEY and isinstance(value, bytes):
            status = status_pb2.Status.FromString(value)
            details = [ErrorDetail(AnyDetail(type_url=d.type_url, value=d.value)) for d in status.details]
    return ConnectError(code, exc.details() or "", details)


def _metadata(ctx: Context) -> tuple[tuple[str, str], ...]:
    """The call's metadata for the gRPC port: the caller's credentials, nothing else."""
    authorization = ctx.request_headers.get("authorization")
    return (("authorization", authorization),) if authorization else ()


def _timeout(ctx: Context) -> float | None:
    """What is left of the caller's deadline (``connect-timeout-ms``), in seconds."""
    ms = ctx.timeout_ms
    return None if ms is None else max(ms, 0.0) / 1000


class Forwarder:
    """One channel to the server's gRPC port, and a forwarding handler per RPC shape."""

    def __init__(self, target: str, max_message_bytes: int) -> None:
        self.channel = grpc.aio.insecure_channel(
            target,
            options=[
                ("grpc.max_receive_message_length", max_message_bytes),
                ("grpc.max_send_message_length", max_message_bytes),
            ],
        )

    async def close(self) -> None:
        """Close the channel: calls still in flight end with CANCELLED."""
        await self.channel.close(None)

    def endpoint(self, service: str, method: MethodDescriptor) -> Endpoint[bytes, bytes]:
        """The Connect endpoint that forwards ``method`` of ``service``."""
        path = f"/{service}/{method.name}"
        shape = (method.client_streaming, method.server_streaming)
        info = MethodInfo(
            name=method.name,
            service_name=service,
            input=bytes,
            output=bytes,
            idempotency_level=IdempotencyLevel.UNKNOWN,  # POST only: no call is made by a mere link
            stream_type={
                (False, False): StreamType.UNARY,
                (False, True): StreamType.SERVER_STREAM,
                (True, False): StreamType.CLIENT_STREAM,
                (True, True): StreamType.BIDI_STREAM,
            }[shape],
        )
        channel = self.channel
        if shape == (False, False):
            unary_unary: grpc.aio.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(path)

            async def unary(request: bytes, ctx: Context) -> bytes:
                return await _answer(unary_unary(request, metadata=_metadata(ctx), timeout=_timeout(ctx)))

            return Endpoint.unary(info, unary)
        if shape == (False, True):
            unary_stream: grpc.aio.UnaryStreamMultiCallable[bytes, bytes] = channel.unary_stream(path)

            async def server_stream(request: bytes, ctx: Context) -> AsyncIterator[bytes]:
                call = unary_stream(request, metadata=_metadata(ctx), timeout=_timeout(ctx))
                async for response in _relay(call):
                    yield response

            return Endpoint.server_stream(info, server_stream)
        if shape == (True, False):
            stream_unary: grpc.aio.StreamUnaryMultiCallable[bytes, bytes] = channel.stream_unary(path)

            async def client_stream(requests: AsyncIterator[bytes], ctx: Context) -> bytes:
                return await _answer(stream_unary(requests, metadata=_metadata(ctx), timeout=_timeout(ctx)))

            return Endpoint.client_stream(info, client_stream)
        stream_stream: grpc.aio.StreamStreamMultiCallable[bytes, bytes] = channel.stream_stream(path)

        async def bidi_stream(requests: AsyncIterator[bytes], ctx: Context) -> AsyncIterator[bytes]:
            call = stream_stream(requests, metadata=_metadata(ctx), timeout=_timeout(ctx))
            async for response in _relay(call):
                yield response

        return Endpoint.bidi_stream(info, bidi_stream)

    def endpoints(self) -> dict[str, Endpoint[bytes, bytes]]:
        """Every RPC of :data:`SERVICES`, by its URL path (``/sowdb.v1.SowService/ListTopics``)."""
        return {
            f"/{service.full_name}/{method.name}": self.endpoint(service.full_name, method)
            for service in SERVICES
            for method in service.methods
        }


async def _answer(call: Awaitable[bytes]) -> bytes:
    """A unary call's response, or its status as a Connect error."""
    try:
        return await call
    except grpc.aio.AioRpcError as exc:
        raise connect_error(exc) from None


async def _relay(call: Any) -> AsyncIterator[bytes]:
    """A streaming call's responses; the call is cancelled when the browser goes (the
    subscription behind it ends with it, as when a gRPC client disconnects)."""
    try:
        async for response in call:
            yield response
    except grpc.aio.AioRpcError as exc:
        raise connect_error(exc) from None
    finally:
        call.cancel()


class Gateway(ConnectASGIApplication[Forwarder]):
    """The ASGI application of every forwarded RPC (Connect, gRPC-web and gRPC protocols)."""

    def __init__(self, forwarder: Forwarder, *, max_message_bytes: int) -> None:
        endpoints: Callable[[Forwarder], Mapping[str, Endpoint[Any, Any]]] = Forwarder.endpoints
        super().__init__(
            service=forwarder,
            endpoints=endpoints,  # type: ignore[arg-type]  # its Endpoint is a closed union of ours
            codecs=[PassThroughCodec()],
            read_max_bytes=max_message_bytes,
        )

    @property
    def path(self) -> str:
        return "/"
