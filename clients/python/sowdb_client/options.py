"""The one definition of every call's options, shared by the sync and the asyncio client, and
the requests built from them.

Each call takes its options as keyword arguments typed by a ``TypedDict`` (``**options:
Unpack[QueryOptions]``), so editors and mypy know every name and type, the two clients cannot
drift apart (``tests/client/test_surface.py`` checks it), and the defaults live here once. A
keyword that is not an option of the call raises ``TypeError`` as a misspelt argument would.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

from google.protobuf import duration_pb2

from sowdb_api.v1 import sow_pb2 as pb
from sowdb_client.types import encode_data

DEFAULT_BATCH_SIZE = 10
"""Records per query response when the caller does not say (Q-6: the SDK default is 10)."""
DEFAULT_PUBLISH_BATCH = 100
"""Messages per atomic publish request."""


class QueryOptions(TypedDict, total=False):
    """A SOW query (Q-1 … Q-9): what ``sow`` takes, and the query part of ``sow_and_subscribe``.

    Attributes:
        filter: a filter expression; empty matches every record.
        order_by: ``/field [ASC|DESC], …``.
        top_n: return at most this many records.
        skip_n: skip this many first (needs ``top_n``; with it, ``sow_and_subscribe`` is a
            live page, P-1).
        batch_size: records per response, 1..10000 (default 10).
        sow_keys: only these records (an empty list is refused: it names none).
        query_id: echoed in ``group_begin`` and ``group_end``.
        bookmark: the state as of this point: a sequence number, a time, ``0`` or ``now``.
        grouping: grouping expressions of an aggregated query (with ``projection``).
        projection: projection expressions of an aggregated query (with ``grouping``).
        select: the fields to return, ``[-/,+/a,+/b/c]``.
    """

    filter: str
    order_by: str
    top_n: int | None
    skip_n: int | None
    batch_size: int
    sow_keys: Sequence[str]
    query_id: str
    bookmark: str
    grouping: Sequence[str]
    projection: Sequence[str]
    select: str


class LiveOptions(TypedDict, total=False):
    """How a subscription delivers (O-1, D-2, C-1).

    Attributes:
        oof: an oof when a received record leaves the result set.
        delta: only the key fields and the fields that changed of records the subscriber holds.
        no_empties: with ``delta``, no delivery in which no data field changed.
        conflation: seconds; at most one delivery per key per interval, the latest state.
        conflation_key: paths of the conflation key (default: the SowKey).
    """

    oof: bool
    delta: bool
    no_empties: bool
    conflation: float | None
    conflation_key: Sequence[str]


class SubscribeOptions(LiveOptions, total=False):
    """``subscribe``: a filter, a bookmark to replay the journal from (H-4), a sub_id."""

    filter: str
    bookmark: str
    sub_id: str


class SowAndSubscribeOptions(QueryOptions, LiveOptions, total=False):
    """``sow_and_subscribe``: the query and how its live part delivers, and a sub_id."""

    sub_id: str


class ReplaceOptions(LiveOptions, total=False):
    """``replace_subscription`` (R-1): the new filter and options; a page (P-1) takes its
    ``top_n``, ``skip_n`` and ``order_by`` again."""

    filter: str
    order_by: str
    top_n: int | None
    skip_n: int | None


class DeleteOptions(TypedDict, total=False):
    """``sow_delete``: exactly one of a filter, SowKeys, or a document whose key fields name the
    record."""

    filter: str
    sow_keys: Sequence[str]
    data: bytes | str | Mapping[str, Any] | None


class PublishOptions(TypedDict, total=False):
    """``publish``.

    Attributes:
        delta: merge each message into the record it names (D-1).
        batch_size: messages per atomic request (default 100).
        producer_id: J-4, an idempotent producer: the server applies each request of this
            producer only once, and acknowledges one sent again as a duplicate.
        producer_seq: with ``producer_id``, the sequence number of the call's first request
            (default 1); request *i* of the call (0-based) carries ``producer_seq + i``, so a call
            of *k* requests uses ``producer_seq .. producer_seq + k - 1`` and the producer's next
            call starts at ``producer_seq + k``. Retrying a call with the same messages,
            ``batch_size`` and ``producer_seq`` sends the same requests with the same numbers:
            those applied before are acknowledged as duplicates, the rest are applied.
    """

    delta: bool
    batch_size: int
    producer_id: str
    producer_seq: int


def checked(options: Mapping[str, Any], allowed: type, call: str) -> Mapping[str, Any]:
    """``options`` after checking that each is an option of ``call``.

    Raises:
        TypeError: a keyword that ``allowed`` (a TypedDict) does not define.
    """
    names = allowed.__annotations__.keys() | {
        k for base in allowed.__mro__ for k in getattr(base, "__annotations__", {})
    }
    for name in options:
        if name not in names:
            raise TypeError(f"{call}() got an unexpected keyword argument {name!r}")
    return options


def _duration(seconds: float) -> duration_pb2.Duration:
    d = duration_pb2.Duration()
    d.FromNanoseconds(round(seconds * 1e9))
    return d


def _sow_keys(options: Mapping[str, Any]) -> list[str]:
    """``sow_keys`` as given, refused when it names no key: one rule for a query and a delete
    (issue 36). The protocol cannot tell an empty list from none, so the server would take an
    empty list as no restriction in a query (every record) and as no selector in a delete (a
    refusal); a caller that built an empty list meant neither.

    Raises:
        ValueError: ``sow_keys`` is given and empty, or is a string (a list is meant).
    """
    keys = options.get("sow_keys")
    if keys is None:
        return []
    if isinstance(keys, str | bytes):
        raise ValueError(f"sow_keys takes a list of SowKeys, e.g. [{keys!r}], not a string")
    if not keys:
        raise ValueError("sow_keys is empty: it names no record; leave it out to take every record")
    return list(keys)


def sow_request(topic: str, options: Mapping[str, Any]) -> pb.SowRequest:
    """The query of ``sow`` or of ``sow_and_subscribe`` (the options of :class:`QueryOptions`
    among ``options``)."""
    req = pb.SowRequest(
        topic=topic,
        filter=options.get("filter", ""),
        order_by=options.get("order_by", ""),
        sow_keys=_sow_keys(options),
        query_id=options.get("query_id", ""),
        bookmark=options.get("bookmark", ""),
        grouping=list(options.get("grouping", ())),
        projection=list(options.get("projection", ())),
        select=options.get("select", ""),
        batch_size=options.get("batch_size", DEFAULT_BATCH_SIZE),
        record_layout=pb.RECORD_LAYOUT_PACKED,  # columns: a few C calls a batch to decode (issue 39)
    )
    for name in ("top_n", "skip_n"):
        value = options.get(name)
        if value is not None:
            setattr(req, name, value)
    return req


def live_options(options: Mapping[str, Any]) -> pb.SubscriptionOptions:
    """The :class:`LiveOptions` among ``options``, as the API's ``SubscriptionOptions``."""
    out = pb.SubscriptionOptions(
        oof=options.get("oof", False),
        delta=options.get("delta", False),
        no_empties=options.get("no_empties", False),
        send_keys=True,
        conflation_key=list(options.get("conflation_key", ())),
    )
    conflation = options.get("conflation")
    if conflation:
        out.conflation.CopyFrom(_duration(conflation))
    return out


def subscribe_request(topic: str, options: Mapping[str, Any]) -> pb.SubscribeRequest:
    return pb.SubscribeRequest(
        topic=topic,
        filter=options.get("filter", ""),
        bookmark=options.get("bookmark", ""),
        sub_id=options.get("sub_id", ""),
        options=live_options(options),
    )


def sow_and_subscribe_request(topic: str, options: Mapping[str, Any]) -> pb.SowAndSubscribeRequest:
    return pb.SowAndSubscribeRequest(
        query=sow_request(topic, options), options=live_options(options), sub_id=options.get("sub_id", "")
    )


def replace_request(sub_id: str, options: Mapping[str, Any]) -> pb.ReplaceSubscriptionRequest:
    req = pb.ReplaceSubscriptionRequest(
        sub_id=sub_id,
        filter=options.get("filter", ""),
        order_by=options.get("order_by", ""),
        options=live_options(options),
    )
    for name in ("top_n", "skip_n"):
        value = options.get(name)
        if value is not None:
            setattr(req, name, value)
    return req


def sow_delete_request(topic: str, options: Mapping[str, Any]) -> pb.SowDeleteRequest:
    data = options.get("data")
    return pb.SowDeleteRequest(
        topic=topic,
        filter=options.get("filter", ""),
        sow_keys=_sow_keys(options),
        data=encode_data(data) if data is not None else b"",
    )
