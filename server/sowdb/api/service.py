"""Registers the services (``sowdb.v1.SowService``, ``AdminService``, ``DataService``) with the gRPC server.

Like the generated ``add_SowServiceServicer_to_server``, but with a response serializer that
passes ``bytes`` through, so a handler may yield either a response message or its
already-encoded bytes (:mod:`sowdb.api.wire`) without re-serializing every response.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import grpc
from google.protobuf.message import DecodeError, Message

from sowdb.errors import InvalidArgument
from sowdb_api.v1 import admin_pb2, data_pb2, sow_pb2

SERVICE = sow_pb2.DESCRIPTOR.services_by_name["SowService"]
SERVICE_NAME: str = SERVICE.full_name
ADMIN_SERVICE = admin_pb2.DESCRIPTOR.services_by_name["AdminService"]
ADMIN_SERVICE_NAME: str = ADMIN_SERVICE.full_name
DATA_SERVICE = data_pb2.DESCRIPTOR.services_by_name["DataService"]
DATA_SERVICE_NAME: str = DATA_SERVICE.full_name

_KINDS = {
    (False, False): grpc.unary_unary_rpc_method_handler,
    (False, True): grpc.unary_stream_rpc_method_handler,
    (True, False): grpc.stream_unary_rpc_method_handler,
    (True, True): grpc.stream_stream_rpc_method_handler,
}


class Undecodable:
    """A request that is not a valid message of its type (a string field that is not UTF-8, a
    truncated field). gRPC would answer it with a bare INTERNAL or UNKNOWN, so the deserializer
    hands the handlers this instead, and they refuse it as malformed (:meth:`error`)."""

    def __init__(self, type_name: str, reason: str) -> None:
        self.type_name = type_name
        self.reason = reason

    def error(self) -> InvalidArgument:
        return InvalidArgument(
            f"the request is not a valid {self.type_name}: {self.reason} (protobuf string fields must be UTF-8)"
        )


def _deserializer(cls: Any) -> Callable[[bytes], Any]:
    def parse(data: bytes) -> Any:
        try:
            return cls.FromString(data)
        except DecodeError as exc:
            return Undecodable(cls.DESCRIPTOR.full_name, str(exc).rsplit(": ", 1)[-1][:200])

    return parse


def _serialize(response: Message | bytes) -> bytes:
    return response if type(response) is bytes else response.SerializeToString()  # type: ignore[union-attr]


class Registrar(Protocol):
    """What takes services: a gRPC server, or the :class:`~sowdb.api.starting.StartupGate`."""

    def add_generic_rpc_handlers(self, handlers: Sequence[grpc.GenericRpcHandler], /) -> None: ...


def method_handler(behaviour: Any, request_cls: Any, *, streaming: bool) -> grpc.RpcMethodHandler[Any, Any]:
    """One method (server-streaming or unary) handled as :func:`add_service` handles them (its
    responses may be encoded bytes; an undecodable request reaches the handler as
    :class:`Undecodable`, which it refuses INVALID_ARGUMENT)."""
    return _KINDS[(False, streaming)](
        behaviour, request_deserializer=_deserializer(request_cls), response_serializer=_serialize
    )


def add_service(servicer: Any, server: Registrar, service: Any = SERVICE, messages: Any = sow_pb2) -> None:
    """Register every method of ``service``, each handled by the servicer's method of its name
    (``messages``: the generated module that holds its request types)."""
    handlers = {}
    for method in service.methods:
        request_cls: Any = getattr(messages, method.input_type.name)
        handlers[method.name] = _KINDS[(method.client_streaming, method.server_streaming)](
            getattr(servicer, method.name),
            request_deserializer=_deserializer(request_cls),
            response_serializer=_serialize,
        )
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service.full_name, handlers),))
