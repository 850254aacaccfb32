"""The data service from Spark's Python processes: one gRPC channel per server (address, token,
TLS) per process, opened on first use inside ``read``/``write``/planning and cached in this module —
never kept on a reader or writer object, which Spark pickles (a channel does not pickle, and a
forked worker must not inherit one).

Every call goes through :func:`call`, which turns a refusal into the SDK's typed error
(:mod:`sowdb_client.errors`) carrying the server's message. A token travels on every call as
the ``authorization`` metadata (SPEC §11), added by the channel's interceptor so that no call
site can forget it; TLS is the SDK's (:func:`sowdb_client.calls.open_channel`).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeVar

import grpc

from sowdb_api.v1 import data_pb2_grpc
from sowdb_client.calls import open_channel, token_metadata
from sowdb_client.errors import SowdbError, from_rpc_error
from sowdb_client.types import Tls

MAX_MESSAGE_BYTES = 64 * 1024 * 1024
_lock = threading.Lock()
_channels: dict[tuple[int, Server], grpc.Channel] = {}

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Server:
    """A server and how to reach it: what the tasks need, pickled with each partition.

    Attributes:
        address: HOST:PORT.
        token: the bearer token of every call ("" for none).
        tls: the TLS settings (None: plaintext); certificates are PEM bytes read on the driver,
            so executors on other machines need no copy of the files.
    """

    address: str
    token: str = ""
    tls: Tls | None = None


class _Details(NamedTuple):
    """A call's details with the token added (grpc's ``ClientCallDetails`` is an interface)."""

    method: str
    timeout: float | None
    metadata: Any
    credentials: Any
    wait_for_ready: bool | None
    compression: Any


class _Token(
    grpc.UnaryUnaryClientInterceptor,
    grpc.UnaryStreamClientInterceptor,
    grpc.StreamUnaryClientInterceptor,
    grpc.StreamStreamClientInterceptor,
):
    """Adds ``authorization: Bearer <token>`` to every call of a channel."""

    def __init__(self, token: str) -> None:
        self.metadata = token_metadata(token) or ()

    def _details(self, details: Any) -> _Details:
        return _Details(
            details.method,
            details.timeout,
            (*(details.metadata or ()), *self.metadata),
            details.credentials,
            details.wait_for_ready,
            details.compression,
        )

    def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        return continuation(self._details(details), request)

    def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
        return continuation(self._details(details), request)

    def intercept_stream_unary(self, continuation: Any, details: Any, requests: Any) -> Any:
        return continuation(self._details(details), requests)

    def intercept_stream_stream(self, continuation: Any, details: Any, requests: Any) -> Any:
        return continuation(self._details(details), requests)


def stub(server: Server) -> data_pb2_grpc.DataServiceStub:
    """The data service of ``server`` over this process's channel to it (opened on first use)."""
    key = (os.getpid(), server)  # a forked child opens its own
    with _lock:
        channel = _channels.get(key)
        if channel is None:
            channel = open_channel(
                grpc.insecure_channel, grpc.secure_channel, server.address, server.tls, MAX_MESSAGE_BYTES
            )
            if server.token:
                channel = grpc.intercept_channel(channel, _Token(server.token))
            _channels[key] = channel
    return data_pb2_grpc.DataServiceStub(channel)


def call(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """A unary call, its refusal raised as the SDK's typed :class:`SowdbError`."""
    try:
        return fn(*args, **kwargs)
    except grpc.RpcError as exc:
        raise from_rpc_error(exc) from None


def stream(responses: Iterator[T]) -> Iterator[T]:
    """A server stream, its refusal raised as the SDK's typed :class:`SowdbError`."""
    try:
        yield from responses
    except grpc.RpcError as exc:
        raise from_rpc_error(exc) from None


class SowdbSparkError(Exception):
    """A sowdb data source cannot do what was asked; the message says what and how to fix it."""


def explain(exc: SowdbError, what: str) -> SowdbSparkError:
    """A one-line error for Spark's output: what failed, the server's code and message."""
    field = f" (option {exc.field})" if exc.field else ""
    return SowdbSparkError(f"{what}: {exc.code.name}: {exc.message}{field}")
