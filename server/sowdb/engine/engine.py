"""The engine: topics, the single-writer publish pipeline, deletes and queries.

One writer, one total order: every publish, delete (and later expiration) runs synchronously
on the event loop from validation to the RocksDB write and the in-memory update, so sequence
numbers are handed out in exactly the order changes are applied, and nothing else observes a
half-applied batch. A publish request is validated completely before it gets any sequence
number; a refused request therefore changes nothing and leaves no gap in the journal.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

import orjson

from sowdb.config import Config, is_regex_topic
from sowdb.engine.query import PreparedQuery, QueryEvent, QueryOptions
from sowdb.engine.records import StoredRecord, check_sow_key, decode_document, merge_delta
from sowdb.engine.subscriptions import (
    DEFAULT_OPTIONS,
    OOF_DELETED,
    Change,
    Subscription,
    SubscriptionHub,
    SubscriptionOptions,
)
from sowdb.engine.topic import SowTopic
from sowdb.errors import (
    ExpressionError,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PublishError,
    SowdbError,
)
from sowdb.expr import CompiledFilter, compile_filter
from sowdb.storage import Store
from sowdb.storage.keys import OP_PUBLISH

log = logging.getLogger("sowdb.engine")

Clock = Callable[[], int]
"""Returns the time in microseconds since the epoch; injectable so tests control time."""


def system_clock() -> int:
    return time.time_ns() // 1000


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


@dataclass(frozen=True)
class TopicSummary:
    """What ListTopics reports about one topic."""

    name: str
    kind: str  # "sow", "view" or "conflated"
    key: tuple[str, ...]
    durability: str
    history: tuple[float, float] | None
    record_count: int
    indexes: tuple[str, ...]
    underlying: str
    expiration_s: float


class Engine:
    """Owns the topics and the store; the servicer's only way to read or change state."""

    def __init__(self, config: Config, store: Store, *, clock: Clock = system_clock) -> None:
        self.config = config
        self.store = store
        self.clock = clock
        self.max_document_bytes = config.server.max_document_bytes
        self.topics: dict[str, SowTopic] = {t.name: SowTopic(t) for t in config.topics}
        self._derived = {v.name: "view" for v in config.views} | {c.name: "conflated" for c in config.conflated_topics}
        self.last_seq = store.last_sequence()
        self.hub = SubscriptionHub()
        # top-level key field names per topic, which delta subscriptions always send (D-2)
        self._key_fields = {t.name: tuple(p.lstrip("/") for p in t.key if p.count("/") == 1) for t in config.topics}
        self._load()

    def _load(self) -> None:
        """Load the persistent topics' records from ``current``."""
        loads = orjson.loads
        for topic_name, sow_key, value in self.store.load_current():
            topic = self.topics.get(topic_name)
            if topic is None or not topic.persistent:
                continue  # a topic no longer configured keeps its data on disk, unused
            data = loads(value.payload)
            topic.put(
                StoredRecord(
                    topic_name, sow_key, data, value.payload, value.bookmark, value.timestamp_us, value.expiry_us
                )
            )
        self._rebuild_transient()

    def _rebuild_transient(self) -> None:
        """J-3: transient topics keep no ``current``; replay their journal entries.

        The whole retained journal is read once (retention and recovery points come with the
        history/journal work); a log line gives counts and time.
        """
        transient = {name for name, t in self.topics.items() if not t.persistent}
        if not transient:
            return
        started = time.perf_counter()
        applied = 0
        loads = orjson.loads
        for e in self.store.iter_journal():
            if e.topic not in transient:
                continue
            topic = self.topics[e.topic]
            if e.op == OP_PUBLISH:
                topic.put(
                    StoredRecord(e.topic, e.sow_key, loads(e.payload), e.payload, e.seq, e.timestamp_us, e.expiry_us)
                )
            else:
                topic.remove(e.sow_key)
            applied += 1
        log.info(
            "rebuilt %d transient topic(s) from the journal: %d entries in %.2f s",
            len(transient),
            applied,
            time.perf_counter() - started,
        )

    def close(self) -> None:
        self.store.close()

    # --- publish ------------------------------------------------------------------------------

    def publish(
        self,
        topic_name: str,
        messages: Sequence[MessageLike],
        *,
        delta: bool = False,
        ttls: Sequence[float | None] | None = None,
    ) -> tuple[int, int]:
        """Apply one atomic batch; returns the (first, last) bookmark assigned.

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
        if topic_name in self._derived:
            raise FailedPrecondition(
                f"{topic_name!r} is a {self._derived[topic_name]} topic, which is read-only; publish to its "
                "underlying topic",
                field="topic",
            )
        if not messages:
            raise InvalidArgument("a publish request needs at least one message", field="messages")
        if ttls is not None and len(ttls) != len(messages):
            raise InvalidArgument("one ttl per message", field="messages")
        topic = self.topics.get(topic_name)
        now = self.clock()
        if topic is None:
            return self._publish_plain(topic_name, messages, now)
        keys = topic.keys
        default_ttl = topic.config.expiration_s
        batch = self.store.batch(topic_name, current=topic.persistent, history=topic.config.history is not None)
        write = batch.publish
        pending: dict[str, StoredRecord] = {}  # this batch's latest version per key, for deltas
        versions: list[StoredRecord] = []
        append = versions.append
        seq = self.last_seq
        decode = decode_document
        max_bytes = self.max_document_bytes
        for i, msg in enumerate(messages):
            try:
                raw = msg.data
                data = decode(raw, max_bytes)
                if keys is None:
                    check_sow_key(msg.sow_key)
                    sow_key = msg.sow_key
                elif msg.sow_key:
                    raise InvalidArgument(
                        f"topic {topic_name!r} derives SowKeys from {', '.join(keys.paths)}; leave sow_key empty",
                        field="sow_key",
                    )
                else:
                    sow_key = keys.sow_key(data)
                if delta:
                    old = pending.get(sow_key) or topic.records.get(sow_key)
                    if old is not None and old.data is not None:
                        data = merge_delta(old.data, data)
                        raw = orjson.dumps(data)
            except SowdbError as exc:
                raise PublishError(i, exc) from None
            ttl = default_ttl if ttls is None or ttls[i] is None else ttls[i]
            expiry = now + int(ttl * 1e6) if ttl else 0
            seq += 1
            rec = StoredRecord(topic_name, sow_key, data, raw, seq, now, expiry)
            write(seq, now, sow_key, raw, expiry)
            append(rec)
            if delta:
                pending[sow_key] = rec
        batch.commit()
        first = self.last_seq + 1
        self.last_seq = seq
        put = topic.put
        if self.hub:
            changes = [Change(topic_name, r.sow_key, r.bookmark, now, put(r), r) for r in versions]
            self.hub.dispatch(topic_name, changes)
        else:
            for rec in versions:
                put(rec)
        return first, seq

    def _publish_plain(self, topic_name: str, messages: Sequence[MessageLike], now: int) -> tuple[int, int]:
        """K-5: a topic without a SOW is journaled (for subscribers and replay), not stored."""
        batch = self.store.batch(topic_name, current=False, history=False)
        seq = self.last_seq
        live: list[Change] = []
        for i, msg in enumerate(messages):
            try:
                data = decode_document(msg.data, self.max_document_bytes)
                if msg.sow_key:
                    check_sow_key(msg.sow_key)
            except SowdbError as exc:
                raise PublishError(i, exc) from None
            seq += 1
            batch.publish(seq, now, msg.sow_key, msg.data)
            if self.hub:
                rec = StoredRecord(topic_name, msg.sow_key, data, msg.data, seq, now)
                live.append(Change(topic_name, msg.sow_key, seq, now, None, rec))
        batch.commit()
        first = self.last_seq + 1
        self.last_seq = seq
        if live:
            self.hub.dispatch(topic_name, live)
        return first, seq

    # --- delete -------------------------------------------------------------------------------

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
        flt = _request_filter(filter)
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

    def _delete(self, topic: SowTopic, victims: list[str]) -> tuple[int, int]:
        if not victims:
            return 0, 0
        now = self.clock()
        batch = self.store.batch(topic.name, current=topic.persistent, history=topic.config.history is not None)
        seq = self.last_seq
        for key in victims:
            seq += 1
            batch.remove(seq, now, key)
        batch.commit()
        first = self.last_seq + 1
        self.last_seq = seq
        changes = []
        for bookmark, key in enumerate(victims, first):
            old = topic.remove(key)
            changes.append(Change(topic.name, key, bookmark, now, old, None, OOF_DELETED))
        if self.hub:
            self.hub.dispatch(topic.name, changes)
        return len(victims), seq

    # --- queries ------------------------------------------------------------------------------

    def sow(self, opts: QueryOptions) -> AsyncIterator[QueryEvent]:
        """Prepare and run a SOW query (all validation happens before the first event).

        Raises:
            InvalidArgument, FailedPrecondition, Unimplemented: before any event is produced.
        """
        query = PreparedQuery(opts)
        topics = self.query_topics(opts.topic)
        sources = query.snapshot(topics)
        return query.run(sources, self.last_seq, self.clock())

    # --- subscriptions -------------------------------------------------------------------------

    def subscribe(
        self,
        topic: str,
        *,
        filter: str = "",
        options: SubscriptionOptions = DEFAULT_OPTIONS,
        sub_id: str = "",
        owner: str = "",
    ) -> Subscription:
        """Place a subscription without a query; it is live at once.

        Raises:
            InvalidArgument: a bad topic pattern, filter or sub_id.
        """
        sub = self._new_subscription(topic, filter, options, sub_id, owner)
        self.hub.add(sub)
        return sub

    def sow_and_subscribe(
        self,
        opts: QueryOptions,
        *,
        options: SubscriptionOptions = DEFAULT_OPTIONS,
        sub_id: str = "",
        owner: str = "",
    ) -> tuple[Subscription, AsyncIterator[QueryEvent]]:
        """Query and subscribe at one point (S-1): the snapshot is taken and the subscription
        registered in the same synchronous step; changes after that point are held by the
        subscription until :meth:`Subscription.release` (after the query's group_end).

        A topic without a SOW gives an empty result, then live messages (S-2).
        """
        query = PreparedQuery(opts)
        if is_regex_topic(opts.topic):
            topics = self.query_topics(opts.topic)
        else:
            self._check_topic_name(opts.topic)
            if opts.topic in self._derived:
                raise FailedPrecondition(
                    f"{self._derived[opts.topic]} topics are not subscribable in this version", field="topic"
                )
            topics = [self.topics[opts.topic]] if opts.topic in self.topics else []
        sub = self._new_subscription(opts.topic, opts.filter, options, sub_id, owner, track=True)
        sub.held = []
        sources = query.snapshot(topics)
        self.hub.add(sub)
        return sub, query.run(sources, self.last_seq, self.clock())

    def unsubscribe(self, sub: Subscription) -> None:
        self.hub.remove(sub)

    def replace_subscription(
        self, sub_id: str, *, owner: str, filter: str = "", options: SubscriptionOptions = DEFAULT_OPTIONS
    ) -> int:
        """R-1: new filter and options for a live subscription; returns the sequence point at
        which they took effect. Only the connection that placed it may replace it.

        Raises:
            NotFound: no such subscription on this connection.
            FailedPrecondition: its query has not finished yet.
            InvalidArgument: a bad filter (the subscription is unchanged).
        """
        sub = self.hub.subs.get(sub_id)
        if sub is None or sub.owner != owner:
            raise NotFound(f"no live subscription {sub_id!r} on this connection", field="sub_id")
        if sub.held is not None:
            raise FailedPrecondition("the subscription's query is still being sent; replace it after group_end")
        compiled = _request_filter(filter)
        options = replace(options, deleted_events=sub.options.deleted_events and not options.oof)
        state = [t.records for name, t in sorted(self.topics.items()) if sub.wants(name)]
        sub.replace(compiled, options, state)
        self.hub.refilter(sub)
        return self.last_seq

    def _new_subscription(
        self, topic: str, filter: str, options: SubscriptionOptions, sub_id: str, owner: str, *, track: bool = False
    ) -> Subscription:
        self._check_topic_name(topic)
        if is_regex_topic(topic):
            try:
                re.compile(topic)
            except re.error as exc:
                raise InvalidArgument(
                    f"topic {topic!r} is not a valid regular expression: {exc}", field="topic"
                ) from None
        compiled = _request_filter(filter)
        if sub_id and (len(sub_id) > 256 or not sub_id.isprintable()):
            raise InvalidArgument("sub_id must be at most 256 printable characters", field="sub_id")
        return Subscription(
            topic,
            compiled,
            options,
            sub_id=sub_id,
            owner=owner,
            key_fields=self._key_fields,
            track=track,
            max_records=self.config.server.subscriber_queue_records,
            max_bytes=self.config.server.subscriber_queue_bytes,
        )

    def query_topics(self, pattern: str) -> list[SowTopic]:
        """The SOW topics a query's topic names (Q-3, Q-4)."""
        if is_regex_topic(pattern):
            try:
                rx = re.compile(pattern)
            except re.error as exc:
                raise InvalidArgument(
                    f"topic {pattern!r} is not a valid regular expression: {exc}", field="topic"
                ) from None
            return [t for name, t in sorted(self.topics.items()) if rx.search(name)]
        return [self._sow_topic(pattern)]

    def _sow_topic(self, name: str) -> SowTopic:
        self._check_topic_name(name)
        topic = self.topics.get(name)
        if topic is not None:
            return topic
        if name in self._derived:
            raise FailedPrecondition(f"{self._derived[name]} topics are not queryable in this version", field="topic")
        raise FailedPrecondition(
            f"topic {name!r} is not a SOW topic (configured SOW topics: {', '.join(sorted(self.topics)) or 'none'})",
            field="topic",
        )

    @staticmethod
    def _check_topic_name(name: str) -> None:
        if not name:
            raise InvalidArgument("topic is required", field="topic")
        if "\x00" in name or len(name) > 1024:
            raise InvalidArgument("topic must be at most 1024 characters without NUL", field="topic")

    def list_topics(self) -> list[TopicSummary]:
        out = []
        for t in self.config.topics:
            h = t.history
            out.append(
                TopicSummary(
                    t.name,
                    "sow",
                    t.key,
                    t.durability,
                    (h.window_s, h.granularity_s) if h else None,
                    len(self.topics[t.name].records),
                    t.indexes,
                    "",
                    t.expiration_s,
                )
            )
        for v in self.config.views:
            out.append(TopicSummary(v.name, "view", (), "transient", None, 0, (), v.underlying, 0.0))
        for c in self.config.conflated_topics:
            out.append(TopicSummary(c.name, "conflated", (), "transient", None, 0, (), c.underlying, 0.0))
        return sorted(out, key=lambda s: s.name)


def _request_filter(text: str) -> CompiledFilter | None:
    """The compiled filter of a request (None when empty), its errors attributed to ``filter``."""
    if not text.strip():
        return None
    try:
        return compile_filter(text)
    except ExpressionError as exc:
        raise exc.for_field("filter") from None
