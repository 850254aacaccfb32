"""Byte layouts of the RocksDB keys and values, beside their encoders.

RocksDB orders keys by unsigned bytes, so every key is built so that byte order is the order
the engine needs:

- ``journal`` key: the sequence number as a big-endian u64 (8 bytes). Big-endian makes byte
  order numeric order, so iterating the column family walks the journal in bookmark order and
  ``seek(encode_seq(b))`` lands on bookmark ``b``.
- ``current`` key: ``topic UTF-8 | 0x00 | SowKey UTF-8``. Topic names and SowKeys never contain
  NUL (config validation and the SowKey encoder guarantee it), so 0x00 ends the topic: all
  records of a topic are one contiguous range whose prefix is ``topic | 0x00``, and no topic's
  range overlaps another's (``ab`` sorts before ``ab\\x00`` and ``abc``'s range starts with
  ``abc``, after ``ab\\x00…``).
- ``history`` key: ``topic | 0x00 | SowKey | 0x00 | seq (BE u64)``: the versions of one record
  are contiguous and in bookmark order, so "the version as of b" is a reverse seek.
- ``current`` and ``history`` also hold one bookkeeping key each, ``0x00 | "applied"``: the BE
  u64 of the last journal sequence applied to that column family, written in the same
  WriteBatch as the change. Topic names are never empty, so no record key starts with 0x00 and
  the marker sorts before every record. Keeping it *inside* the family it describes means a
  family that is lost or dropped also loses its marker, and start-up sees the journal ahead of
  it and replays (J-2).
- ``meta`` keys: ASCII names (``format``; ``journal_trimmed``: BE u64 of the last sequence
  removed by journal retention; ``history_floor | 0x00 | topic``: BE u64 of the newest version
  removed by history trimming, so older points are known to be gone; ``stored_topics``: JSON
  object of the persistent topics ``current`` is kept for, each mapped to whether ``history``
  is kept too, so a change of durability in the config is noticed at start; ``records | 0x00 |
  topic``: BE u64 of the number of records the topic has in ``current``, written in the same
  WriteBatch as every change to it, so that start-up and ``sowd verify`` can tell a ``current``
  that lost records from one that is whole; ``producer | 0x00 | user | 0x00 | topic | 0x00 |
  id``: BE u64 of the last sequence an idempotent producer had applied (J-4), written in the
  same WriteBatch as its messages — ``producer | 0x00 | id`` in stores written before producers
  were scoped, see :mod:`sowdb.engine.write.producers`; ``producer_at | 0x00 | seq (BE u64)``:
  ``sequence u64 | scoped producer id``, the producer state a batch ending at ``seq`` wrote, in
  the same WriteBatch, so that a replica is shipped it with the batch's entries and trimmed
  with the journal).

Values use fixed big-endian headers followed by the variable parts:

- ``current`` value: ``bookmark u64 | timestamp_us u64 | expiry_us u64 (0 = never) | payload``.
- ``journal`` value: ``timestamp_us u64 | op u8 | expiry_us u64 | len(topic) u16 |
  len(SowKey) u16 | topic | SowKey | payload``; the payload of a delete or expiration is the
  record's last state, so a replay can show what was removed without looking anything up.
- ``history`` value: ``op u8 | timestamp_us u64 | payload`` (op DELETE marks a deletion).
"""

from __future__ import annotations

import struct
from typing import NamedTuple

OP_PUBLISH = 1
OP_DELETE = 2
OP_EXPIRE = 3

SEQ = struct.Struct(">Q")
CURRENT_HEAD = struct.Struct(">QQQ")
JOURNAL_HEAD = struct.Struct(">QBQHH")
JOURNAL_LENGTHS_AT = 17  # offset of len(topic), len(SowKey) in a journal value: for raw readers
JOURNAL_LENGTHS = struct.Struct(">HH")
HISTORY_HEAD = struct.Struct(">BQ")

APPLIED_MARKER = b"\x00applied"
FIRST_RECORD_KEY = b"\x01"  # every record key sorts at or after this; the marker before it
META_FORMAT = b"format"
META_JOURNAL_TRIMMED = b"journal_trimmed"
META_STORED_TOPICS = b"stored_topics"
FORMAT_VERSION = b"2"

encode_seq = SEQ.pack


def decode_seq(key: bytes) -> int:
    """The sequence number of a journal key (or a meta value)."""
    return int(SEQ.unpack(key)[0])


def topic_prefix(topic: str) -> bytes:
    """The prefix shared by every ``current`` key of a topic."""
    return topic.encode() + b"\x00"


def current_key(topic: str, sow_key: str) -> bytes:
    """``topic | 0x00 | SowKey``."""
    return topic.encode() + b"\x00" + sow_key.encode()


def split_current_key(key: bytes) -> tuple[str, str]:
    """Inverse of :func:`current_key`."""
    topic, _, sow_key = key.partition(b"\x00")
    return topic.decode(), sow_key.decode()


def history_key(topic: str, sow_key: str, seq: int) -> bytes:
    """``topic | 0x00 | SowKey | 0x00 | seq``."""
    return topic.encode() + b"\x00" + sow_key.encode() + b"\x00" + SEQ.pack(seq)


def encode_current(bookmark: int, timestamp_us: int, expiry_us: int, payload: bytes) -> bytes:
    """A ``current`` value."""
    return CURRENT_HEAD.pack(bookmark, timestamp_us, expiry_us) + payload


class CurrentValue(NamedTuple):
    """A decoded ``current`` value."""

    bookmark: int
    timestamp_us: int
    expiry_us: int
    payload: bytes


def decode_current(value: bytes) -> CurrentValue:
    """Inverse of :func:`encode_current`."""
    b, t, e = CURRENT_HEAD.unpack_from(value)
    return CurrentValue(b, t, e, value[CURRENT_HEAD.size :])


def encode_journal(timestamp_us: int, op: int, expiry_us: int, topic: bytes, sow_key: bytes, payload: bytes) -> bytes:
    """A ``journal`` value (topic and SowKey already UTF-8)."""
    return JOURNAL_HEAD.pack(timestamp_us, op, expiry_us, len(topic), len(sow_key)) + topic + sow_key + payload


class JournalEntry(NamedTuple):
    """A decoded journal entry."""

    seq: int
    timestamp_us: int
    op: int
    expiry_us: int
    topic: str
    sow_key: str
    payload: bytes


def decode_journal(key: bytes, value: bytes) -> JournalEntry:
    """Inverse of :func:`encode_seq` + :func:`encode_journal`."""
    ts, op, exp, lt, lk = JOURNAL_HEAD.unpack_from(value)
    o = JOURNAL_HEAD.size
    topic = value[o : o + lt].decode()
    sow_key = value[o + lt : o + lt + lk].decode()
    return JournalEntry(decode_seq(key), ts, op, exp, topic, sow_key, value[o + lt + lk :])


def encode_history(op: int, timestamp_us: int, payload: bytes) -> bytes:
    """A ``history`` value."""
    return HISTORY_HEAD.pack(op, timestamp_us) + payload


class HistoryEntry(NamedTuple):
    """A decoded ``history`` entry: one version (or delete marker) of one record."""

    topic: str
    sow_key: str
    seq: int
    op: int
    timestamp_us: int
    payload: bytes


def decode_history(key: bytes, value: bytes) -> HistoryEntry:
    """Inverse of :func:`history_key` + :func:`encode_history`."""
    topic, _, rest = key.partition(b"\x00")
    op, ts = HISTORY_HEAD.unpack_from(value)
    return HistoryEntry(topic.decode(), rest[:-9].decode(), decode_seq(rest[-8:]), op, ts, value[HISTORY_HEAD.size :])


def record_count_key(topic: str) -> bytes:
    """The ``meta`` key of a topic's record count in ``current``."""
    return b"records\x00" + topic.encode()


PRODUCER_PREFIX = b"producer\x00"


def producer_key(producer_id: str) -> bytes:
    """The ``meta`` key of an idempotent producer's last applied sequence (J-4)."""
    return PRODUCER_PREFIX + producer_id.encode()


PRODUCER_LOG_PREFIX = b"producer_at\x00"


def producer_log_key(seq: int) -> bytes:
    """The ``meta`` key of the producer state written by the batch that ends at ``seq``."""
    return PRODUCER_LOG_PREFIX + SEQ.pack(seq)


def encode_producer_log(producer_id: str, seq: int) -> bytes:
    """A ``producer_at`` value: the producer's new sequence, then its scoped id."""
    return SEQ.pack(seq) + producer_id.encode()


def decode_producer_log(key: bytes, value: bytes) -> tuple[int, str, int]:
    """A ``producer_at`` entry as (bookmark, scoped producer id, sequence)."""
    return decode_seq(key[len(PRODUCER_LOG_PREFIX) :]), value[SEQ.size :].decode(), decode_seq(value[: SEQ.size])


def history_floor_key(topic: str) -> bytes:
    """The ``meta`` key of a topic's history floor."""
    return b"history_floor\x00" + topic.encode()


def decode_version(value: bytes) -> tuple[int, int, bytes]:
    """A ``history`` value as (op, timestamp_us, payload)."""
    op, ts = HISTORY_HEAD.unpack_from(value)
    return op, ts, value[HISTORY_HEAD.size :]


def family_of_keys(first: bytes, last: bytes) -> str:
    """The column family whose keys an SST file holds, told by their shape (RocksDB's file list
    does not name it): journal keys are 8-byte sequences, ``meta`` keys ASCII names, history
    keys end with ``0x00`` + an 8-byte sequence; the rest are ``current`` keys. For tools and
    tests that damage one family's files on purpose."""
    if len(first) == 8 and len(last) == 8 and first[0] == 0:
        return "journal"
    if first[:1].isalpha():
        return "meta"
    return "history" if len(last) > 9 and last[-9] == 0 else "current"
