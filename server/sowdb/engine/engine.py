"""The engine: topics, the single-writer publish pipeline, deletes and queries.

One writer, one total order: every publish, delete (and later expiration) runs synchronously
on the event loop from validation to the RocksDB write and the in-memory update, so sequence
numbers are handed out in exactly the order changes are applied, and nothing else observes a
half-applied batch. A publish request is validated completely before it gets any sequence
number; a refused request therefore changes nothing and leaves no gap in the journal.
"""

from __future__ import annotations

import gc
import logging
import re
import secrets
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

import orjson

from sowdb.config import Config, is_regex_topic
from sowdb.engine.bookmarks import Point, last_seq_at_or_before, parse_bookmark
from sowdb.engine.derived import ConflatedTopic, Derived, View, derived_order
from sowdb.engine.expiry import ExpiryQueue
from sowdb.engine.pages import PagedSubscription, ResultSet
from sowdb.engine.query import AsOf, GroupBegin, GroupEnd, PreparedQuery, QueryEvent, QueryOptions, RecordBatch
from sowdb.engine.records import StoredRecord, check_sow_key, decode_document, merge_delta
from sowdb.engine.recovery import StoreDamaged, load_state, rebuild, replay_into_store
from sowdb.engine.replay import replay_changes
from sowdb.engine.subscriptions import (
    DEFAULT_OPTIONS,
    OOF_DELETED,
    OOF_EXPIRED,
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
    OutOfRange,
    PublishError,
    SowdbError,
)
from sowdb.expr import Aggregation, CompiledFilter, compile_filter
from sowdb.storage import Store
from sowdb.storage.keys import OP_DELETE, OP_EXPIRE

HISTORY_TRIM_BATCH = 50_000

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
        self._derived = {v.name: "view" for v in config.views} | {c.name: "conflated" for c in config.conflated_topics}
        self.hub = SubscriptionHub()
        self._private: dict[str, View] = {}  # sub_id -> the private view of an aggregated subscription
        self._result_sets: dict[tuple[str, str, str], ResultSet] = {}  # (topic, filter, order) -> shared set
        self._paged_topics: dict[str, list[ResultSet]] = {}
        self.expiry = ExpiryQueue()
        # top-level key field names per topic, which delta subscriptions always send (D-2)
        self._key_fields = {t.name: tuple(p.lstrip("/") for p in t.key if p.count("/") == 1) for t in config.topics}
        self.recovery = replay_into_store(store, config)  # J-2: the journal ahead of current/history
        self.last_seq = store.last_sequence()
        last = store.journal_entry(self.last_seq) if self.last_seq else None
        self.last_ts = last.timestamp_us if last is not None else 0
        try:
            self._load()
        except StoreDamaged as exc:
            log.error("a stored record cannot be read (%s); rebuilding current and history from the journal", exc)
            self.recovery = rebuild(store, config)
            self._load()

    def _load(self) -> None:
        self.topics: dict[str, SowTopic] = {t.name: SowTopic(t) for t in self.config.topics}
        self.expiry = ExpiryQueue()
        # Loading allocates millions of long-lived objects and no cycles; the cyclic collector
        # would re-scan all of them again and again (a fifth of the load time, measured).
        enabled = gc.isenabled()
        gc.disable()
        try:
            self.history_floor = load_state(self.store, self.config, self.topics, self.expiry, self.clock())
            self._load_derived()
        finally:
            if enabled:
                gc.enable()

    def _load_derived(self) -> None:
        """Views and conflated topics, each computed from its underlying topic's state."""
        self.derived: dict[str, Derived] = {}
        self._downstream: dict[str, list[Derived]] = {}
        now = self.clock()
        for c in derived_order(self.config.views, self.config.conflated_topics):
            d: Derived = (
                View.from_config(c)
                if c.name in {v.name for v in self.config.views}
                else (ConflatedTopic.from_config(c))
            )
            d.load(list(self.topics[d.underlying].records.values()), now)
            self._attach(d)
            self.topics[d.name] = d.topic

    def _attach(self, d: Derived) -> None:
        self.derived[d.name] = d
        self._downstream.setdefault(d.underlying, []).append(d)

    def _detach(self, d: Derived) -> None:
        del self.derived[d.name]
        self._downstream[d.underlying].remove(d)

    def _fan_out(self, topic_name: str, changes: list[Change], now: int) -> None:
        """Hand applied changes to subscribers, to paginated result sets (P-1) and to the topics
        derived from ``topic_name`` (V-1, C-2), whose own changes go the same way — all in the
        writer's step, so everything downstream keeps the one total order."""
        if self.hub:
            self.hub.dispatch(topic_name, changes)
        for rs in self._paged_topics.get(topic_name, ()):
            touched = rs.apply(changes)
            changed: dict[str, Change] | None = None
            for page in rs.pages:
                if page.touched_by(touched):
                    changed = changed or {c.sow_key: c for c in changes}
                    page.refresh(changed)
        for d in self._downstream.get(topic_name, ()):
            out = d.apply(changes, now)
            if out:
                self._fan_out(d.name, out, now)

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

    def close(self) -> None:
        self.store.close()

    def _now(self) -> int:
        """The writer's clock: never behind the last journal timestamp, so timestamps are
        non-decreasing in bookmark order and a timestamp names one point (H-2)."""
        now = self.clock()
        if now < self.last_ts:
            now = self.last_ts
        self.last_ts = now
        return now

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
        now = self._now()
        if topic is None:
            return self._publish_plain(topic_name, messages, now)
        keys = topic.keys
        default_ttl = topic.config.expiration_s
        hist = topic.history
        thinning = hist is not None and hist.granularity_us > 0
        batch = self.store.batch(topic_name, current=topic.persistent, history=hist is not None and topic.persistent)
        write = batch.publish
        pending: dict[str, StoredRecord] = {}  # this batch's latest version per key (deltas, granularity)
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
            if thinning:
                assert hist is not None
                previous = pending.get(sow_key) or topic.head(sow_key)
                if hist.drops(previous, now):
                    assert previous is not None
                    batch.drop_history(sow_key, previous.bookmark)
            if delta or thinning:
                pending[sow_key] = rec
        batch.commit()
        first = self.last_seq + 1
        self.last_seq = seq
        put = topic.put
        if expiry or ttls is not None:
            for rec in versions:
                if rec.expiry_us:
                    self.expiry.add(rec)
        if self.hub or topic_name in self._downstream:
            self._fan_out(
                topic_name, [Change(topic_name, r.sow_key, r.bookmark, now, put(r), r) for r in versions], now
            )
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
        if topic_name in self._derived:
            raise FailedPrecondition(
                f"{topic_name!r} is a {self._derived[topic_name]} topic, which is read-only; delete from its "
                "underlying topic",
                field="topic",
            )
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

    # --- upkeep: expiration, history trimming, journal retention ----------------------------------

    def expire_due(self) -> int:
        """X-1: remove every record whose time to live has passed; returns how many."""
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
            count += self._delete(self.topics[topic_name], keys, op=OP_EXPIRE, reason=OOF_EXPIRED)[0]
        return count

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
        """Journal retention: remove entries older than ``journal_max_age`` or beyond the newest
        ``journal_max_entries``; returns the last removed sequence (0: none yet)."""
        cfg = self.config.server
        trimmed = self.store.journal_trimmed()
        upto = trimmed
        if cfg.journal_max_entries:
            upto = max(upto, self.last_seq - cfg.journal_max_entries)
        if cfg.journal_max_age_s:
            cutoff = self.clock() - int(cfg.journal_max_age_s * 1_000_000)
            upto = max(upto, self._seq_at(cutoff, inclusive=False))
        if upto > trimmed:
            self.store.trim_journal(upto)
            log.info("journal retention: removed bookmarks %d..%d", trimmed + 1, upto)
        return upto

    def _seq_at(self, timestamp_us: int, *, inclusive: bool = True) -> int:
        """The last retained sequence with a timestamp ≤ (or <) ``timestamp_us``; the last
        trimmed sequence when none is."""
        store = self.store

        def timestamp_of(seq: int) -> int | None:
            e = store.journal_entry(seq)
            return None if e is None else e.timestamp_us

        target = timestamp_us if inclusive else timestamp_us - 1
        return last_seq_at_or_before(target, store.journal_trimmed() + 1, self.last_seq, timestamp_of)

    # --- queries ------------------------------------------------------------------------------

    def sow(self, opts: QueryOptions) -> AsyncIterator[QueryEvent]:
        """Prepare and run a SOW query (all validation happens before the first event).

        Raises:
            InvalidArgument, FailedPrecondition, Unimplemented: before any event is produced.
        """
        query = PreparedQuery(opts)
        topics = self.query_topics(opts.topic)
        point = parse_bookmark(opts.bookmark) if opts.bookmark.strip() else None
        if point is not None and not point.now:
            as_of = self._as_of(topics, point)
            return query.run(query.snapshot_heads(topics, as_of), as_of.seq, self.clock(), as_of=as_of)
        sources = query.snapshot(topics)
        return query.run(sources, self.last_seq, self.clock())

    def _as_of(self, topics: list[SowTopic], point: Point, field: str = "bookmark") -> AsOf:
        """Where a historical query looks (H-2), and which topics' windows no longer reach it.

        Raises:
            FailedPrecondition: a topic keeps no history.
            InvalidArgument: a sequence number after the latest one.
        """
        bare = [t.name for t in topics if t.history is None]
        if bare:
            raise FailedPrecondition(
                f"topic {bare[0]!r} keeps no history, so it cannot be queried as of a bookmark; give it "
                'history = { window = "1d" } in the config, or query without a bookmark',
                field=field,
            )
        ts: int | None
        if point.seq is not None:
            seq = point.seq
            if seq > self.last_seq:
                raise InvalidArgument(f"bookmark {seq} is after the latest bookmark {self.last_seq}", field=field)
            entry = self.store.journal_entry(seq) if seq else None
            ts = 0 if seq == 0 else (entry.timestamp_us if entry is not None else None)
        else:
            assert point.timestamp_us is not None
            ts = point.timestamp_us
            seq = self._seq_at(ts)
        now = self.clock()
        gone = set()
        for t in topics:
            assert t.history is not None
            # a sequence number the journal no longer holds is placed by what trimming removed
            floor = self.history_floor.get(t.name, 0)
            if (ts < now - t.history.window_us) if ts is not None else seq <= floor:
                gone.add(t.name)
        return AsOf(seq, ts if point.timestamp_us is not None else None, frozenset(gone))

    # --- subscriptions -------------------------------------------------------------------------

    def subscribe(
        self,
        topic: str,
        *,
        filter: str = "",
        options: SubscriptionOptions = DEFAULT_OPTIONS,
        sub_id: str = "",
        owner: str = "",
        bookmark: str = "",
    ) -> Subscription:
        """Place a subscription without a query. With a bookmark it is placed held, with
        ``replay_from`` set: the journal after the bookmark is replayed first (H-4).

        Raises:
            InvalidArgument: a bad topic pattern, filter, sub_id or bookmark.
            OutOfRange: the journal no longer reaches back to the bookmark.
        """
        sub = self._new_subscription(topic, filter, options, sub_id, owner)
        if bookmark.strip() and topic in self._derived:
            raise FailedPrecondition(
                f"{topic!r} is a {self._derived[topic]} topic, which keeps no journal to replay; subscribe without a "
                "bookmark, or to its underlying topic",
                field="bookmark",
            )
        if bookmark.strip():
            sub.replay_from = (self._replay_start(parse_bookmark(bookmark)), self.last_seq)
            sub.held = []
        self.hub.add(sub)
        return sub

    def _replay_start(self, point: Point, field: str = "bookmark") -> int:
        """The sequence a replay starts after.

        ``0`` means the start of the retained journal; a timestamp, the last entry at or
        before it.

        Raises:
            OutOfRange: the point is older than the retained journal.
            InvalidArgument: a sequence number after the latest one.
        """
        trimmed = self.store.journal_trimmed()
        if point.now:
            return self.last_seq
        if point.seq == 0:
            return trimmed
        if point.seq is not None:
            after = point.seq
            if after > self.last_seq:
                raise InvalidArgument(f"bookmark {after} is after the latest bookmark {self.last_seq}", field=field)
        else:
            assert point.timestamp_us is not None
            after = self._seq_at(point.timestamp_us)
            if after == trimmed and trimmed:
                entry = self.store.journal_entry(trimmed + 1)
                if entry is None or entry.timestamp_us > point.timestamp_us:
                    after = -1  # older than everything retained
        if after < trimmed:
            raise OutOfRange(
                f"bookmark {point.seq if point.seq is not None else 'at that time'} is older than the retained "
                f"journal, which starts after bookmark {trimmed}; resubscribe from {trimmed} or later (or query "
                "the current state)",
                oldest_bookmark=trimmed,
                field=field,
            )
        return after

    def replay(self, sub: Subscription) -> AsyncIterator[list[Change]]:
        """The journal changes a subscription placed with a bookmark must see first."""
        assert sub.replay_from is not None
        after, upto = sub.replay_from
        return replay_changes(
            self.store,
            wants=sub.wants,
            sow_topics=self.topics,
            after=after,
            upto=upto,
            track_old=sub.options.delta,
        )

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
        if query.aggregation is not None:
            if opts.skip_n is not None:
                raise InvalidArgument("a subscription is either aggregated or paginated, not both", field="skip_n")
            return self._aggregated_subscription(opts, query.aggregation, options, sub_id, owner)
        if opts.skip_n is not None:
            return self._paged_subscription(opts, query, options, sub_id, owner)
        if is_regex_topic(opts.topic):
            topics = self.query_topics(opts.topic)
        else:
            self._check_topic_name(opts.topic)
            topics = [self.topics[opts.topic]] if opts.topic in self.topics else []
        sub = self._new_subscription(opts.topic, opts.filter, options, sub_id, owner, track=True)
        sub.held = []
        point = parse_bookmark(opts.bookmark) if opts.bookmark.strip() else None
        if point is not None and not point.now:
            # H-3: the state as of the bookmark, the journal after it, then live
            as_of = self._as_of(topics, point)
            sub.replay_from = (self._replay_start(Point(seq=as_of.seq) if as_of.seq else point), self.last_seq)
            events = query.run(query.snapshot_heads(topics, as_of), as_of.seq, self.clock(), as_of=as_of)
        else:
            events = query.run(query.snapshot(topics), self.last_seq, self.clock())
        self.hub.add(sub)
        return sub, events

    def _aggregated_subscription(
        self, opts: QueryOptions, aggregation: Aggregation, options: SubscriptionOptions, sub_id: str, owner: str
    ) -> tuple[Subscription, AsyncIterator[QueryEvent]]:
        """Q-8 live: a private view of the topic (grouping, projection, filter) is created from
        its current state, and the subscription follows that view: each change to a member
        record updates its group, and an emptied group leaves with an oof ``deleted``."""
        if opts.bookmark.strip():
            raise InvalidArgument(
                "an aggregated subscription follows the current state; query as of a bookmark with Sow",
                field="bookmark",
            )
        if is_regex_topic(opts.topic):
            raise InvalidArgument("an aggregated subscription reads one topic, not a pattern", field="topic")
        underlying = self._sow_topic(opts.topic)
        view = View(f"\x00aggregate {secrets.token_hex(8)}", opts.topic, aggregation, opts.filter)
        view.load(list(underlying.records.values()), self.clock())
        sub = self._new_subscription(view.name, "", options, sub_id, owner, track=True, check_name=False)
        sub.held = []
        inner = PreparedQuery(replace(opts, topic=view.name, filter="", grouping=(), projection=()))
        events = inner.run(inner.snapshot([view.topic]), self.last_seq, self.clock())
        self.hub.add(sub)
        self._attach(view)
        self._private[sub.id] = view
        return sub, events

    def _paged_subscription(
        self, opts: QueryOptions, query: PreparedQuery, options: SubscriptionOptions, sub_id: str, owner: str
    ) -> tuple[Subscription, AsyncIterator[QueryEvent]]:
        """P-1: the window ``[skip_n, skip_n + top_n)`` of the topic's matching records in
        ``order_by`` order (SowKey order when none), kept live. The first window is the query's
        result, taken in the same step that registers the page."""
        if opts.bookmark.strip():
            raise InvalidArgument("a paginated subscription follows the current state", field="bookmark")
        if is_regex_topic(opts.topic):
            raise InvalidArgument("a paginated subscription reads one topic, not a pattern", field="topic")
        topic = self._sow_topic(opts.topic)
        sub = self._new_subscription(opts.topic, opts.filter, options, sub_id, owner, cls=PagedSubscription)
        assert isinstance(sub, PagedSubscription) and opts.top_n is not None
        rs = self._result_set(topic, query)
        sub.bind(rs, opts.skip_n or 0, opts.top_n)
        window = rs.window(sub.skip, sub.top)
        sub.shown = {r.sow_key: r for r in window}
        self.hub.add(sub)
        rs.pages.append(sub)
        return sub, _page_events(query, window, len(rs.sorted), self.last_seq)

    def _result_set(self, topic: SowTopic, query: PreparedQuery) -> ResultSet:
        """The shared result set of (topic, filter, order), created from the topic's state."""
        key = (topic.name, query.opts.filter.strip(), query.opts.order_by.strip())
        rs = self._result_sets.get(key)
        if rs is None:
            rs = self._result_sets[key] = ResultSet(key, query.filter, query.order)
            rs.load(list(topic.records.values()))
            self._paged_topics.setdefault(topic.name, []).append(rs)
        return rs

    def _release_page(self, sub: PagedSubscription) -> None:
        rs = sub.result_set
        rs.pages.remove(sub)
        if not rs.pages:
            del self._result_sets[rs.key]
            self._paged_topics[rs.key[0]].remove(rs)

    def unsubscribe(self, sub: Subscription) -> None:
        self.hub.remove(sub)
        if isinstance(sub, PagedSubscription) and sub in sub.result_set.pages:
            self._release_page(sub)
        view = self._private.pop(sub.id, None)
        if view is not None:
            self._detach(view)

    def replace_subscription(
        self,
        sub_id: str,
        *,
        owner: str,
        filter: str = "",
        options: SubscriptionOptions = DEFAULT_OPTIONS,
        order_by: str = "",
        top_n: int | None = None,
        skip_n: int | None = None,
    ) -> int:
        """R-1: new filter and options for a live subscription; returns the sequence point at
        which they took effect. Only the connection that placed it may replace it.

        Raises:
            NotFound: no such subscription on this connection.
            FailedPrecondition: its query has not finished yet.
            InvalidArgument: a bad filter or page (the subscription is unchanged).
        """
        sub = self.hub.subs.get(sub_id)
        if sub is None or sub.owner != owner:
            raise NotFound(f"no live subscription {sub_id!r} on this connection", field="sub_id")
        if sub.held is not None:
            raise FailedPrecondition("the subscription's query is still being sent; replace it after group_end")
        if sub.id in self._private:
            raise FailedPrecondition(
                "an aggregated subscription cannot be replaced; end it and subscribe again", field="sub_id"
            )
        if isinstance(sub, PagedSubscription):
            self._replace_page(sub, filter, options, order_by, top_n, skip_n)
            return self.last_seq
        if top_n is not None or skip_n is not None or order_by.strip():
            raise InvalidArgument("only a paginated subscription takes top_n, skip_n and order_by", field="top_n")
        compiled = _request_filter(filter)
        options = replace(options, deleted_events=sub.options.deleted_events and not options.oof)
        state = [t.records for name, t in sorted(self.topics.items()) if sub.wants(name)]
        sub.replace(compiled, options, state)
        self.hub.refilter(sub)
        return self.last_seq

    def _replace_page(
        self,
        sub: PagedSubscription,
        filter: str,
        options: SubscriptionOptions,
        order_by: str,
        top_n: int | None,
        skip_n: int | None,
    ) -> None:
        """R-1 for a page: the page is defined again (top_n, skip_n, order_by); records now in
        the window that the subscriber does not hold are delivered, those that left get an oof."""
        if top_n is None:
            raise InvalidArgument(
                "a paginated subscription is replaced with its page: give top_n (and skip_n, order_by) again",
                field="top_n",
            )
        query = PreparedQuery(QueryOptions(sub.topic, filter=filter, order_by=order_by, top_n=top_n, skip_n=skip_n))
        topic = self._sow_topic(sub.topic)
        shown = sub.shown
        self._release_page(sub)
        rs = self._result_set(topic, query)  # shared, or built now
        sub.filter, sub.options = query.filter, replace(options, deleted_events=False)
        sub.result_set, sub.skip, sub.top = rs, skip_n or 0, top_n
        sub.shown = shown
        rs.pages.append(sub)
        sub.refresh()

    def _new_subscription(
        self,
        topic: str,
        filter: str,
        options: SubscriptionOptions,
        sub_id: str,
        owner: str,
        *,
        track: bool = False,
        check_name: bool = True,
        cls: type[Subscription] = Subscription,
    ) -> Subscription:
        if check_name:
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
        return cls(
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
        for d in self.derived.values():
            if d.name in self._derived:  # not the private views of aggregated subscriptions
                count = len(d.topic.records)
                out.append(TopicSummary(d.name, d.kind, (), "transient", None, count, (), d.underlying, 0.0))
        return sorted(out, key=lambda s: s.name)


async def _page_events(
    query: PreparedQuery, window: list[StoredRecord], matched: int, bookmark: int
) -> AsyncIterator[QueryEvent]:
    """The query part of a paginated subscription: its first window."""
    yield GroupBegin(query.opts.query_id, bookmark)
    size = query.batch_size
    for i in range(0, len(window), size):
        yield RecordBatch(window[i : i + size])
    yield GroupEnd(query.opts.query_id, len(window), matched, matched)


def _request_filter(text: str) -> CompiledFilter | None:
    """The compiled filter of a request (None when empty), its errors attributed to ``filter``."""
    if not text.strip():
        return None
    try:
        return compile_filter(text)
    except ExpressionError as exc:
        raise exc.for_field("filter") from None
