"""The data service from Spark's Python processes: one gRPC channel per server address per
process, opened on first use inside ``read``/``write``/planning and cached in this module —
never kept on a reader or writer object, which Spark pickles (a channel does not pickle, and a
forked worker must not inherit one).

Every call goes through :func:`call`, which turns a refusal into the SDK's typed error
(:mod:`sowdb_client.errors`) carrying the server's message.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import grpc

from sowdb_api.v1 import data_pb2_grpc
from sowdb_client.errors import SowdbError, from_rpc_error

MAX_MESSAGE_BYTES = 64 * 1024 * 1024
_lock = threading.Lock()
_channels: dict[tuple[int, str], grpc.Channel] = {}

T = TypeVar("T")


def stub(server: str) -> data_pb2_grpc.DataServiceStub:
    """The data service of ``server`` over this process's channel to it (opened on first use)."""
    key = (os.getpid(), server)  # a forked child opens its own
    with _lock:
        channel = _channels.get(key)
        if channel is None:
            channel = _channels[key] = grpc.insecure_channel(
                server,
                options=[
                    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                ],
            )
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
