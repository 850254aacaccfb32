"""The engine's shared state: configuration, store, topics (loaded at start), derived topics,
the subscription hub, and the lookups and fan-out every part of the engine uses.

The engine is one object (:class:`sowdb.engine.Engine`) assembled from parts by concern:
this base, the writer (:mod:`sowdb.engine.writer`: publish, delete, expiration, trimming) and
subscriptions (:mod:`sowdb.engine.subscribing`). It never imports grpc: the protocol layer
translates requests into its calls and domain errors into gRPC statuses.
"""

from __future__ import annotations

import gc
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass

from sowdb.config import Config, ViewConfig, is_regex_topic
from sowdb.engine.bookmarks import Point, last_seq_at_or_before
from sowdb.engine.derived import ConflatedTopic, Derived, View, derived_order
from sowdb.engine.expiry import ExpiryQueue
from sowdb.engine.pages import ResultSet
from sowdb.engine.query import AsOf
from sowdb.engine.recovery import StoreDamaged, follow_durability_changes, load_state, rebuild, replay_into_store
from sowdb.engine.subscriptions import (
    Change,
    SubscriptionHub,
)
from sowdb.engine.topic import SowTopic
from sowdb.errors import (
    ExpressionError,
    FailedPrecondition,
    InvalidArgument,
)
from sowdb.expr import CompiledFilter, compile_filter
from sowdb.storage import Store

log = logging.getLogger("sowdb.engine")

Clock = Callable[[], int]
"""Returns the time in microseconds since the epoch; injectable so tests control time."""


def system_clock() -> int:
    return time.time_ns() // 1000


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


class EngineBase:
    """State and lookups shared by the writer, queries and subscriptions."""

    def __init__(self, config: Config, store: Store, *, clock: Clock = system_clock) -> None:
        self.config = config
        self.store = store
        self.clock = clock
        self.max_document_bytes = config.server.max_document_bytes
        self._derived = {v.name: "view" for v in config.views} | {c.name: "conflated" for c in config.conflated_topics}
        self.hub = SubscriptionHub()
        self._private: dict[str, View] = {}  # sub_id -> the private view of an aggregated subscription
        self._result_sets: dict[tuple[str, str, str, tuple[str, ...]], ResultSet] = {}  # (topic, filter, order, keys)
        self._paged_topics: dict[str, list[ResultSet]] = {}
        # top-level key field names per topic, which delta subscriptions always send (D-2)
        self._key_fields = {t.name: tuple(p.lstrip("/") for p in t.key if p.count("/") == 1) for t in config.topics}
        self.recovery = replay_into_store(store, config)  # J-2: the journal ahead of current/history
        follow_durability_changes(store, config)  # topics switched to or from persistent, or history
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
            d: Derived = View.from_config(c) if isinstance(c, ViewConfig) else ConflatedTopic.from_config(c)
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

    def _seq_at(self, timestamp_us: int, *, inclusive: bool = True) -> int:
        """The last retained sequence with a timestamp ≤ (or <) ``timestamp_us``; the last
        trimmed sequence when none is."""
        store = self.store

        def timestamp_of(seq: int) -> int | None:
            e = store.journal_entry(seq)
            return None if e is None else e.timestamp_us

        target = timestamp_us if inclusive else timestamp_us - 1
        return last_seq_at_or_before(target, store.journal_trimmed() + 1, self.last_seq, timestamp_of)

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


def request_filter(text: str) -> CompiledFilter | None:
    """The compiled filter of a request (None when empty), its errors attributed to ``filter``."""
    if not text.strip():
        return None
    try:
        return compile_filter(text)
    except ExpressionError as exc:
        raise exc.for_field("filter") from None
