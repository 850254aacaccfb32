"""A publish request's messages: decoded, keyed and checked as a whole before any of them gets
a sequence number (K-1, K-3, X-1), so that a refused request changes nothing and leaves no gap.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from sowdb.engine.access import Access
from sowdb.engine.records import KeySpec, check_sow_key, decode_document, merge_delta
from sowdb.engine.state import SowTopic
from sowdb.engine.write.enrichment import preprocess, preprocess_one
from sowdb.errors import InvalidArgument, PublishError, SowdbError
from sowdb.expr.rewrite import Rewrite
from sowdb.jsonbytes import dumps


class MessageLike(Protocol):
    """What the publish pipeline reads of a message."""

    @property
    def data(self) -> bytes: ...

    @property
    def sow_key(self) -> str: ...


@dataclass(slots=True)
class InMessage:
    """One message to publish (for callers that do not hold a protobuf message)."""

    data: bytes
    sow_key: str = ""


def decode_batch(
    topic_name: str,
    keys: KeySpec | None,
    messages: Sequence[MessageLike],
    raws: list[bytes],
    max_bytes: int | None,
    *,
    key_optional: bool = False,
    preprocessing: Rewrite | None = None,
) -> tuple[list[dict[str, Any]], list[str]]:
    """Decode a publish request's documents and find their SowKeys (K-1, K-3).

    The whole request is checked in a few passes; only when one fails are the messages checked
    one by one, to name the first invalid one.

    Args:
        keys: the topic's key paths; None when publishers give the SowKeys.
        key_optional: a topic without a SOW, where a publisher's SowKey is optional.
        preprocessing: the topic's EN-1 rewrite, applied before the SowKeys are computed;
            ``raws`` then holds the rewritten bytes of the messages it changed.

    Raises:
        PublishError: the first invalid message and why.
    """
    try:
        if max_bytes is not None and max(map(len, raws)) > max_bytes:
            raise _Invalid
        docs = list(map(orjson.loads, raws))
        if set(map(type, docs)) != _DICT_ONLY:
            raise _Invalid
        if preprocessing is not None:
            preprocess(preprocessing, topic_name, docs, raws)
        if keys is None:
            sow_keys = [m.sow_key for m in messages]
            for key in sow_keys:
                if key or not key_optional:
                    check_sow_key(key)
        elif any(m.sow_key for m in messages):
            raise _Invalid
        else:
            sow_keys = keys.sow_keys(docs)
    except (_Invalid, orjson.JSONDecodeError, SowdbError):
        for i, msg in enumerate(messages):
            try:
                _check_message(topic_name, keys, msg, max_bytes, key_optional, preprocessing)
            except SowdbError as exc:
                raise PublishError(i, exc) from None
        raise
    return docs, sow_keys


class _Invalid(Exception):
    """Some message of a batch is invalid; which one is found by checking one at a time."""


_DICT_ONLY = {dict}


def _check_message(
    topic_name: str,
    keys: KeySpec | None,
    msg: MessageLike,
    max_bytes: int | None,
    key_optional: bool,
    preprocessing: Rewrite | None,
) -> None:
    """The checks of :func:`decode_batch` for one message, raising the reason it is refused."""
    data = preprocess_one(preprocessing, topic_name, decode_document(msg.data, max_bytes))
    if keys is None:
        if msg.sow_key or not key_optional:
            check_sow_key(msg.sow_key)
    elif msg.sow_key:
        raise InvalidArgument(
            f"topic {topic_name!r} derives SowKeys from {', '.join(keys.paths)}; leave sow_key empty", field="sow_key"
        )
    else:
        keys.sow_key(data)


def expiries(default_ttl: float, ttls: Sequence[float | None] | None, n: int, now: int) -> list[int] | None:
    """X-1: each message's absolute expiry in µs (0: never), or None when none expires."""
    if ttls is None:
        return [now + int(default_ttl * 1e6)] * n if default_ttl else None
    return [now + int(ttl * 1e6) if ttl else 0 for ttl in (default_ttl if t is None else t for t in ttls)]


MAX_TTL_S = 100 * 365.25 * 86400
"""The longest time to live a message may ask for; expiry times are stored as 64-bit microseconds."""


def check_ttls(ttls: Sequence[float | None], n: int) -> None:
    """Raises:
    InvalidArgument: not one time to live per message, or a negative one.
    """
    if len(ttls) != n:
        raise InvalidArgument("one ttl per message", field="messages")
    for i, ttl in enumerate(ttls):
        if ttl is not None and not 0 <= ttl <= MAX_TTL_S:
            raise InvalidArgument(
                f"expiration must be between 0 and {MAX_TTL_S:.0f} seconds (100 years), got {ttl:.0f}",
                field=f"messages[{i}].expiration",
            )


def merge_deltas(topic: SowTopic, sow_keys: list[str], raws: list[bytes] | None, docs: list[dict[str, Any]]) -> None:
    """D-1: merge each delta into the key's latest version (an earlier message of the same
    request included), replacing ``raws`` (None: none kept) and ``docs`` in place."""
    latest: dict[str, dict[str, Any]] = {}
    for i, key in enumerate(sow_keys):
        old = latest.get(key)
        if old is None:
            rec = topic.records.get(key)
            old = rec.data if rec is not None else None
        if old is not None:
            docs[i] = merge_delta(old, docs[i])
            if raws is not None:
                raws[i] = dumps(docs[i])  # kept by the record: bytes of its own size
        latest[key] = docs[i]


def as_received(
    topic: SowTopic | None,
    preprocessing: Rewrite | None,
    access: Access,
    messages: Sequence[MessageLike],
    sow_keys: list[str],
    delta: bool,
) -> list[dict[str, Any]] | None:
    """The messages as received (decoded again), merged for a delta: what A-2's row filter
    judges when a topic's preprocessing (EN-1) has rewritten them; None when nothing was
    rewritten or the caller has no row filter (the decoded messages serve)."""
    if topic is None or preprocessing is None or access.unrestricted:
        return None
    docs: list[dict[str, Any]] = [orjson.loads(m.data) for m in messages]
    if delta:
        merge_deltas(topic, sow_keys, None, docs)
    return docs
