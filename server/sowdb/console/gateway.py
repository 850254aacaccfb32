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

Binary messages cross the gateway as bytes, never decoded: the ``proto`` codec below hands the
protobuf encoding through in both directions. The ``json`` codec (``application/json``, and
``application/connect+json`` for streams: SPEC §12's ``curl``) turns the request's JSON into that
encoding and the response's encoding into JSON, with ``json_format`` and the message classes
found from the services' descriptors. So the endpoints are made from the descriptors alone and
a new RPC in ``proto/`` is served here, in both formats, with no change.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import grpc
from connectrpc.code import Code
from connectrpc.errors import ConnectError, ErrorDetail
from connectrpc.method import IdempotencyLevel, MethodInfo, StreamType
from connectrpc.request import RequestContext
from connectrpc.server import ConnectASGIApplication, Endpoint
from google.protobuf import json_format
from google.protobuf.descriptor import MethodDescriptor, ServiceDescriptor
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass
from google.rpc import status_pb2
from protobuf.wkt import Any as AnyDetail

from sowdb.api.service import ADMIN_SERVICE, DATA_SERVICE, SERVICE

SERVICES: tuple[ServiceDescriptor, ...] = (SERVICE, ADMIN_SERVICE, DATA_SERVICE)
"""What the gateway serves: the server's own services (health and reflection stay gRPC-only)."""

_DETAILS_KEY = "grpc-status-details-bin"


@dataclass(frozen=True, slots=True)
class Reply:
    """A response of the gRPC port: its protobuf encoding, and the type the JSON codec reads it as."""

    data: bytes
    message_class: type[Message]


Context = RequestContext[bytes, Reply]


class PassThroughCodec:
    """The ``proto`` codec of the gateway: a message is its protobuf encoding, as bytes.

    The gRPC port decodes (and validates) every request anyway; decoding it here too would only
    cost time and risk the two disagreeing.
    """

    def name(self) -> str:
        return "proto"

    def encode(self, message: Reply) -> bytes:
        return message.data

    def decode(self, data: bytes | bytearray, message_class: type[Message]) -> bytes:
        return bytes(data)


class JsonCodec:
    """The ``json`` codec: the Protobuf JSON mapping (``json_format``) of the same messages.

    A request is parsed into its message class and handed on encoded, so the gRPC port sees what
    a binary client would have sent. A field the message does not have is refused (the library
    answers ``INVALID_ARGUMENT`` naming it) rather than ignored: a typo in a hand-written filter
    or topic field must not silently query something else. Responses are compact JSON, with
    the proto3 JSON names (``lowerCamelCase``), as every Connect server writes them.
    """

    def name(self) -> str:
        return "json"

    def encode(self, message: Reply) -> bytes:
        parsed = message.message_class.FromString(message.data)
        return json.dumps(json_format.MessageToDict(parsed), separators=(",", ":"), ensure_ascii=False).encode()

    def decode(self, data: bytes | bytearray, message_class: type[Message]) -> bytes:
        """``json_format.Parse``, refusing a request of more than :data:`MAX_JSON_VALUES`
        values before converting it: the conversion costs some 8 µs a value on the event loop,
        and a 4.7 MB ``SowDelete`` of 500,000 SowKeys froze every other call for 5.3 s (issue
        37, finding 6). ``json.loads`` itself is C, 40 ms for such a body."""
        try:
            tree = json.loads(bytes(data).decode("utf-8") or "{}", object_pairs_hook=_DUPLICATES)
        except Exception as e:
            raise json_format.ParseError(f"Failed to load JSON: {e}.") from e
        if _more_values_than(tree, MAX_JSON_VALUES):
            raise json_format.ParseError(
                f"the JSON request holds more than {MAX_JSON_VALUES} values: send it in parts, or in the "
                "binary format (application/proto), which has no such bound"
            )
        try:
            return json_format.ParseDict(tree, message_class()).SerializeToString()
        except json_format.ParseError:
            raise
        except Exception as e:
            raise json_format.ParseError(f"Failed to parse JSON: {type(e).__name__}: {e}.") from e


MAX_JSON_VALUES = 10_000
"""The most values (each array element and object member, nested ones included) a JSON request
may hold; at about 8 µs each, converting them stays under a tenth of a second."""

_DUPLICATES: Any = getattr(json_format, "_DuplicateChecker")  # noqa: B009  # what Parse refuses a repeated key with


def _more_values_than(tree: Any, limit: int) -> bool:
    """Whether the decoded JSON ``tree`` holds more than ``limit`` values (stops counting there)."""
    stack, seen = [tree], 0
    while stack:
        x = stack.pop()
        seen += 1
        if seen > limit:
            return True
        if type(x) is dict:
            stack.extend(x.values())
        elif type(x) is list:
            stack.extend(x)
    return False


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

    def endpoint(self, service: str, method: MethodDescriptor) -> Endpoint[bytes, Reply]:
        """The Connect endpoint that forwards ``method`` of ``service``."""
        path = f"/{service}/{method.name}"
        shape = (method.client_streaming, method.server_streaming)
        request_class: Any = GetMessageClass(method.input_type)  # what the JSON codec parses into
        response_class = GetMessageClass(method.output_type)
        info: MethodInfo[bytes, Reply] = MethodInfo(
            name=method.name,
            service_name=service,
            input=request_class,
            output=Reply,
            idempotency_level=IdempotencyLevel.UNKNOWN,  # POST only: no call is made by a mere link
            stream_type={
                (False, False): StreamType.UNARY,
                (False, True): StreamType.SERVER_STREAM,
                (True, False): StreamType.CLIENT_STREAM,
                (True, True): StreamType.BIDI_STREAM,
            }[shape],
        )

        def reply(data: bytes) -> Reply:
            return Reply(data, response_class)

        channel = self.channel
        if shape == (False, False):
            unary_unary: grpc.aio.UnaryUnaryMultiCallable[bytes, Reply] = channel.unary_unary(
                path, response_deserializer=reply
            )

            async def unary(request: bytes, ctx: Context) -> Reply:
                return await _answer(unary_unary(request, metadata=_metadata(ctx), timeout=_timeout(ctx)))

            return Endpoint.unary(info, unary)
        if shape == (False, True):
            unary_stream: grpc.aio.UnaryStreamMultiCallable[bytes, Reply] = channel.unary_stream(
                path, response_deserializer=reply
            )

            async def server_stream(request: bytes, ctx: Context) -> AsyncIterator[Reply]:
                call = unary_stream(request, metadata=_metadata(ctx), timeout=_timeout(ctx))
                async for response in _relay(call):
                    yield response

            return Endpoint.server_stream(info, server_stream)
        if shape == (True, False):
            stream_unary: grpc.aio.StreamUnaryMultiCallable[bytes, Reply] = channel.stream_unary(
                path, response_deserializer=reply
            )

            async def client_stream(requests: AsyncIterator[bytes], ctx: Context) -> Reply:
                return await _answer(stream_unary(requests, metadata=_metadata(ctx), timeout=_timeout(ctx)))

            return Endpoint.client_stream(info, client_stream)
        stream_stream: grpc.aio.StreamStreamMultiCallable[bytes, Reply] = channel.stream_stream(
            path, response_deserializer=reply
        )

        async def bidi_stream(requests: AsyncIterator[bytes], ctx: Context) -> AsyncIterator[Reply]:
            call = stream_stream(requests, metadata=_metadata(ctx), timeout=_timeout(ctx))
            async for response in _relay(call):
                yield response

        return Endpoint.bidi_stream(info, bidi_stream)

    def endpoints(self) -> dict[str, Endpoint[bytes, Reply]]:
        """Every RPC of :data:`SERVICES`, by its URL path (``/sowdb.v1.SowService/ListTopics``)."""
        return {
            f"/{service.full_name}/{method.name}": self.endpoint(service.full_name, method)
            for service in SERVICES
            for method in service.methods
        }


async def _answer(call: Awaitable[Reply]) -> Reply:
    """A unary call's response, or its status as a Connect error."""
    try:
        return await call
    except grpc.aio.AioRpcError as exc:
        raise connect_error(exc) from None


async def _relay(call: Any) -> AsyncIterator[Reply]:
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
            codecs=[PassThroughCodec(), JsonCodec()],  # what 415's Accept-Post names
            read_max_bytes=max_message_bytes,
        )

    @property
    def path(self) -> str:
        return "/"
