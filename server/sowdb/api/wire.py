"""Pre-encoded responses: records are serialized once and reused, frames are concatenated.

A record's protobuf encoding (``sowdb.v1.Record``) depends only on the stored version, so it
is computed the first time the version is sent and kept on the version (``StoredRecord.wire``);
later queries — and, with subscriptions, every subscriber — reuse the bytes. A frame of records
is then a concatenation: protobuf encodes a repeated message field as ``tag | length | bytes``
per element, and a message-typed field of the response the same way around the batch.

The service's handlers are registered with a serializer that passes ``bytes`` through, so a
handler may yield either a response message or its already-encoded bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import grpc
from google.protobuf.message import Message

from sowdb.engine import StoredRecord
from sowdb_api.v1 import sow_pb2 as pb

# Field numbers of the event oneof, shared by SowResponse, SowAndSubscribeResponse and
# SubscribeResponse (see proto/sowdb/v1/sow.proto).
FIELD_RECORDS = 3
FIELD_PUBLISH = 5
_RECORD_TAG = b"\x0a"  # RecordBatch.records: field 1, wire type 2 (length-delimited)


def _varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_SMALL_VARINTS = tuple(_varint(i) for i in range(1 << 14))


def varint(n: int) -> bytes:
    """Protobuf base-128 varint of a non-negative integer (a table lookup below 16384)."""
    return _SMALL_VARINTS[n] if n < 16384 else _varint(n)


def record_element(r: StoredRecord) -> bytes:
    """A stored version encoded as one element of ``RecordBatch.records`` (field tag, length,
    ``Record``), cached on the version."""
    wire = r.wire
    if wire is None:
        rec = pb.Record(topic=r.topic, sow_key=r.sow_key, bookmark=r.bookmark, data=r.raw)
        ts = r.timestamp_us
        rec.timestamp.seconds = ts // 1_000_000
        rec.timestamp.nanos = (ts % 1_000_000) * 1000
        body = rec.SerializeToString()
        wire = r.wire = _RECORD_TAG + varint(len(body)) + body
    return wire


def records_frame(batch: Sequence[StoredRecord], field: int = FIELD_RECORDS) -> bytes:
    """An encoded response whose event is a ``RecordBatch`` in ``field``."""
    inner = b"".join([r.wire or record_element(r) for r in batch])
    return varint(field << 3 | 2) + varint(len(inner)) + inner


def _serialize(response: Message | bytes) -> bytes:
    return response if type(response) is bytes else response.SerializeToString()  # type: ignore[union-attr]


def add_service(servicer: Any, server: grpc.aio.Server) -> None:
    """Register ``sowdb.v1.SowService`` with pass-through serializers (like the generated
    ``add_SowServiceServicer_to_server``, which would re-serialize every response)."""
    service = pb.DESCRIPTOR.services_by_name["SowService"]
    handlers = {}
    for method in service.methods:
        request_cls: Any = getattr(pb, method.input_type.name)
        kind = {
            (False, False): grpc.unary_unary_rpc_method_handler,
            (False, True): grpc.unary_stream_rpc_method_handler,
            (True, False): grpc.stream_unary_rpc_method_handler,
            (True, True): grpc.stream_stream_rpc_method_handler,
        }[(method.client_streaming, method.server_streaming)]
        handlers[method.name] = kind(
            getattr(servicer, method.name),
            request_deserializer=request_cls.FromString,
            response_serializer=_serialize,
        )
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service.full_name, handlers),))


FIELD_OOF = 6
FIELD_DELETED = 7
MAX_LIVE_BATCH = 500
"""Records per live ``publish`` frame when a subscriber has a backlog."""

_OOF_REASONS = {"deleted": pb.OOF_REASON_DELETED, "expired": pb.OOF_REASON_EXPIRED, "match": pb.OOF_REASON_MATCH}


def oof_frame(record: StoredRecord, reason: str) -> bytes:
    """An encoded response whose event is an ``Oof``: its ``record`` field (1) has the same tag
    as a ``RecordBatch`` element, so the cached element is reused as is."""
    inner = (record.wire or record_element(record)) + b"\x10" + varint(_OOF_REASONS[reason])
    return varint(FIELD_OOF << 3 | 2) + varint(len(inner)) + inner


def live_frames(events: Sequence[Any]) -> list[bytes]:
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
