"""Paginated subscriptions (P-1): a live window ``[skip_n, skip_n + top_n)`` of a sorted result.

A :class:`ResultSet` is the records of one topic that match one filter, kept in one order
(``order_by``, then SowKey; SowKey alone when there is no order) in a sorted list: each change
costs O(log n), never a re-query. Subscriptions with the same topic, filter and order share one
result set. After each batch, a page whose window the batch may have touched compares the
window with what its subscriber holds: records that entered it or changed in it are published,
records pushed or removed out of it get an oof (``match``, or ``deleted`` / ``expired`` when
the record itself went).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from sortedcontainers import SortedList

from sowdb.engine.changes import OOF_MATCH, Change, QueuedEvent
from sowdb.engine.events import GroupBegin, GroupEnd, QueryEvent, RecordBatch
from sowdb.engine.live.options import SubscriptionOptions
from sowdb.engine.live.subscription import Subscription
from sowdb.engine.read import PreparedQuery, batches
from sowdb.engine.records import StoredRecord, shaped
from sowdb.engine.state import SowTopic
from sowdb.expr import CompiledFilter, OrderBy

ResultSetKey = tuple[str, str, str, tuple[str, ...]]
"""(topic, filter text, order_by text, sorted SowKeys): pages with the same key share a set."""


class ResultSet:
    """The matching records of a topic in page order.

    The sorted list holds byte keys (:meth:`OrderBy.byte_key` + SowKey, so every key is unique
    and SowKey breaks ties); ``records`` maps a key back to its record.
    """

    def __init__(
        self,
        key: ResultSetKey,
        filter: CompiledFilter | None,
        order: OrderBy | None,
        sow_keys: frozenset[str] | None = None,
    ) -> None:
        self.key = key
        self.filter = filter
        self.order = order
        self.sow_keys = sow_keys  # a page of these records only
        self.entries: dict[str, bytes] = {}  # SowKey -> its sort key
        self.records: dict[bytes, StoredRecord] = {}
        self.sorted: SortedList = SortedList()
        self.pages: list[PagedSubscription] = []

    def _sort_key(self, rec: StoredRecord) -> bytes:
        """The order of :func:`~sowdb.engine.read.prepared.page_key` (one topic: no topic suffix)."""
        tail = rec.sow_key.encode()
        return self.order.byte_key(rec.data or {}) + tail if self.order is not None else tail

    def _wants(self, rec: StoredRecord) -> bool:
        keys, flt = self.sow_keys, self.filter
        return (keys is None or rec.sow_key in keys) and (flt is None or flt.matches(rec.data, rec))

    def load(self, records: Sequence[StoredRecord]) -> None:
        matched = [r for r in records if self._wants(r)]
        self.records = {self._sort_key(r): r for r in matched}
        self.entries = {r.sow_key: k for k, r in self.records.items()}
        self.sorted = SortedList(self.records)

    def apply(self, changes: Sequence[Change]) -> list[bytes]:
        """Take a batch of changes; returns the sort keys it removed or added (pages compare
        them with their window's last key to see whether the batch touched them)."""
        touched = []
        entries, records, sl, wants = self.entries, self.records, self.sorted, self._wants
        for c in changes:
            old = entries.pop(c.sow_key, None)
            if old is not None:
                sl.remove(old)
                del records[old]
                touched.append(old)
            new = c.new
            if new is not None and wants(new):
                key = self._sort_key(new)
                entries[c.sow_key] = key
                records[key] = new
                sl.add(key)
                touched.append(key)
        return touched

    def current(self, sow_key: str) -> StoredRecord | None:
        key = self.entries.get(sow_key)
        return None if key is None else self.records[key]

    def window(self, skip: int, top: int) -> list[StoredRecord]:
        records = self.records
        return [records[k] for k in self.sorted.islice(skip, skip + top)]


class PagedSubscription(Subscription):
    """A subscription that sees only a window of its :class:`ResultSet`. Changes reach it through
    its result set (:meth:`refresh`, called by :class:`PageSets`), never by dispatch."""

    dispatched = False
    result_set: ResultSet
    skip = 0
    top = 0

    def bind(self, result_set: ResultSet, skip: int, top: int) -> list[StoredRecord]:
        """Show the window ``[skip, skip + top)`` of ``result_set``; returns it (what the
        subscriber is sent first)."""
        self.result_set, self.skip, self.top = result_set, skip, top
        window = result_set.window(skip, top)
        self.shown: dict[str, StoredRecord] = {r.sow_key: r for r in window}
        result_set.pages.append(self)
        return window

    def rebind(
        self, result_set: ResultSet, filter: CompiledFilter | None, options: SubscriptionOptions, skip: int, top: int
    ) -> None:
        """R-1: a new page definition; the subscriber keeps what it was shown, and
        :meth:`refresh` brings it level with the new window."""
        self.filter, self.options = filter, options
        self.result_set, self.skip, self.top = result_set, skip, top
        result_set.pages.append(self)
        self.refresh()

    def touched_by(self, touched: list[bytes]) -> bool:
        """Whether entries removed or added by a batch may have changed this window: one at or
        before the window's last entry (as it is after the batch) did; one after it did not."""
        sl = self.result_set.sorted
        end = self.skip + self.top
        if len(sl) < end:
            return bool(touched)
        boundary = sl[end - 1]
        return any(k <= boundary for k in touched)

    def refresh(self, changed: dict[str, Change] | None = None) -> None:
        """Bring the subscriber's page level with the window: publish what entered or changed,
        oof what left. ``changed`` is this batch's changes by SowKey: a record that left
        because of its own change gets the oof of that change (``deleted`` / ``expired`` with
        its last state, ``match`` with the update); one pushed out by others, ``match`` with
        its current state."""
        if self.failure is not None:
            return
        window = self.result_set.window(self.skip, self.top)
        now = {r.sow_key: r for r in window}
        shown = self.shown
        for key in [k for k in shown if k not in now]:
            last = shown.pop(key)
            if not self.options.oof:
                continue
            c = changed.get(key) if changed else None
            if c is not None and c.new is None:
                gone = StoredRecord(last.topic, key, last.data, last.raw, c.bookmark, c.timestamp_us)
                self._push(QueuedEvent("oof", gone, c.reason))
            else:
                now_rec = self.result_set.current(key)
                current = c.new if c is not None and c.new is not None else now_rec or last
                if not self.access.entitled(current.topic, current.data, current):
                    current = last  # the caller may not see the version that moved it out
                self._push(QueuedEvent("oof", current, OOF_MATCH))
        delta = self.options.delta
        for rec in window:
            held = shown.get(rec.sow_key)
            if held is not rec:
                shown[rec.sow_key] = rec
                if delta and held is not None:  # D-2: a record the subscriber holds changed
                    change = self._delta(held, rec)
                    if change is not None:
                        self._push(QueuedEvent("publish", change))
                else:
                    self._push(QueuedEvent("publish", rec))
        if self.queue:
            self.wakeup.set()


class PageSets:
    """The shared result sets of live pages, by (topic, filter, order, SowKeys), and their
    upkeep: the writer's fan-out hands each batch of a topic's changes to the sets of that
    topic, and a page compares itself with its window only when the batch landed at or before
    the window's end."""

    def __init__(self) -> None:
        self.result_sets: dict[ResultSetKey, ResultSet] = {}
        self.by_topic: dict[str, list[ResultSet]] = {}

    def get(
        self,
        topic: SowTopic,
        filter_text: str,
        filter: CompiledFilter | None,
        order_text: str,
        order: OrderBy | None,
        sow_keys: frozenset[str] | None,
    ) -> ResultSet:
        """The shared result set of (topic, filter, order, SowKeys), created from the topic's
        state when it does not exist yet."""
        key = (topic.name, filter_text.strip(), order_text.strip(), tuple(sorted(sow_keys or ())))
        rs = self.result_sets.get(key)
        if rs is None:
            rs = self.result_sets[key] = ResultSet(key, filter, order, sow_keys)
            rs.load(list(topic.records.values()))
            self.by_topic.setdefault(topic.name, []).append(rs)
        return rs

    def release(self, page: PagedSubscription) -> None:
        """The page no longer uses its set; a set without pages is dropped."""
        rs = page.result_set
        if page not in rs.pages:
            return
        rs.pages.remove(page)
        if not rs.pages:
            del self.result_sets[rs.key]
            sets = self.by_topic[rs.key[0]]
            sets.remove(rs)
            if not sets:
                del self.by_topic[rs.key[0]]

    def apply(self, topic: str, changes: Sequence[Change]) -> None:
        for rs in self.by_topic.get(topic, ()):
            touched = rs.apply(changes)
            changed: dict[str, Change] | None = None
            for page in rs.pages:
                if page.touched_by(touched):
                    changed = changed or {c.sow_key: c for c in changes}
                    page.refresh(changed)


async def page_events(
    query: PreparedQuery, window: list[StoredRecord], matched: int, bookmark: int, frame_bytes: int
) -> AsyncIterator[QueryEvent]:
    """The query part of a paginated subscription: its first window (shaped by ``select``)."""
    select = query.select
    yield GroupBegin(query.opts.query_id, bookmark)
    for batch in batches(
        window, query.batch_size, frame_bytes, None if select is None else lambda r: shaped(r, select)
    ):
        yield RecordBatch(batch)
    yield GroupEnd(query.opts.query_id, len(window), matched, matched)
