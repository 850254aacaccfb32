"""The hand-written encoding of a record (``sowdb.api.wire.record_element``) is byte for byte
what protobuf writes, and a version keeps it only while recent (issue 30)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sowdb.api.wire import record_element, varint
from sowdb.engine import StoredRecord, records
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
