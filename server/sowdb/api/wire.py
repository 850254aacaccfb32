"""Encoding the engine's events as responses: records are serialized once and reused, frames are
concatenated.

A record's protobuf encoding (``sowdb.v1.Record``) depends only on the stored version, so it is
computed the first time the version is sent and kept on the version (``StoredRecord.wire``);
later queries — and, with subscriptions, every subscriber — reuse the bytes. A frame of records
is then a concatenation: protobuf encodes a repeated message field as ``tag | length | bytes``
per element, and a message-typed field of the response the same way around the batch. The
three stream responses share field numbers for the event kinds they have in common (checked
below against the descriptors), so one encoding serves Sow, SowAndSubscribe and Subscribe.

A query that asks for ``RECORD_LAYOUT_PACKED`` gets its batches as columns instead
(``RecordBatch.packed``, :func:`packed_frame`): a client then decodes a few packed arrays per
batch rather than one ``Record`` message per record, which is most of what a Python client spends
on a query's records (issue 39). Live events keep the ``Record`` messages, cached per version.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import add, attrgetter

from google.protobuf.message import Message

from sowdb.engine import (
    Completed,
    Deliveries,
    GroupBegin,
    GroupEnd,
    Heartbeat,
    RecordBatch,
    StoredRecord,
    StreamEvent,
    Subscribed,
)
from sowdb.engine.changes import QueuedEvent
from sowdb_api.v1 import sow_pb2 as pb


def _field(message: type[Message], name: str) -> int:
    number: int = message.DESCRIPTOR.fields_by_name[name].number
    for other in (pb.SowResponse, pb.SowAndSubscribeResponse, pb.SubscribeResponse):
        field = other.DESCRIPTOR.fields_by_name.get(name)
        assert field is None or field.number == number, f"{name} has different numbers in the responses"
    return number


FIELD_RECORDS = _field(pb.SowAndSubscribeResponse, "records")
FIELD_PUBLISH = _field(pb.SowAndSubscribeResponse, "publish")
FIELD_OOF = _field(pb.SowAndSubscribeResponse, "oof")
FIELD_DELETED = _field(pb.SubscribeResponse, "deleted")
_RECORD_TAG = bytes([pb.RecordBatch.DESCRIPTOR.fields_by_name["records"].number << 3 | 2])
assert pb.Oof.DESCRIPTOR.fields_by_name["record"].number == pb.RecordBatch.DESCRIPTOR.fields_by_name["records"].number
_PACKED_TAG = bytes([pb.RecordBatch.DESCRIPTOR.fields_by_name["packed"].number << 3 | 2])
_OOF_REASON_TAG = bytes([pb.Oof.DESCRIPTOR.fields_by_name["reason"].number << 3 | 0])
assert [(f.name, f.number) for f in pb.Record.DESCRIPTOR.fields] == [
    ("topic", 1),
    ("sow_key", 2),
    ("bookmark", 3),
    ("timestamp", 4),
    ("data", 5),
], "record_element encodes Record by hand"

MAX_LIVE_BATCH = 500
"""Records per live ``publish`` frame when a subscriber has a backlog."""

_OOF_REASONS = {"deleted": pb.OOF_REASON_DELETED, "expired": pb.OOF_REASON_EXPIRED, "match": pb.OOF_REASON_MATCH}


def _varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_SMALL_VARINTS = tuple(_varint(i) for i in range(1 << 14))


_LOW_14_BITS = tuple(bytes(((i & 0x7F) | 0x80, (i >> 7) | 0x80)) for i in range(1 << 14))
"""The first two bytes of a varint of 16384 or more, by its low 14 bits."""


def varint(n: int) -> bytes:
    """Protobuf base-128 varint of a non-negative integer: table lookups, 14 bits at a time."""
    if n < 16384:
        return _SMALL_VARINTS[n]
    return _LOW_14_BITS[n & 0x3FFF] + varint(n >> 14)


_stamps: dict[int, bytes] = {}
"""Encoded ``Record.timestamp`` fields by µs: the versions of a batch share one time."""


def _stamp(ts: int) -> bytes:
    """``Record.timestamp`` (field 4) for ``ts`` µs since the epoch."""
    seconds, micros = divmod(ts, 1_000_000)
    body = b"\x08" + _varint64(seconds) if seconds else b""
    if micros:
        body += b"\x10" + varint(micros * 1000)
    if len(_stamps) >= 4096:
        _stamps.clear()
    stamp = _stamps[ts] = b"\x22" + varint(len(body)) + body
    return stamp


def record_element(r: StoredRecord) -> bytes:
    """A stored version encoded as one element of ``RecordBatch.records`` (field tag, length,
    ``Record``), kept on the version while it is recent (:meth:`StoredRecord.keep_wire`).

    Encoded by hand, field by field as protobuf writes them (``tests/api/test_wire.py`` checks
    the bytes against ``SerializeToString``): a version keeps its encoding only while recent
    (issue 30: cached on every version sent, it cost 180 B a record), so a query encodes most of
    what it sends, and this is ~3x faster than building a ``pb.Record``.
    """
    wire = r.wire
    if wire is None:
        stamp = r.stamp  # the version's topic, bookmark and timestamp, read without the properties' calls
        topic = stamp.topic.encode()
        key = r.sow_key.encode()
        raw = r.raw
        bookmark = stamp.base + r.low
        ts = stamp.timestamp_us
        body = b"".join(
            (
                b"\x0a" + varint(len(topic)) + topic if topic else b"",
                b"\x12" + varint(len(key)) + key if key else b"",
                b"\x18" + _varint64(bookmark) if bookmark else b"",
                _stamps.get(ts) or _stamp(ts),
                b"\x2a" + varint(len(raw)) + raw if raw else b"",
            )
        )
        wire = r.keep_wire(_RECORD_TAG + varint(len(body)) + body)
    return wire


def _varint64(n: int) -> bytes:
    """An int64/uint64 varint (a negative int64 as its two's complement, ten bytes)."""
    return varint(n) if n >= 0 else _varint(n + (1 << 64))


def records_frame(batch: Sequence[StoredRecord], field: int = FIELD_RECORDS) -> bytes:
    """An encoded response whose event is a ``RecordBatch`` in ``field``."""
    inner = b"".join([r.wire or record_element(r) for r in batch])
    return varint(field << 3 | 2) + varint(len(inner)) + inner


_STAMP = attrgetter("stamp")
_LOW = attrgetter("low")
_KEY = attrgetter("sow_key")
_RAW = attrgetter("raw")
_TOPIC = attrgetter("topic")
_BASE = attrgetter("base")
_TIMESTAMP = attrgetter("timestamp_us")


def packed_frame(batch: Sequence[StoredRecord]) -> bytes:
    """An encoded response whose event is a ``RecordBatch`` of ``packed`` records: the batch's
    columns, each taken by one C-level ``map`` and encoded by protobuf (packed varints, and the
    keys and documents as repeated fields: ``list()`` of them is the client's whole split, which
    measured faster than slicing concatenated bytes by lengths). A batch of one topic names it
    once and leaves ``topic_indexes`` empty."""
    stamps = list(map(_STAMP, batch))
    topics = list(dict.fromkeys(map(_TOPIC, dict.fromkeys(stamps))))  # a publish's versions share a stamp
    indexes = None
    if len(topics) > 1:
        indexes = list(map({t: i for i, t in enumerate(topics)}.__getitem__, map(_TOPIC, stamps)))
    body = pb.PackedRecords(
        topics=topics,
        topic_indexes=indexes,
        bookmarks=list(map(add, map(_BASE, stamps), map(_LOW, batch))),
        timestamps_us=list(map(_TIMESTAMP, stamps)),
        sow_keys=list(map(_KEY, batch)),
        data=list(map(_RAW, batch)),
    ).SerializeToString()
    inner = _PACKED_TAG + varint(len(body)) + body
    return varint(FIELD_RECORDS << 3 | 2) + varint(len(inner)) + inner


def oof_frame(record: StoredRecord, reason: str) -> bytes:
    """An encoded response whose event is an ``Oof``: its ``record`` field has the same tag as a
    ``RecordBatch`` element, so the cached element is reused as is."""
    inner = (record.wire or record_element(record)) + _OOF_REASON_TAG + varint(_OOF_REASONS[reason])
    return varint(FIELD_OOF << 3 | 2) + varint(len(inner)) + inner


def packed_asked(query: pb.SowRequest) -> bool:
    """Whether a query asked for its records as columns (any other value: ``Record`` messages)."""
    return query.record_layout == pb.RECORD_LAYOUT_PACKED


def live_frames(events: Sequence[QueuedEvent]) -> list[bytes]:
    """Frames for a drained subscriber queue: runs of publishes (and of deletes) become one
    batch frame each, at most :data:`MAX_LIVE_BATCH` records, in queue order."""
    frames: list[bytes] = []
    if all(e.kind == "publish" for e in events):  # the common case, without the per-event loop
        records = [e.record for e in events]
        for i in range(0, len(records), MAX_LIVE_BATCH):
            frames.append(records_frame(records[i : i + MAX_LIVE_BATCH], FIELD_PUBLISH))
        return frames
    run: list[StoredRecord] = []
    run_kind = ""
    for e in events:
        if e.kind == "oof":
            if run:
                frames.append(records_frame(run, FIELD_PUBLISH if run_kind == "publish" else FIELD_DELETED))
                run = []
            frames.append(oof_frame(e.record, e.reason))
            continue
        if run and (e.kind != run_kind or len(run) >= MAX_LIVE_BATCH):
            frames.append(records_frame(run, FIELD_PUBLISH if run_kind == "publish" else FIELD_DELETED))
            run = []
        run_kind = e.kind
        run.append(e.record)
    if run:
        frames.append(records_frame(run, FIELD_PUBLISH if run_kind == "publish" else FIELD_DELETED))
    return frames


def query_frame(event: GroupBegin | RecordBatch | GroupEnd, packed: bool = False) -> pb.SowResponse | bytes:
    """A query event as a Sow response (the same field numbers serve SowAndSubscribe); with
    ``packed``, a batch's records as columns (:func:`packed_frame`)."""
    if isinstance(event, RecordBatch):
        return packed_frame(event.records) if packed else records_frame(event.records)
    if isinstance(event, GroupBegin):
        return pb.SowResponse(group_begin=pb.GroupBegin(query_id=event.query_id, bookmark=event.bookmark))
    return pb.SowResponse(
        group_end=pb.GroupEnd(
            query_id=event.query_id,
            records_returned=event.returned,
            records_matched=event.matched,
            records_scanned=event.scanned,
        )
    )


def stream_frames(event: StreamEvent, packed: bool = False) -> list[pb.SubscribeResponse | pb.SowResponse | bytes]:
    """A subscription stream's event as responses (SowAndSubscribe and Subscribe alike); with
    ``packed``, its query results as columns."""
    if isinstance(event, Deliveries):
        return list(live_frames(event.events))
    if isinstance(event, GroupBegin | RecordBatch | GroupEnd):
        return [query_frame(event, packed)]
    if isinstance(event, Subscribed):
        return [pb.SubscribeResponse(subscribed=pb.Subscribed(sub_id=event.sub_id, bookmark=event.bookmark))]
    if isinstance(event, Completed):
        return [pb.SubscribeResponse(completed=pb.Completed(bookmark=event.bookmark))]
    assert isinstance(event, Heartbeat)
    return [pb.SubscribeResponse(heartbeat=pb.Heartbeat(bookmark=event.bookmark))]
