"""One live subscription: what it asked for, what its subscriber holds, and its bounded queue.

The writer offers it every applied batch of changes to its topics (through the hub), in
bookmark order; the subscription evaluates them — filter, oof (O-1), delta (D-2), conflation
(C-1), ``select`` and ``sow_keys`` — and queues the events to send. A publisher never waits for
it: the queue is bounded (records and bytes, SL-1) and a subscription that passes the bound is
failed and dropped. Events shared by many subscribers (a whole record) are made once per change
(``Change.event``) and queued by reference, so a record is encoded once.

Placed with a query or a bookmark, it starts *held* (:meth:`Subscription.hold`): live changes
are kept unevaluated until the query's results and the replay have been sent, then evaluated
against what the subscriber received (:meth:`Subscription.release`), so there is no gap and no
duplicate at the seams (S-1, H-3).
"""

from __future__ import annotations

import secrets
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from sowdb.config import field_path_steps, is_regex_topic
from sowdb.engine.access import EVERYONE, Access, remember
from sowdb.engine.changes import OOF_MATCH, Change, QueuedEvent
from sowdb.engine.live.options import SubscriptionOptions
from sowdb.engine.live.partial_records import delta_record, last_seen, merged_delta
from sowdb.engine.live.private import is_private
from sowdb.engine.live.wakeup import Wakeup
from sowdb.engine.records import StoredRecord, shaped
from sowdb.errors import PermissionDenied, ResourceExhausted, SowdbError
from sowdb.expr import CompiledFilter, Select, get_path
from sowdb.expr.budget import MAX_OVERRUNS, OVERRUN, overruns
from sowdb.expr.matching import compile_pattern

DEFAULT_MAX_QUEUE_RECORDS = 100_000
DEFAULT_MAX_QUEUE_BYTES = 64 * 1024 * 1024


def subscription_key(user: str, sub_id: str) -> str:
    """Where the hub files a user's subscription: a sub_id is its user's own (two users may both
    name theirs ``risk-dashboard``, and neither can reach the other's). A sub_id is printable,
    so it holds no NUL; with security off (the user "") the key is the sub_id itself."""
    return f"{user}\x00{sub_id}" if user else sub_id


class SlowConsumer(ResourceExhausted):
    """The subscriber's queue passed its limit (SL-1); the message says which and by how much."""


class Subscription:
    """One live subscription and its outbound queue."""

    dispatched = True  # offered changes by the live registry (a page gets them from its result set)

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
        select: Select | None = None,
        sow_keys: frozenset[str] | None = None,
        access: Access = EVERYONE,
        max_records: int = DEFAULT_MAX_QUEUE_RECORDS,
        max_bytes: int = DEFAULT_MAX_QUEUE_BYTES,
    ) -> None:
        self.name = sub_id or secrets.token_urlsafe(16)  # the id its subscriber knows it by
        self.id = subscription_key(access.user, self.name)  # the hub's key: the name, in its user's scope
        self.access = access  # the topics its caller may read, the rows it may see
        self.owner = owner
        self.topic = topic
        self.regex = compile_pattern(topic) if is_regex_topic(topic) else None
        self.filter = filter
        self.options = options
        self.key_fields = key_fields or {}
        self.select = select  # Q-9 for the live part: every record sent is shaped by it
        self.sow_keys = sow_keys  # Q-5 for the live part: only these records
        # what the subscriber holds: kept for oof, for delta (D-2 applies only to records it
        # holds) and for sow_and_subscribe (so that a replacement delivers only records it
        # does not have, R-1)
        self.focus: set[tuple[str, str]] | None = set() if options.oof or options.delta or track else None
        self.queue: deque[QueuedEvent] = deque()
        self.queued_bytes = 0
        self.sent_events = 0  # drained for sending (operators' figures, SPEC §12)
        self.placed_at = time.monotonic()
        self.max_records = max_records
        self.max_bytes = max_bytes
        self.held: list[Change] | None = None
        # H-3/H-4: replay the journal entries (after, upto] before going live
        self.replay_from: tuple[int, int] | None = None
        self.failure: SowdbError | None = None  # why it ended: too slow (SL-1), rights lost
        self.overruns = 0  # evaluations of its filter that passed the expression budget
        self.wakeup = Wakeup()
        self._topics: dict[str, bool] = {}
        # C-1: the latest undelivered publish per conflation key, flushed once per interval
        self.pending: dict[tuple[Any, ...], QueuedEvent] = {}
        self.sent: set[tuple[str, str]] = set()  # (topic, SowKey) ever delivered, for the oof rule
        self._conflation_steps = [field_path_steps(p) for p in options.conflation_key]

    def hold(self, replay: tuple[int, int] | None = None) -> None:
        """Keep live changes unevaluated from now until :meth:`release` (a query or a journal
        replay is being sent first); ``replay`` = the journal entries (after, upto] to replay."""
        self.held = []
        self.replay_from = replay

    def wants(self, topic: str) -> bool:
        """Whether changes to ``topic`` concern it: its name or pattern, and a topic its caller
        may read (A-3: a regex subscription sees only those). A private view (an aggregated
        subscription's, :func:`~sowdb.engine.live.private.is_private`) concerns only the
        subscription that follows it by that name: no pattern reaches it. Rights come first: a
        pattern is never run against a topic its caller may not read (issue 26)."""
        hit = self._topics.get(topic)
        if hit is None:
            if not self.access.can_read(topic):
                named = False
            elif self.regex is not None and not is_private(topic):  # nor a joined view read under row filters
                named = self.access.by_pattern(topic) and self.regex.search(topic)
            else:
                named = topic == self.topic
            hit = remember(self._topics, topic, named)
        return hit

    # --- the writer's side ---------------------------------------------------------------------

    def offer(self, topic: str, changes: Sequence[Change], *, placed: bool = False) -> None:
        """Take one batch of changes to ``topic`` from the writer: hold them (query phase) or
        evaluate them now.

        Args:
            placed: the hub has checked the conjunct this subscription is filed under for
                every change (publishes only), so only the rest of the filter is left to test.
        """
        if self.failure is not None or not self.wants(topic):
            return
        if self.held is not None:
            self.held.extend(changes)
            if len(self.held) > self.max_records:
                self._fail(f"{len(self.held)} changes arrived while its query or replay was being sent")
            return
        before = overruns()
        if (
            self.focus is None
            and not self.conflated
            and self.select is None
            and self.sow_keys is None
            and self.access.unrestricted
        ):
            flt = self.filter
            if flt is None:
                self._offer_plain(changes, None)
            elif placed:
                self._offer_plain(changes, flt.equality_conjuncts[0].rest)
            else:
                self._offer_plain(changes, flt.matches)
        else:
            for c in changes:
                self._evaluate(c)
        over = overruns() - before
        if over:  # issue 37, finding 2: a filter that keeps passing its evaluation budget is ended
            self.overruns += over
            if self.overruns >= MAX_OVERRUNS:
                self._end(ResourceExhausted(OVERRUN.format(records=self.overruns), field="filter"))
                return
        if self.queue:
            self.wakeup.set()

    def _offer_plain(self, changes: Sequence[Change], matches: Callable[[Any, Any], Any] | None) -> None:
        """The common case inline — no oof bookkeeping, whole records, no conflation: queue
        the change's shared ``publish`` event when ``matches`` (None: everything) says so, and
        check the limits once per batch."""
        queue = self.queue
        size = 0
        for c in changes:
            new = c.new
            if new is None:
                self._evaluate(c)  # a removal: a ``deleted`` event, if asked for
            elif matches is None or matches(new.kept or new.data, new):  # kept: a fresh version's, a slot read
                event = c.event
                if event is None:
                    event = c.event = QueuedEvent("publish", new)
                queue.append(event)
                size += len(new.raw)
        if size:
            self.queued_bytes += size
            if len(queue) > self.max_records or self.queued_bytes > self.max_bytes:
                self._fail(f"{len(queue)} events / {self.queued_bytes} bytes queued")

    def accept(self, delivered: Iterable[StoredRecord]) -> None:
        """The query's results are sent: note what the subscriber holds."""
        keys = [(r.topic, r.sow_key) for r in delivered]
        if self.focus is not None:
            self.focus.update(keys)
        if self.conflated:
            self.sent.update(keys)

    def evaluate(self, changes: Iterable[Change]) -> None:
        """Evaluate changes from before the registration point (a journal replay) while live
        changes are still held."""
        for c in changes:
            self._evaluate(c)

    def release(self, delivered: Iterable[StoredRecord] = ()) -> None:
        """The query (and replay) are sent: evaluate the changes held since the registration
        point, in order, and go live."""
        self.accept(delivered)
        held, self.held = self.held or [], None
        for c in held:
            self._evaluate(c)
        if self.queue:
            self.wakeup.set()

    def _evaluate(self, c: Change) -> None:
        flt, focus, opts = self.filter, self.focus, self.options
        if self.sow_keys is not None and c.sow_key not in self.sow_keys:
            return
        key = (c.topic, c.sow_key)
        new = c.new
        if new is not None:
            visible = self.access.entitled(c.topic, new.data, new)
            if visible and (flt is None or flt.matches(new.data, new)):
                if opts.delta and c.old is not None and focus is not None and key in focus:
                    delta = self._delta(c.old, new)
                    if delta is not None:
                        self._push(QueuedEvent("publish", delta))
                else:  # a record the subscriber does not hold arrives whole (D-2)
                    self._push(QueuedEvent("publish", new))
                if focus is not None:
                    focus.add(key)
            elif focus is not None and key in focus:
                focus.discard(key)
                if opts.oof:  # the update that moved it out, unless the caller may not see it
                    self._push(QueuedEvent("oof", new if visible else last_seen(c), OOF_MATCH))
            return
        old = c.old
        if old is None:
            return
        gone = StoredRecord(c.topic, c.sow_key, old.data, old.raw, c.bookmark, c.timestamp_us)
        if focus is not None and key in focus:
            focus.discard(key)
            if opts.oof:
                self._push(QueuedEvent("oof", gone, c.reason))
        elif (
            opts.deleted_events
            and self.access.entitled(c.topic, old.data, old)
            and (flt is None or flt.matches(old.data, old))
        ):
            self._push(QueuedEvent("deleted", gone))

    def replace(
        self,
        filter: CompiledFilter | None,
        options: SubscriptionOptions,
        records: dict[str, dict[str, StoredRecord]],
        candidates: dict[str, Iterable[StoredRecord]] | None = None,
    ) -> None:
        """R-1: swap filter and options at this point of the total order. Records now in scope
        that the subscriber does not hold are delivered; held records now out of scope get an
        oof (with oof on).

        Args:
            records: the current records of each topic it covers, by topic.
            candidates: per topic, the records that may match the new filter (what a hash index
                gives); all of them when absent.
        """
        if self.conflated and (
            options.conflation_key != self.options.conflation_key or options.delta != self.options.delta
        ):
            self.flush()  # pending keys (or deltas) were made under the old options
        if self.focus is None and options.delta:
            self.focus = set()  # from now on it holds what it receives (whole, the first time)
        focus = self.focus
        self.filter, self.options = filter, options
        self._conflation_steps = [field_path_steps(p) for p in options.conflation_key]
        if not self.conflated:
            self.flush()
        if focus is None:
            return
        in_scope: set[tuple[str, str]] = set()
        fresh: list[StoredRecord] = []
        keys = self.sow_keys
        for topic, held in records.items():
            scan = held.values() if candidates is None or topic not in candidates else candidates[topic]
            for rec in scan:
                if keys is not None and rec.sow_key not in keys:
                    continue
                if not self.access.entitled(rec.topic, rec.data, rec):
                    continue
                if filter is None or filter.matches(rec.data, rec):
                    key = (rec.topic, rec.sow_key)
                    in_scope.add(key)
                    if key not in focus:
                        fresh.append(rec)
        for key in [k for k in focus if k not in in_scope]:
            focus.discard(key)
            current = records[key[0]].get(key[1]) if key[0] in records else None
            if options.oof and current is not None:
                if not self.access.entitled(current.topic, current.data, current):
                    current = StoredRecord(
                        current.topic, current.sow_key, {}, b"{}", current.bookmark, current.timestamp_us
                    )
                self._push(QueuedEvent("oof", current, OOF_MATCH))
        for rec in fresh:
            focus.add((rec.topic, rec.sow_key))
            self._push(QueuedEvent("publish", rec))
        if self.queue:
            self.wakeup.set()

    def _delta(self, old: StoredRecord, new: StoredRecord) -> StoredRecord | None:
        """D-2: the key fields (``send_keys``) plus the top-level fields whose value changed."""
        keys = self.key_fields.get(new.topic, ()) if self.options.send_keys else ()
        return delta_record(old, new, keys, no_empties=self.options.no_empties)

    @property
    def conflated(self) -> bool:
        return self.options.conflation_s > 0

    def _conflation_key(self, rec: StoredRecord) -> tuple[Any, ...]:
        if not self._conflation_steps or rec.data is None:
            return (rec.topic, rec.sow_key)
        return (rec.topic, *(repr(get_path(rec.data, steps)) for steps in self._conflation_steps))

    def flush(self) -> None:
        """C-1: deliver the latest pending publish of each conflation key (the sender calls
        this once per interval; tests call it directly, so no real time passes)."""
        if not self.pending:
            return
        for event in self.pending.values():
            self.sent.add((event.record.topic, event.record.sow_key))
            self._enqueue(event)
        self.pending.clear()
        if self.queue:
            self.wakeup.set()

    def _push(self, event: QueuedEvent) -> None:
        if self.conflated:
            rec = event.record
            if event.kind == "publish":
                ckey = self._conflation_key(rec)
                earlier = self.pending.get(ckey)
                if self.options.delta and earlier is not None and earlier.record.sow_key == rec.sow_key:
                    event = QueuedEvent("publish", merged_delta(earlier.record, rec))
                self.pending[ckey] = event
                return
            # a removal: drop the undelivered publish of that record; the oof or delete goes
            # out only if the subscriber ever received the record
            self.pending.pop(self._conflation_key(rec), None)
            if (rec.topic, rec.sow_key) not in self.sent:
                return
        self._enqueue(event)

    def _enqueue(self, event: QueuedEvent) -> None:
        if self.select is not None:
            event = QueuedEvent(event.kind, shaped(event.record, self.select), event.reason)
        self.queue.append(event)
        self.queued_bytes += len(event.record.raw)
        if len(self.queue) > self.max_records or self.queued_bytes > self.max_bytes:
            self._fail(f"{len(self.queue)} events / {self.queued_bytes} bytes queued")

    def end(self, failure: SowdbError) -> None:
        """End the subscription with ``failure`` (a reader process whose feed ended)."""
        self._end(failure)

    def revoke(self, why: str) -> None:
        """End the subscription because its caller lost the right to it (A-4)."""
        self._end(PermissionDenied(why))

    def _fail(self, what: str) -> None:
        self._end(
            SlowConsumer(
                f"subscriber too slow: {what}, over the limit of {self.max_records} events / {self.max_bytes} "
                "bytes; resubscribe with the last bookmark received to catch up"
            )
        )

    def _end(self, failure: SowdbError) -> None:
        self.failure = failure
        self.queue.clear()
        self.queued_bytes = 0
        self.held = None
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
        self.sent_events += len(events)
        return events
