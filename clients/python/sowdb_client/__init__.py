"""The sowdb Python SDK: sync (:class:`Client`) and asyncio (:class:`AsyncClient`) clients."""

from sowdb_client.aio import AsyncClient, AsyncSowResult, AsyncSubscriptionStream
from sowdb_client.client import Client, SowResult, SubscriptionStream
from sowdb_client.errors import (
    DataLossError,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    OutOfRangeError,
    PermissionDeniedError,
    PublishError,
    ResourceExhaustedError,
    SowdbError,
    UnauthenticatedError,
    UnavailableError,
    UnimplementedError,
)
from sowdb_client.events import Event, Mirror
from sowdb_client.options import (
    DEFAULT_BATCH_SIZE,
    DeleteOptions,
    LiveOptions,
    PublishOptions,
    QueryOptions,
    ReplaceOptions,
    SowAndSubscribeOptions,
    SubscribeOptions,
)
from sowdb_client.types import Message, PublishAck, Record, Tls, records_of

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "AsyncClient",
    "AsyncSowResult",
    "AsyncSubscriptionStream",
    "Client",
    "DataLossError",
    "DeleteOptions",
    "Event",
    "FailedPreconditionError",
    "InvalidArgumentError",
    "LiveOptions",
    "Message",
    "Mirror",
    "NotFoundError",
    "OutOfRangeError",
    "PermissionDeniedError",
    "PublishAck",
    "PublishError",
    "PublishOptions",
    "QueryOptions",
    "Record",
    "ReplaceOptions",
    "ResourceExhaustedError",
    "SowAndSubscribeOptions",
    "SowResult",
    "SowdbError",
    "SubscribeOptions",
    "SubscriptionStream",
    "Tls",
    "UnauthenticatedError",
    "UnavailableError",
    "UnimplementedError",
    "records_of",
]
