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

from collections.abc import Sequence
from typing import Any

from sortedcontainers import SortedList

from sowdb.engine.records import StoredRecord
from sowdb.engine.subscriptions import OOF_MATCH, Change, QueuedEvent, Subscription
from sowdb.expr import CompiledFilter, OrderBy


class ResultSet:
    """The matching records of a topic in page order."""

    def __init__(self, key: tuple[str, str, str], filter: CompiledFilter | None, order: OrderBy | None) -> None:
        self.key = key
        self.filter = filter
        self.order = order
        self.entries: dict[str, tuple[Any, str, StoredRecord]] = {}
        self.sorted: SortedList = SortedList()
        self.pages: list[PagedSubscription] = []

    def _entry(self, rec: StoredRecord) -> tuple[Any, str, StoredRecord]:
        return (self.order.key(rec.data or {}) if self.order is not None else (), rec.sow_key, rec)

    def load(self, records: Sequence[StoredRecord]) -> None:
        flt = self.filter
        entries = [self._entry(r) for r in records if flt is None or flt.matches(r.data, r)]
        self.entries = {e[1]: e for e in entries}
        self.sorted = SortedList(entries)

    def apply(self, changes: Sequence[Change]) -> int:
        """Take a batch of changes; returns the lowest position it touched (for pages to check
        whether their window moved)."""
        lowest = len(self.sorted) + 1
        flt, entries, sl = self.filter, self.entries, self.sorted
        for c in changes:
            old = entries.pop(c.sow_key, None)
            if old is not None:
                lowest = min(lowest, sl.index(old))
                sl.remove(old)
            new = c.new
            if new is not None and (flt is None or flt.matches(new.data, new)):
                entry = self._entry(new)
                entries[c.sow_key] = entry
                sl.add(entry)
                lowest = min(lowest, sl.index(entry))
        return lowest

    def window(self, skip: int, top: int) -> list[StoredRecord]:
        return [e[2] for e in self.sorted.islice(skip, skip + top)]


class PagedSubscription(Subscription):
    """A subscription that sees only a window of its :class:`ResultSet`."""

    result_set: ResultSet
    skip = 0
    top = 0

    def bind(self, result_set: ResultSet, skip: int, top: int) -> None:
        self.result_set, self.skip, self.top = result_set, skip, top
        self.shown: dict[str, StoredRecord] = {}

    def offer(self, topic: str, changes: Sequence[Change]) -> None:
        """Changes reach a page through its result set (:meth:`refresh`), not one by one."""

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
                self._enqueue(QueuedEvent("oof", gone, c.reason))
            else:
                entry = self.result_set.entries.get(key)
                current = c.new if c is not None and c.new is not None else entry[2] if entry else last
                self._enqueue(QueuedEvent("oof", current, OOF_MATCH))
        for rec in window:
            if shown.get(rec.sow_key) is not rec:
                shown[rec.sow_key] = rec
                self._enqueue(QueuedEvent("publish", rec))
        if self.queue:
            self.wakeup.set()
