"""Records in memory, SowKeys (K-1) and delta merge (D-1)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

import orjson

from sowdb.config import field_path_steps
from sowdb.errors import InvalidArgument, ResourceExhausted
from sowdb.expr import Select, get_path

MAX_SOW_KEY_LENGTH = 1024
_INT_ONLY = {int}


class Stamp:
    """What the versions of one publish share: the topic, the bookmark less its last 8 bits, the
    timestamp and the expiry, one object for them all (:func:`stamp`). A version keeps its
    stamp and the last 8 bits of its bookmark (an int from Python's cache of small ints): per
    record, the 32 B of a bookmark's int object and three of its slots (issue 30)."""

    __slots__ = ("base", "expiry_us", "timestamp_us", "topic")

    def __init__(self, topic: str, base: int, timestamp_us: int, expiry_us: int) -> None:
        self.topic, self.base, self.timestamp_us, self.expiry_us = topic, base, timestamp_us, expiry_us


STAMPS = 65536
"""Stamps :func:`stamp` remembers to share (the batches of ~6.5M records published 100 at a
time); beyond, it forgets them all and starts again: sharing saves memory, never changes values."""
_stamps: dict[tuple[str, int, int, int], Stamp] = {}


_last = [Stamp("", -1, -1, -1)]  # the stamp made or found last: the next version of a publish has the same


def stamp(topic: str, base: int, timestamp_us: int, expiry_us: int) -> Stamp:
    """The stamp of these values, shared with the versions that have the same ones (a
    version's constructor tries the last one first: a publish's versions come one after
    another, and comparing costs ~65 ns a version where this lookup costs ~225)."""
    key = (topic, base, timestamp_us, expiry_us)
    found = _stamps.get(key)
    if found is None:
        if len(_stamps) >= STAMPS:
            _stamps.clear()
        found = _stamps[key] = Stamp(topic, base, timestamp_us, expiry_us)
    _last[0] = found
    return found


class StoredRecord:
    """One version of a record: immutable once built, so a query's snapshot can hold it while
    publishes replace it in the topic. Also the metadata context of filters (``SOW_KEY()``,
    ``TOPIC_NAME()``, ``BOOKMARK()``, ``LAST_UPDATED()``).

    A version keeps its JSON bytes and decodes them when read (issue 30): the decoded dict and
    its values cost ~5x the JSON, so keeping one per record made a topic ~10x its data. A
    decoded dict, and the protocol layer's encoding (``wire``), are kept only while the version
    is among the last :data:`RECENT` that were decoded or built (:data:`RECENT_WIRE` encoded;
    :class:`_Recent`): the publish path, the fan-out to subscriptions and a query that reads a
    record twice (filter, then select or order_by) decode once, repeated queries of up to 65536
    records encode once, and memory stays bounded.

    Attributes:
        data: the decoded JSON object, decoded from ``raw`` on demand (None for records built
            only to be sent, whose ``raw`` is empty).
        kept: the decoded JSON object while the version is recent, else None. A pass that reads
            each record once (a scan's filter, building a column) reads
            :func:`document`, which decodes without keeping: through the ring, each record
            would push out one that is about to be read again.
        raw: the JSON bytes as stored and sent.
        stamp: the topic, timestamp, expiry and the bookmark less ``low``, shared with the other
            versions of its publish (:class:`Stamp`); ``topic``, ``bookmark``, ``timestamp_us``
            and ``expiry_us`` read it.
        low: the bookmark's last 8 bits (a cached small int).
        expiry_us: absolute expiry time in µs since the epoch; 0 = never.
        prev: the version this one replaced, kept while inside the topic's history window.
        slot: its place in the topic's columns (:mod:`sowdb.engine.state.columns`), -1 until it has one.
        wire: the protocol layer's encoding, while the version is recent (:meth:`keep_wire`).
    """

    __slots__ = ("kept", "low", "prev", "raw", "slot", "sow_key", "stamp", "wire")

    def __init__(
        self,
        topic: str,
        sow_key: str,
        data: dict[str, Any] | None,
        raw: bytes,
        bookmark: int,
        timestamp_us: int,
        expiry_us: int = 0,
    ) -> None:
        self.sow_key = sow_key  # which record (and the stamp's topic)
        self.kept, self.raw = data, raw  # its content, decoded (while recent) and as stored
        low = self.low = bookmark & 0xFF  # this version: its bookmark, timestamp and expiry (Stamp)
        base = bookmark - low
        s = _last[0]
        if s.base != base or s.timestamp_us != timestamp_us or s.expiry_us != expiry_us or s.topic != topic:
            s = stamp(topic, base, timestamp_us, expiry_us)
        self.stamp = s
        self.wire: bytes | None = None  # the protocol layer's encoding, while recent
        self.prev: StoredRecord | None = None  # the previous version, for topics with history
        self.slot = -1  # its place in the topic's columns, once it has one
        if data is not None:
            _recent.keep(self, len(raw))

    @property
    def topic(self) -> str:
        return self.stamp.topic

    @property
    def bookmark(self) -> int:
        return self.stamp.base + self.low

    @property
    def timestamp_us(self) -> int:
        return self.stamp.timestamp_us

    @property
    def expiry_us(self) -> int:
        return self.stamp.expiry_us

    @property
    def data(self) -> dict[str, Any] | None:
        """The decoded JSON object: kept while recent, else decoded from ``raw`` (and kept)."""
        data = self.kept
        if data is None and self.raw:
            data = self.kept = orjson.loads(self.raw)
            _recent.keep(self, len(self.raw))
        return data

    def keep_wire(self, wire: bytes) -> bytes:
        """Keep the protocol layer's encoding while the version is among the last
        :data:`RECENT_WIRE` encoded; returns it."""
        if self.wire is None:
            self.wire = wire
            _recent_wire.keep(self, len(wire))
        else:
            self.wire = wire
        return wire

    @property
    def timestamp(self) -> float:
        """Seconds since the epoch (what ``LAST_UPDATED()`` returns)."""
        return self.timestamp_us / 1e6

    def __repr__(self) -> str:
        return f"StoredRecord({self.topic!r}, {self.sow_key!r}, bookmark={self.bookmark}, raw={self.raw!r})"


@dataclass(frozen=True, slots=True)
class PublishParts:
    """A publish's messages as the writer hands them to its topic's store, one value rather than
    the same six passed through each store's :meth:`versions`, :meth:`put_docs` and
    :meth:`put_followed`: bookmarks ``first``, ``first + 1``, … at ``now`` (µs); ``exps``: each
    message's expiry in µs, or None when none expires."""

    sow_keys: list[str]
    docs: list[dict[str, Any]]
    raws: list[bytes]
    first: int
    now: int
    exps: list[int] | None = None


def document(rec: StoredRecord) -> dict[str, Any] | None:
    """``rec.data`` without keeping it (see :attr:`StoredRecord.kept`)."""
    data = rec.kept
    return data if data is not None else orjson.loads(rec.raw) if rec.raw else None


RECENT = 8192
"""How many versions keep their decoded dict (~0.6 KB each for the bench's orders)."""
RECENT_BYTES = 4 << 20
"""… and at most this many bytes of their JSON (a dict is ~5x it): large documents keep fewer."""
RECENT_WIRE = 65536
"""How many versions keep their encoding (~180 B each for the bench's orders, 12 MB): the
results of repeated queries of up to this many records are encoded once, as before issue 30."""
RECENT_WIRE_BYTES = 16 << 20
"""… and at most this many bytes of encodings."""


class _Recent:
    """The last versions that were decoded or built from a decoded document (``wire``:
    encoded), at most ``count`` of them and ``budget`` bytes of their JSON (encodings): a
    version leaving drops its dict (encoding); reading it again decodes (encodes) again, with
    the same result, so the ring changes costs, never answers. A version is held at most once:
    it enters only while it holds no dict (encoding), and enters after it took one, so that a
    version pushed out at once by its own size keeps nothing. Readers take ``kept`` into a
    local before using it, so a version pushed out by another thread meanwhile (filters also
    run on the data service's threads) costs a decode, never an answer."""

    __slots__ = ("budget", "count", "held", "size", "wire")

    def __init__(self, count: int = RECENT, budget: int = RECENT_BYTES, *, wire: bool = False) -> None:
        self.held: deque[StoredRecord] = deque()
        self.count, self.budget, self.wire = count, budget, wire
        self.size = 0  # bytes of JSON (encodings) held

    def keep(self, rec: StoredRecord, size: int) -> None:
        held = self.held
        held.append(rec)
        self.size += size
        while len(held) > self.count or self.size > self.budget:
            gone = held.popleft()
            if self.wire:
                self.size -= len(gone.wire or b"")
                gone.wire = None
            else:
                self.size -= len(gone.raw)
                gone.kept = None


_recent = _Recent()
_recent_wire = _Recent(RECENT_WIRE, RECENT_WIRE_BYTES, wire=True)


_EXACT = 2**53  # floats at or beyond this magnitude may stand for several integers


def key_text(value: Any, path: str) -> str:
    """The canonical text of one key value.

    Strings are JSON-quoted and numbers are not, so the string "42" and the number 42 are
    different keys; integral floats are written as integers, so 42 and 42.0 are the same key.
    A float beyond 2^53 is refused: JSON decoding gives one for every integer beyond 64 bits,
    so 10^29 and 10^29 + 1 would be the same key, the second silently replacing the first.

    Raises:
        InvalidArgument: missing, not a string, number or boolean, or not exact.
    """
    t = type(value)
    if t is int:
        return str(value)
    if t is str:
        return orjson.dumps(value).decode()
    if t is float and value == value and abs(value) != float("inf"):
        if abs(value) >= _EXACT:
            raise InvalidArgument(
                f"key field {path} is {value!r}, beyond the numbers a key keeps exact (integers beyond 64 bits "
                "arrive as floats, and floats beyond 2^53 stand for many integers); send such identifiers as strings",
                field="data",
            )
        return str(int(value)) if value.is_integer() else repr(value)
    if t is bool:
        return "true" if value else "false"
    if value is None:
        raise InvalidArgument(f"lacks the key field {path}", field="data")
    shown = repr(value)
    shown = shown if len(shown) <= 60 else shown[:60] + "…"
    raise InvalidArgument(f"key field {path} must be a string, number or boolean, not {shown}", field="data")


class KeySpec:
    """Derives the SowKey of a message from the topic's key paths (K-1).

    The SowKey is the canonical text of the key values joined by commas: ``42`` for
    ``{"orderId": 42}``, ``"EU",7`` for a two-field key. Each value's text is self-delimiting
    (strings are JSON-quoted), so the function is collision-free, and it is stable across
    restarts and versions because it depends only on the values.
    """

    def __init__(self, paths: tuple[str, ...]) -> None:
        self.paths = paths
        self.steps = tuple(field_path_steps(p) for p in paths)
        first = self.steps[0] if len(self.steps) == 1 else ()
        self._single_top = first[0] if len(first) == 1 and isinstance(first[0], str) else None

    def sow_key(self, data: dict[str, Any]) -> str:
        """The SowKey of a message.

        Raises:
            InvalidArgument: a key field is missing or is not a string, number or boolean.
        """
        if self._single_top is not None:
            v = data.get(self._single_top)
            if type(v) is int:
                return str(v)
            key = key_text(v, self.paths[0])
        else:
            texts = [key_text(get_path(data, steps), path) for steps, path in zip(self.steps, self.paths, strict=True)]
            key = ",".join(texts)
        if len(key) > MAX_SOW_KEY_LENGTH:
            raise InvalidArgument(
                f"the key fields {', '.join(self.paths)} make a SowKey of {len(key)} characters, over the limit of "
                f"{MAX_SOW_KEY_LENGTH}",
                field="data",
            )
        return key

    def sow_keys(self, docs: list[dict[str, Any]]) -> list[str]:
        """The SowKeys of a publish request's documents, in one pass for the common case of a
        single top-level integer key (half the cost of a call per document).

        Raises:
            InvalidArgument: a key field is missing or invalid (which document: call
                :meth:`sow_key` on each).
        """
        top = self._single_top
        if top is not None:
            values = [d.get(top) for d in docs]
            if set(map(type, values)) == _INT_ONLY:
                return list(map(str, values))
        return [self.sow_key(d) for d in docs]


def check_sow_key(sow_key: str) -> None:
    """Validate a publisher-provided SowKey.

    Raises:
        InvalidArgument: empty, too long or containing NUL.
    """
    if not sow_key:
        raise InvalidArgument("lacks a sow_key, which this topic requires (it has no key fields)", field="sow_key")
    if len(sow_key) > MAX_SOW_KEY_LENGTH or "\x00" in sow_key:
        raise InvalidArgument(f"sow_key must be at most {MAX_SOW_KEY_LENGTH} characters without NUL", field="sow_key")


def decode_document(raw: bytes, max_bytes: int | None = None) -> dict[str, Any]:
    """A message's JSON object (K-3), refusing what the store must not hold.

    Raises:
        ResourceExhausted: longer than ``max_bytes``.
        InvalidArgument: not JSON, or JSON that is not an object.
    """
    if max_bytes is not None and len(raw) > max_bytes:
        raise ResourceExhausted(
            f"document of {len(raw)} bytes is over the limit of {max_bytes} bytes (max_document_bytes)", field="data"
        )
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InvalidArgument(f"not valid JSON: {exc}", field="data") from None
    if type(data) is not dict:
        raise InvalidArgument("must be a JSON object", field="data")
    return data


def merge_delta(old: dict[str, Any], delta: dict[str, Any]) -> dict[str, Any]:
    """Merge a delta into a record (D-1): named fields overwrite, new fields are appended,
    missing fields stay; nested objects merge field by field; arrays are replaced whole."""
    out = dict(old)
    for key, value in delta.items():
        prev = out.get(key)
        if type(value) is dict and type(prev) is dict:
            out[key] = merge_delta(prev, value)
        else:
            out[key] = value
    return out


def shaped(rec: StoredRecord, select: Select) -> StoredRecord:
    """The record as ``select`` shapes it (Q-9): the same version, only the chosen fields."""
    data = select.apply(rec.data) if rec.data is not None else {}
    return StoredRecord(rec.topic, rec.sow_key, data, orjson.dumps(data), rec.bookmark, rec.timestamp_us, rec.expiry_us)
