"""Live subscriptions: matching each change to subscribers, oof, bounded queues.

The writer calls :meth:`SubscriptionHub.dispatch` after every applied batch, synchronously and
in bookmark order, so every subscriber sees changes in the instance's one total order (S-3).
Dispatch only appends to each subscriber's bounded queue and sets its wake-up event: a
publisher never waits for a subscriber. A subscriber whose queue passes its limits is failed
(SL-1) and dropped; the protocol layer ends its stream with ``RESOURCE_EXHAUSTED``.

A ``sow_and_subscribe`` registers its subscription in the same synchronous step that takes the
query's snapshot, in the *held* state: changes after that point are kept unevaluated until the
query's results have been sent, then evaluated against the set of records the subscriber
received (S-1, O-1). Records are shared, immutable objects; their encoded form is cached on
them, so a change sent to many subscribers is encoded once.
"""

from __future__ import annotations

import asyncio
import re
import secrets
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from sowdb.config import is_regex_topic
from sowdb.engine.records import StoredRecord
from sowdb.errors import InvalidArgument
from sowdb.expr import CompiledFilter

OOF_DELETED = "deleted"
OOF_EXPIRED = "expired"
OOF_MATCH = "match"

DEFAULT_MAX_QUEUE_RECORDS = 100_000
DEFAULT_MAX_QUEUE_BYTES = 64 * 1024 * 1024


@dataclass(slots=True)
class Change:
    """One applied change, as subscribers see it.

    Attributes:
        old: the version before the change (None for an insert or a non-SOW topic).
        new: the version after it (None for a delete or expiration).
        reason: for removals, ``deleted`` or ``expired``.
    """

    topic: str
    sow_key: str
    bookmark: int
    timestamp_us: int
    old: StoredRecord | None
    new: StoredRecord | None
    reason: str = OOF_DELETED


@dataclass(frozen=True)
class SubscriptionOptions:
    """What a client asked of its subscription."""

    oof: bool = False
    delta: bool = False
    no_empties: bool = False
    send_keys: bool = True
    deleted_events: bool = False  # plain Subscribe: tell about deletes of matching records


class SlowConsumer(Exception):
    """The subscriber's queue passed its limit; the message says which and by how much."""


@dataclass(slots=True)
class QueuedEvent:
    """An event waiting in a subscriber's queue: ``publish``, ``oof`` or ``deleted``."""

    kind: str
    record: StoredRecord
    reason: str = ""


class Subscription:
    """One live subscription and its outbound queue."""

    def __init__(
        self,
        topic: str,
        filter: CompiledFilter | None,
        options: SubscriptionOptions,
        *,
        sub_id: str = "",
        owner: str = "",
        key_fields: dict[str, tuple[str, ...]] | None = None,
        track: bool = False,
        max_records: int = DEFAULT_MAX_QUEUE_RECORDS,
        max_bytes: int = DEFAULT_MAX_QUEUE_BYTES,
    ) -> None:
        self.id = sub_id or secrets.token_urlsafe(16)
        self.owner = owner
        self.topic = topic
        self.regex = re.compile(topic) if is_regex_topic(topic) else None
        self.filter = filter
        self.options = options
        self.key_fields = key_fields or {}
        # what the subscriber holds: kept for oof, and for sow_and_subscribe (so that a
        # replacement delivers only records it does not have, R-1)
        self.focus: set[tuple[str, str]] | None = set() if options.oof or track else None
        self.queue: deque[QueuedEvent] = deque()
        self.queued_bytes = 0
        self.max_records = max_records
        self.max_bytes = max_bytes
        self.held: list[Change] | None = None
        self.failure: SlowConsumer | None = None
        self.wakeup = asyncio.Event()
        self._topics: dict[str, bool] = {}

    def wants(self, topic: str) -> bool:
        hit = self._topics.get(topic)
        if hit is None:
            hit = self._topics[topic] = (
                self.regex.search(topic) is not None if self.regex is not None else topic == self.topic
            )
        return hit

    # --- the writer's side ---------------------------------------------------------------------

    def offer(self, changes: Iterable[Change]) -> None:
        """Take changes from the writer: hold them (query phase) or evaluate them now."""
        if self.failure is not None:
            return
        if self.held is not None:
            self.held.extend(c for c in changes if self.wants(c.topic))
            return
        for c in changes:
            if self.wants(c.topic):
                self._evaluate(c)
        if self.queue:
            self.wakeup.set()

    def release(self, delivered: Iterable[StoredRecord]) -> None:
        """The query's results are sent: note what the subscriber holds, then evaluate the
        changes held since the query's point, in order."""
        if self.focus is not None:
            self.focus.update((r.topic, r.sow_key) for r in delivered)
        held, self.held = self.held or [], None
        for c in held:
            self._evaluate(c)
        if self.queue:
            self.wakeup.set()

    def _evaluate(self, c: Change) -> None:
        flt, focus, opts = self.filter, self.focus, self.options
        key = (c.topic, c.sow_key)
        new = c.new
        if new is not None:
            if flt is None or flt.matches(new.data, new):
                if opts.delta and c.old is not None:
                    delta = self._delta(c.old, new)
                    if delta is not None:
                        self._push(QueuedEvent("publish", delta))
                else:
                    self._push(QueuedEvent("publish", new))
                if focus is not None:
                    focus.add(key)
            elif focus is not None and key in focus:
                focus.discard(key)
                if opts.oof:
                    self._push(QueuedEvent("oof", new, OOF_MATCH))
            return
        old = c.old
        if old is None:
            return
        gone = StoredRecord(c.topic, c.sow_key, old.data, old.raw, c.bookmark, c.timestamp_us)
        if focus is not None and key in focus:
            focus.discard(key)
            if opts.oof:
                self._push(QueuedEvent("oof", gone, c.reason))
        elif opts.deleted_events and (flt is None or flt.matches(old.data, old)):
            self._push(QueuedEvent("deleted", gone))

    def replace(
        self, filter: CompiledFilter | None, options: SubscriptionOptions, state: Sequence[dict[str, StoredRecord]]
    ) -> None:
        """R-1: swap filter and options at this point of the total order. Records now in scope
        that the subscriber does not hold are delivered; held records now out of scope get an
        oof (with oof on). ``state`` is the current records of the topics it covers."""
        focus = self.focus
        self.filter, self.options = filter, options
        if focus is None:
            return
        in_scope: set[tuple[str, str]] = set()
        fresh: list[StoredRecord] = []
        for records in state:
            for rec in records.values():
                if filter is None or filter.matches(rec.data, rec):
                    key = (rec.topic, rec.sow_key)
                    in_scope.add(key)
                    if key not in focus:
                        fresh.append(rec)
        current = {(r.topic, r.sow_key): r for records in state for r in records.values()}
        for key in [k for k in focus if k not in in_scope]:
            focus.discard(key)
            if options.oof and key in current:
                self._push(QueuedEvent("oof", current[key], OOF_MATCH))
        for rec in fresh:
            focus.add((rec.topic, rec.sow_key))
            self._push(QueuedEvent("publish", rec))
        if self.queue:
            self.wakeup.set()

    def _delta(self, old: StoredRecord, new: StoredRecord) -> StoredRecord | None:
        """D-2: the key fields plus the top-level fields whose value changed."""
        before, after = old.data or {}, new.data or {}
        changed = {k: v for k, v in after.items() if before.get(k, _MISSING) != v}
        if not changed and self.options.no_empties:
            return None
        out: dict[str, Any] = {}
        if self.options.send_keys:
            for name in self.key_fields.get(new.topic, ()):
                if name in after:
                    out[name] = after[name]
        out.update(changed)
        return StoredRecord(new.topic, new.sow_key, out, orjson.dumps(out), new.bookmark, new.timestamp_us)

    def _push(self, event: QueuedEvent) -> None:
        self.queue.append(event)
        self.queued_bytes += len(event.record.raw)
        if len(self.queue) > self.max_records or self.queued_bytes > self.max_bytes:
            self.failure = SlowConsumer(
                f"subscriber too slow: {len(self.queue)} events / {self.queued_bytes} bytes queued, over the "
                f"limit of {self.max_records} events / {self.max_bytes} bytes; resubscribe (with a bookmark "
                "once available) to catch up"
            )
            self.queue.clear()
            self.queued_bytes = 0
            self.wakeup.set()

    # --- the sender's side ---------------------------------------------------------------------

    def drain(self) -> list[QueuedEvent]:
        """Everything queued, in order (the sender turns it into frames)."""
        self.wakeup.clear()
        if self.failure is not None:
            raise self.failure
        events = list(self.queue)
        self.queue.clear()
        self.queued_bytes = 0
        return events


_MISSING = object()


@dataclass
class HubStats:
    """Counters for tests and operators."""

    subscriptions: int = 0
    queued_events: int = 0
    dropped_slow: int = 0
    by_owner: dict[str, int] = field(default_factory=dict)


class SubscriptionHub:
    """Every live subscription; the writer's fan-out point."""

    def __init__(self) -> None:
        self.subs: dict[str, Subscription] = {}
        self.dropped_slow = 0

    def __bool__(self) -> bool:
        return bool(self.subs)

    def add(self, sub: Subscription) -> None:
        if sub.id in self.subs:
            raise InvalidArgument(f"sub_id {sub.id!r} is already in use", field="sub_id")
        self.subs[sub.id] = sub

    def remove(self, sub: Subscription) -> None:
        if self.subs.get(sub.id) is sub:
            del self.subs[sub.id]
            if sub.failure is not None:
                self.dropped_slow += 1

    def dispatch(self, changes: Sequence[Change]) -> None:
        for sub in list(self.subs.values()):
            sub.offer(changes)

    def stats(self) -> HubStats:
        return HubStats(
            subscriptions=len(self.subs),
            queued_events=sum(len(s.queue) for s in self.subs.values()),
            dropped_slow=self.dropped_slow,
        )


DEFAULT_OPTIONS = SubscriptionOptions()
