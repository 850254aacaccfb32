"""The sowdb Python SDK: sync (:class:`Client`) and asyncio (:class:`AsyncClient`) clients."""

from sowdb_client.aio import AsyncClient, AsyncSowResult, AsyncSubscriptionStream
from sowdb_client.client import Client, SowResult, SubscriptionStream
from sowdb_client.errors import (
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    OutOfRangeError,
    PublishError,
    ResourceExhaustedError,
    SowdbError,
    UnavailableError,
    UnimplementedError,
)
from sowdb_client.events import Event, Mirror
from sowdb_client.types import DEFAULT_BATCH_SIZE, Message, PublishAck, Record

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "AsyncClient",
    "AsyncSowResult",
    "AsyncSubscriptionStream",
    "Client",
    "Event",
    "FailedPreconditionError",
    "InvalidArgumentError",
    "Message",
    "Mirror",
    "NotFoundError",
    "OutOfRangeError",
    "PublishAck",
    "PublishError",
    "Record",
    "ResourceExhaustedError",
    "SowResult",
    "SowdbError",
    "SubscriptionStream",
    "UnavailableError",
    "UnimplementedError",
]
