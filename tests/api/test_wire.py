"""The hand-written encoding of a record (``sowdb.api.wire.record_element``) is byte for byte
what protobuf writes, and a version keeps it only while recent (issue 30); a packed batch
(``packed_frame``, issue 39) is protobuf's encoding of the records' columns."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sowdb.api.wire import packed_asked, packed_frame, query_frame, record_element, records_frame, stream_frames, varint
from sowdb.engine import RecordBatch, StoredRecord, records
from sowdb.engine.records import RECENT_WIRE
from sowdb_api.v1 import sow_pb2 as pb


def _protobuf(r: StoredRecord) -> bytes:
    rec = pb.Record(topic=r.topic, sow_key=r.sow_key, bookmark=r.bookmark, data=r.raw)
    rec.timestamp.seconds, micros = divmod(r.timestamp_us, 1_000_000)
    rec.timestamp.nanos = micros * 1000
    body = rec.SerializeToString()
    return b"\x0a" + varint(len(body)) + body


@settings(max_examples=400, deadline=None)
@given(
    topic=st.text(max_size=300),
    sow_key=st.text(max_size=20_000),
    bookmark=st.integers(0, 2**64 - 1),
    timestamp_us=st.integers(-(2**62), 2**62),
    raw=st.binary(max_size=20_000),
)
def test_record_element_is_protobufs_encoding(
    topic: str, sow_key: str, bookmark: int, timestamp_us: int, raw: bytes
) -> None:
    r = StoredRecord(topic, sow_key, None, raw, bookmark, timestamp_us)
    assert record_element(r) == _protobuf(r)
    assert pb.RecordBatch.FromString(record_element(r)).records[0].data == raw


def test_a_version_keeps_its_encoding_only_while_recent() -> None:
    first = StoredRecord("t", "1", None, b'{"a":1}', 1, 1)
    wire = record_element(first)
    assert first.wire is wire
    for i in range(RECENT_WIRE):
        record_element(StoredRecord("t", str(i), None, b"{}", 2, 2))
    assert first.wire is None
    assert record_element(first) == wire


def test_the_encodings_and_documents_kept_are_bounded_in_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Large documents keep fewer: the rings hold at most their budget of bytes, and a version
    over the budget on its own keeps nothing."""
    monkeypatch.setattr(records, "_recent_wire", records._Recent(100, 1000, wire=True))
    monkeypatch.setattr(records, "_recent", records._Recent(100, 1000))
    versions = [StoredRecord("t", str(i), None, b'{"a":"' + b"x" * 290 + b'"}', i, i) for i in range(10)]
    for r in versions:
        record_element(r)
        assert r.data == {"a": "x" * 290}
    assert [r.wire is not None for r in versions] == [False] * 7 + [True] * 3
    assert [r.kept is not None for r in versions] == [False] * 7 + [True] * 3
    assert records._recent_wire.size == sum(len(r.wire or b"") for r in versions) <= 1000
    huge = StoredRecord("t", "h", {"a": "x" * 2000}, b'{"a":"' + b"x" * 2000 + b'"}', 1, 1)
    assert huge.kept is None
    assert huge.data == {"a": "x" * 2000}
    assert record_element(huge) == _protobuf(huge)
    assert huge.wire is None


_record = st.builds(
    StoredRecord,
    topic=st.sampled_from(["orders", "trades", "ordres-été", ""]),
    sow_key=st.text(max_size=40),
    data=st.none(),
    raw=st.binary(max_size=300),
    bookmark=st.integers(0, 2**64 - 1),
    timestamp_us=st.integers(-(2**62), 2**62),
)


def _packed_protobuf(batch: list[StoredRecord]) -> bytes:
    topics = list(dict.fromkeys(r.topic for r in batch))
    packed = pb.PackedRecords(
        topics=topics,
        topic_indexes=[topics.index(r.topic) for r in batch] if len(topics) > 1 else [],
        bookmarks=[r.bookmark for r in batch],
        timestamps_us=[r.timestamp_us for r in batch],
        sow_keys=[r.sow_key for r in batch],
        data=[r.raw for r in batch],
    )
    return pb.SowResponse(records=pb.RecordBatch(packed=packed)).SerializeToString()


@settings(max_examples=300, deadline=None)
@given(batch=st.lists(_record, max_size=50))
def test_packed_frame_is_protobufs_encoding(batch: list[StoredRecord]) -> None:
    """A packed batch is byte for byte what protobuf writes for the columns of the records,
    in their order, and one topic is named once (no ``topic_indexes``)."""
    frame = packed_frame(batch)
    assert frame == _packed_protobuf(batch)
    packed = pb.SowResponse.FromString(frame).records.packed
    assert pb.SowResponse.FromString(frame).records.HasField("packed")
    assert not pb.SowResponse.FromString(frame).records.records
    assert [
        packed.topics[packed.topic_indexes[i]] if packed.topic_indexes else packed.topics[0] for i in range(len(batch))
    ] == [r.topic for r in batch]
    assert list(packed.data) == [r.raw for r in batch]
    if len({r.topic for r in batch}) == 1:
        assert not packed.topic_indexes


def test_a_query_batch_is_packed_only_when_asked() -> None:
    """The default layout (a request that does not name one, or names RECORDS, or a value this
    server does not know) is one ``Record`` message per record."""
    batch = [StoredRecord("t", "k", None, b"{}", 5, 7)]
    event = RecordBatch(batch)
    assert query_frame(event) == records_frame(batch)
    for layout in (pb.RECORD_LAYOUT_UNSPECIFIED, pb.RECORD_LAYOUT_RECORDS, pb.RecordLayout.ValueType(7)):
        assert not packed_asked(pb.SowRequest(record_layout=layout))
    assert packed_asked(pb.SowRequest(record_layout=pb.RECORD_LAYOUT_PACKED))
    assert query_frame(event, packed=True) == packed_frame(batch)
    assert stream_frames(event, packed=True) == [packed_frame(batch)]
    assert pb.SowRequest().record_layout == pb.RECORD_LAYOUT_UNSPECIFIED
