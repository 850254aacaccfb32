"""The single writer: publish, delete, expiration and the trimming of history and journal.

One writer, one total order: every publish, delete and expiration runs synchronously on the
event loop from validation to the RocksDB write and the in-memory update, so sequence numbers
are handed out in exactly the order changes are applied, and nothing else observes a
half-applied batch. A publish request is validated completely before it gets any sequence
number; a refused request therefore changes nothing and leaves no gap in the journal.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import count, repeat
from typing import Any, Protocol

import orjson

from sowdb.engine.base import EngineBase, request_filter
from sowdb.engine.derived import ConflatedTopic
from sowdb.engine.records import KeySpec, StoredRecord, check_sow_key, decode_document, merge_delta
from sowdb.engine.subscriptions import (
    OOF_DELETED,
    OOF_EXPIRED,
    Change,
)
from sowdb.engine.topic import SowTopic
from sowdb.errors import (
    FailedPrecondition,
    InvalidArgument,
    PublishError,
    SowdbError,
)
from sowdb.storage import Batch
from sowdb.storage.keys import OP_DELETE, OP_EXPIRE

HISTORY_TRIM_BATCH = 50_000

log = logging.getLogger("sowdb.engine")


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
) -> tuple[list[dict[str, Any]], list[str]]:
    """Decode a publish request's documents and find their SowKeys (K-1, K-3).

    The whole request is checked in a few passes; only when one fails are the messages checked
    one by one, to name the first invalid one.

    Args:
        keys: the topic's key paths; None when publishers give the SowKeys.
        key_optional: a topic without a SOW, where a publisher's SowKey is optional.

    Raises:
        PublishError: the first invalid message and why.
    """
    try:
        if max_bytes is not None and max(map(len, raws)) > max_bytes:
            raise _Invalid
        docs = list(map(orjson.loads, raws))
        if set(map(type, docs)) != _DICT_ONLY:
            raise _Invalid
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
                _check_message(topic_name, keys, msg, max_bytes, key_optional)
            except SowdbError as exc:
                raise PublishError(i, exc) from None
        raise
    return docs, sow_keys


class _Invalid(Exception):
    """Some message of a batch is invalid; which one is found by checking one at a time."""


_DICT_ONLY = {dict}


def _check_message(
    topic_name: str, keys: KeySpec | None, msg: MessageLike, max_bytes: int | None, key_optional: bool
) -> None:
    """The checks of :func:`decode_batch` for one message, raising the reason it is refused."""
    data = decode_document(msg.data, max_bytes)
    if keys is None:
        if msg.sow_key or not key_optional:
            check_sow_key(msg.sow_key)
    elif msg.sow_key:
        raise InvalidArgument(
            f"topic {topic_name!r} derives SowKeys from {', '.join(keys.paths)}; leave sow_key empty", field="sow_key"
        )
    else:
        keys.sow_key(data)


def _expiries(default_ttl: float, ttls: Sequence[float | None] | None, n: int, now: int) -> list[int] | None:
    """X-1: each message's absolute expiry in µs (0: never), or None when none expires."""
    if ttls is None:
        return [now + int(default_ttl * 1e6)] * n if default_ttl else None
    return [now + int(ttl * 1e6) if ttl else 0 for ttl in (default_ttl if t is None else t for t in ttls)]


class Writer(EngineBase):
    """Every change to state goes through these methods, one at a time."""

    def _check_writable(self, topic_name: str, action: str) -> None:
        """K-4: views and conflated topics follow their underlying topic and take no changes.

        Raises:
            FailedPrecondition: ``topic_name`` is one of them; ``action`` says what to do instead
                (``publish to``, ``delete from``) its underlying topic.
        """
        kind = self._derived.get(topic_name)
        if kind is not None:
            raise FailedPrecondition(
                f"{topic_name!r} is a {kind} topic, which is read-only; {action} its underlying topic", field="topic"
            )

    def publish(
        self,
        topic_name: str,
        messages: Sequence[MessageLike],
        *,
        delta: bool = False,
        ttls: Sequence[float | None] | None = None,
    ) -> tuple[int, int]:
        """Apply one atomic batch; returns the (first, last) bookmark assigned.

        Every step works on the whole request at once (decode, keys, the WriteBatch, the
        in-memory update): this is the server's hot path, and a loop per step with its
        invariants in locals costs much less than a chain of calls per message.

        Args:
            messages: objects with ``data`` (JSON bytes) and ``sow_key`` (``InMessage`` or the
                protobuf ``PublishMessage`` itself, which saves a copy per message).
            ttls: per-message time to live in seconds (None: the topic's default), if any.

        Raises:
            PublishError: a message is invalid; it names the message (K-3). Nothing is stored.
            InvalidArgument: the topic name is invalid or there are no messages.
            FailedPrecondition: the topic is a view or conflated topic (K-4).
        """
        self._check_topic_name(topic_name)
        self._check_writable(topic_name, "publish to")
        if not messages:
            raise InvalidArgument("a publish request needs at least one message", field="messages")
        if ttls is not None and len(ttls) != len(messages):
            raise InvalidArgument("one ttl per message", field="messages")
        topic = self.topics.get(topic_name)
        now = self._now()
        raws = [m.data for m in messages]
        if topic is None:
            return self._publish_plain(topic_name, messages, raws, now)
        docs, sow_keys = decode_batch(topic_name, topic.keys, messages, raws, self.max_document_bytes)
        if delta:
            self._merge_deltas(topic, sow_keys, raws, docs)
        expiries = _expiries(topic.config.expiration_s, ttls, len(raws), now)
        hist = topic.history
        first = self.last_seq + 1
        batch = self.store.batch(topic_name, current=topic.persistent, history=hist is not None and topic.persistent)
        batch.publish_many(first, now, sow_keys, raws, expiries)
        versions = [
            StoredRecord(topic_name, key, data, raw, seq, now, expiry)
            for key, data, raw, seq, expiry in zip(sow_keys, docs, raws, count(first), expiries or repeat(0))
        ]
        if hist is not None and hist.granularity_us:
            self._thin_history(topic, batch, versions, now)
        batch.commit()
        self.last_seq = last = first + len(versions) - 1
        if expiries is not None:
            for rec in versions:
                if rec.expiry_us:
                    self.expiry.add(rec)
        olds = topic.put_many(versions)
        if self.hub or topic_name in self._downstream:
            changes = [
                Change(topic_name, rec.sow_key, rec.bookmark, now, old, rec)
                for rec, old in zip(versions, olds, strict=True)
            ]
            self._fan_out(topic_name, changes, now)
        return first, last

    @staticmethod
    def _merge_deltas(topic: SowTopic, sow_keys: list[str], raws: list[bytes], docs: list[dict[str, Any]]) -> None:
        """D-1: merge each delta into the key's latest version (an earlier message of the same
        request included), replacing ``raws`` and ``docs`` in place."""
        latest: dict[str, dict[str, Any]] = {}
        for i, key in enumerate(sow_keys):
            old = latest.get(key)
            if old is None:
                rec = topic.records.get(key)
                old = rec.data if rec is not None else None
            if old is not None:
                docs[i] = merge_delta(old, docs[i])
                raws[i] = orjson.dumps(docs[i])
            latest[key] = docs[i]

    @staticmethod
    def _thin_history(topic: SowTopic, batch: Batch, versions: list[StoredRecord], now: int) -> None:
        """H-1 granularity: a new version replaces (rather than follows) the key's previous
        version of the same interval, whose history entry goes in the same WriteBatch."""
        hist = topic.history
        assert hist is not None
        pending: dict[str, StoredRecord] = {}
        for rec in versions:
            previous = pending.get(rec.sow_key) or topic.head(rec.sow_key)
            if previous is not None and hist.drops(previous, now):
                batch.drop_history(rec.sow_key, previous.bookmark)
            pending[rec.sow_key] = rec

    def _publish_plain(
        self, topic_name: str, messages: Sequence[MessageLike], raws: list[bytes], now: int
    ) -> tuple[int, int]:
        """K-5: a topic without a SOW is journaled (for subscribers and replay), not stored."""
        docs, sow_keys = decode_batch(topic_name, None, messages, raws, self.max_document_bytes, key_optional=True)
        first = self.last_seq + 1
        batch = self.store.batch(topic_name, current=False, history=False)
        batch.publish_many(first, now, sow_keys, raws)
        batch.commit()
        self.last_seq = last = first + len(raws) - 1
        if self.hub:
            live = [
                Change(topic_name, key, seq, now, None, StoredRecord(topic_name, key, data, raw, seq, now))
                for key, data, raw, seq in zip(sow_keys, docs, raws, count(first))
            ]
            self.hub.dispatch(topic_name, live)
        return first, last

    def sow_delete(
        self, topic_name: str, *, filter: str = "", sow_keys: Sequence[str] = (), data: bytes = b""
    ) -> tuple[int, int]:
        """Delete by exactly one of filter, SowKeys or data; returns (count, last bookmark).

        Raises:
            InvalidArgument: not exactly one selector, or an invalid one.
            FailedPrecondition: not a SOW topic.
        """
        given = [name for name, v in (("filter", filter.strip()), ("sow_keys", sow_keys), ("data", data)) if v]
        if len(given) != 1:
            raise InvalidArgument(
                "give exactly one of filter, sow_keys or data" + (f" (got {', '.join(given)})" if given else ""),
                field=given[1] if len(given) > 1 else "filter",
            )
        topic = self._sow_topic(topic_name)
        self._check_writable(topic_name, "delete from")
        flt = request_filter(filter)
        if flt is not None:
            records = topic.candidates(flt.conjuncts)
            if records is None:
                records = topic.snapshot()
            victims = [r.sow_key for r in records if flt.matches(r.data, r)]
        elif sow_keys:
            victims = [k for k in dict.fromkeys(sow_keys) if k in topic.records]
        else:
            key = self._key_of_data(topic, data)
            victims = [key] if key in topic.records else []
        return self._delete(topic, victims)

    def _key_of_data(self, topic: SowTopic, raw: bytes) -> str:
        if topic.keys is None:
            raise InvalidArgument(
                f"topic {topic.name!r} has publisher-provided SowKeys; delete by sow_keys instead of data", field="data"
            )
        return topic.keys.sow_key(decode_document(raw))

    def _delete(
        self, topic: SowTopic, victims: list[str], *, op: int = OP_DELETE, reason: str = OOF_DELETED
    ) -> tuple[int, int]:
        """Remove records (deletes or expirations) as one batch; returns (count, last bookmark)."""
        if not victims:
            return 0, 0
        now = self._now()
        hist = topic.history
        batch = self.store.batch(topic.name, current=topic.persistent, history=hist is not None and topic.persistent)
        seq = self.last_seq
        for key in victims:
            seq += 1
            old = topic.records[key]
            batch.remove(seq, now, key, old.raw, op)
            if hist is not None and hist.drops(old, now):
                batch.drop_history(key, old.bookmark)
        batch.commit()
        first = self.last_seq + 1
        self.last_seq = seq
        changes = []
        for bookmark, key in enumerate(victims, first):
            changes.append(Change(topic.name, key, bookmark, now, topic.remove(key, bookmark, now), None, reason))
        self._fan_out(topic.name, changes, now)
        return len(victims), seq

    def expire_due(self) -> int:
        """X-1: remove every record whose time to live has passed; returns how many.

        Raises:
            StorageFull, StorageFailed: the expirations could not be written; the records stay
                queued and expire once writes succeed again.
        """
        now = self.clock()
        due = self.expiry.pop_due(now)
        if not due:
            return 0
        by_topic: dict[str, list[str]] = {}
        for topic_name, sow_key, bookmark in due:
            rec = self.topics[topic_name].records.get(sow_key)
            if rec is not None and rec.bookmark == bookmark:  # not replaced or deleted since
                by_topic.setdefault(topic_name, []).append(sow_key)
        count = 0
        for topic_name, keys in by_topic.items():
            topic = self.topics[topic_name]
            try:
                count += self._delete(topic, keys, op=OP_EXPIRE, reason=OOF_EXPIRED)[0]
            except SowdbError:
                for key in keys:
                    self.expiry.add(topic.records[key])
                raise
        return count

    @property
    def writable(self) -> bool:
        """Whether changes can be written now (False while the storage is failed)."""
        return self.store.writable

    def recover_storage(self) -> bool:
        """Try to make the storage writable again after a failed write (a full disk); returns
        whether it is. A write that was reported as failed but reached RocksDB's log anyway
        is rolled back, so that the store holds exactly what was acknowledged (J-1)."""
        if self.store.writable:
            return True
        if not self.store.reopen():
            return False
        if self.store.last_sequence() > self.last_seq:
            current: dict[tuple[str, str], tuple[int, int, int, bytes] | None] = {}
            for e in self.store.iter_journal(self.last_seq):
                topic = self.topics.get(e.topic)
                if topic is not None and topic.persistent:
                    rec = topic.records.get(e.sow_key)
                    current[(e.topic, e.sow_key)] = (
                        None if rec is None else (rec.bookmark, rec.timestamp_us, rec.expiry_us, rec.raw)
                    )
            history = {name for name, t in self.topics.items() if t.persistent and t.history is not None}
            self.store.roll_back(self.last_seq, current, history)
        return True

    def trim_history(self) -> bool:
        """H-1: drop versions older than each topic's window (the state at the window's start
        is kept). Does a bounded amount of work; returns True when more is waiting."""
        now = self.clock()
        more = False
        for topic in self.topics.values():
            hist = topic.history
            if hist is None:
                continue
            removed, left = hist.trim(topic.records, now - hist.window_us, HISTORY_TRIM_BATCH)
            more = more or left
            if not removed:
                continue
            floor = max(self.history_floor.get(topic.name, 0), max(seq for _, seq in removed))
            self.history_floor[topic.name] = floor
            if topic.persistent:
                self.store.trim_history(topic.name, removed, floor)
        return more

    def trim_journal(self) -> int:
        """Journal retention: remove entries older than ``journal_max_age``, beyond the newest
        ``journal_max_entries``, or beyond about ``journal_max_bytes`` on disk; returns the last
        removed sequence (0: none yet)."""
        cfg = self.config.server
        trimmed = self.store.journal_trimmed()
        upto = trimmed
        if cfg.journal_max_entries:
            upto = max(upto, self.last_seq - cfg.journal_max_entries)
        if cfg.journal_max_age_s:
            cutoff = self.clock() - int(cfg.journal_max_age_s * 1_000_000)
            upto = max(upto, self._seq_at(cutoff, inclusive=False))
        if cfg.journal_max_bytes:
            size = self.store.journal_bytes()
            if size > cfg.journal_max_bytes:
                # keep the share of the newest entries that fits, assuming entries of even size;
                # the trimmed range is compacted at once, so the next look sees the new size
                kept = int((self.last_seq - trimmed) * cfg.journal_max_bytes / size)
                upto = max(upto, self.last_seq - kept)
        if upto > trimmed:
            self.store.trim_journal(upto)
            log.info("journal retention: removed bookmarks %d..%d", trimmed + 1, upto)
        return upto

    def flush_conflated(self) -> int:
        """C-2: refresh every conflated topic whose interval has passed; returns the changes."""
        now = self.clock()
        count = 0
        for d in list(self.derived.values()):
            if isinstance(d, ConflatedTopic):
                out = d.flush(now)
                if out:
                    count += len(out)
                    self._fan_out(d.name, out, now)
        return count
