"""The SDK's value types and the request builders shared by the sync and asyncio clients."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from operator import attrgetter
from typing import Any, NamedTuple

from google.protobuf import duration_pb2

from sowdb_api.v1 import sow_pb2 as pb

DEFAULT_TARGET = "127.0.0.1:9007"
DEFAULT_BATCH_SIZE = 10
"""Records per query response when the caller does not say (Q-6: the SDK default is 10)."""
DEFAULT_PUBLISH_BATCH = 100
DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024


class Record(NamedTuple):
    """A record as received (a named tuple: cheap to build for every record of a result).

    Attributes:
        timestamp_us: microseconds since the epoch; :attr:`timestamp` as a datetime.
        data: the JSON document as bytes; :meth:`json` decodes it.
    """

    topic: str
    sow_key: str
    bookmark: int
    timestamp_us: int
    data: bytes

    @property
    def timestamp(self) -> datetime:
        """When the server applied the change that produced this version (UTC)."""
        return datetime.fromtimestamp(self.timestamp_us // 1_000_000, UTC).replace(
            microsecond=self.timestamp_us % 1_000_000
        )

    def json(self) -> Any:
        """The decoded document."""
        return json.loads(self.data)

    @classmethod
    def from_pb(cls, r: pb.Record) -> Record:
        return records_from_pb((r,))[0]


_RECORD_FIELDS = attrgetter("topic", "sow_key", "bookmark", "timestamp", "data")


def records_from_pb(records: Iterable[pb.Record]) -> list[Record]:
    """Records from their protobuf messages: every record of a result passes here, so the
    fields are read by one C call per record and the tuples are made directly (the named
    tuple's own constructor is a Python call per record)."""
    out: list[Record] = []
    append = out.append
    new = tuple.__new__
    for topic, sow_key, bookmark, ts, data in map(_RECORD_FIELDS, records):
        append(new(Record, (topic, sow_key, bookmark, ts.seconds * 1_000_000 + ts.nanos // 1000, data)))
    return out


@dataclass(frozen=True, slots=True)
class Message:
    """A message to publish, when it needs more than its data.

    Attributes:
        data: a JSON document (bytes or str) or a mapping to encode.
        sow_key: the SowKey, for topics whose publishers supply it.
        expiration: time to live in seconds; None keeps the topic's default.
    """

    data: bytes | str | Mapping[str, Any]
    sow_key: str = ""
    expiration: float | None = None


PublishItem = bytes | str | Mapping[str, Any] | Message


@dataclass(frozen=True, slots=True)
class PublishAck:
    """The outcome of a ``publish`` call: the bookmarks of its first and last message."""

    count: int
    first_bookmark: int
    last_bookmark: int


def encode_data(data: bytes | str | Mapping[str, Any]) -> bytes:
    if isinstance(data, bytes):
        return data
    if isinstance(data, str):
        return data.encode()
    return json.dumps(data, separators=(",", ":")).encode()


def publish_message(item: PublishItem) -> pb.PublishMessage:
    if not isinstance(item, Message):
        return pb.PublishMessage(data=encode_data(item))
    msg = pb.PublishMessage(data=encode_data(item.data), sow_key=item.sow_key)
    if item.expiration is not None:
        d = duration_pb2.Duration()
        d.FromNanoseconds(round(item.expiration * 1e9))
        msg.expiration.CopyFrom(d)
    return msg


def sow_request(
    topic: str,
    *,
    filter: str = "",
    order_by: str = "",
    top_n: int | None = None,
    skip_n: int | None = None,
    batch_size: int | None = DEFAULT_BATCH_SIZE,
    sow_keys: Sequence[str] = (),
    query_id: str = "",
    bookmark: str = "",
    grouping: Sequence[str] = (),
    projection: Sequence[str] = (),
    select: str = "",
) -> pb.SowRequest:
    req = pb.SowRequest(
        topic=topic,
        filter=filter,
        order_by=order_by,
        sow_keys=list(sow_keys),
        query_id=query_id,
        bookmark=bookmark,
        grouping=list(grouping),
        projection=list(projection),
        select=select,
    )
    if top_n is not None:
        req.top_n = top_n
    if skip_n is not None:
        req.skip_n = skip_n
    if batch_size is not None:
        req.batch_size = batch_size
    return req


def sow_delete_request(
    topic: str, *, filter: str = "", sow_keys: Sequence[str] = (), data: bytes | str | Mapping[str, Any] | None = None
) -> pb.SowDeleteRequest:
    return pb.SowDeleteRequest(
        topic=topic, filter=filter, sow_keys=list(sow_keys), data=encode_data(data) if data is not None else b""
    )


def channel_options(max_message_bytes: int) -> list[tuple[str, int]]:
    return [
        ("grpc.max_receive_message_length", max_message_bytes),
        ("grpc.max_send_message_length", max_message_bytes),
    ]


def subscription_options(
    *, oof: bool, delta: bool, no_empties: bool, conflation: float | None = None, conflation_key: Sequence[str] = ()
) -> pb.SubscriptionOptions:
    opts = pb.SubscriptionOptions(
        oof=oof, delta=delta, no_empties=no_empties, send_keys=True, conflation_key=list(conflation_key)
    )
    if conflation:
        opts.conflation.FromNanoseconds(round(conflation * 1e9))
    return opts


def subscribe_request(
    topic: str,
    *,
    filter: str,
    oof: bool,
    delta: bool,
    no_empties: bool,
    bookmark: str,
    sub_id: str,
    conflation: float | None = None,
    conflation_key: Sequence[str] = (),
) -> pb.SubscribeRequest:
    options = subscription_options(
        oof=oof, delta=delta, no_empties=no_empties, conflation=conflation, conflation_key=conflation_key
    )
    return pb.SubscribeRequest(topic=topic, filter=filter, bookmark=bookmark, sub_id=sub_id, options=options)


def sow_and_subscribe_request(
    topic: str,
    *,
    query: dict[str, Any],
    oof: bool,
    delta: bool,
    no_empties: bool,
    conflation: float | None,
    conflation_key: Sequence[str],
    sub_id: str,
) -> pb.SowAndSubscribeRequest:
    options = subscription_options(
        oof=oof, delta=delta, no_empties=no_empties, conflation=conflation, conflation_key=conflation_key
    )
    return pb.SowAndSubscribeRequest(query=sow_request(topic, **query), sub_id=sub_id, options=options)


def replace_request(
    sub_id: str,
    *,
    filter: str,
    oof: bool,
    delta: bool,
    no_empties: bool,
    order_by: str = "",
    top_n: int | None = None,
    skip_n: int | None = None,
) -> pb.ReplaceSubscriptionRequest:
    req = pb.ReplaceSubscriptionRequest(
        sub_id=sub_id,
        filter=filter,
        options=subscription_options(oof=oof, delta=delta, no_empties=no_empties),
        order_by=order_by,
    )
    if top_n is not None:
        req.top_n = top_n
    if skip_n is not None:
        req.skip_n = skip_n
    return req
