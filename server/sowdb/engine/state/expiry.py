"""Record expiration (X-1): a heap of expiry times, swept by the writer.

Expired records are removed by the writer itself (journaled as expirations, oof ``expired``),
so expiration takes its place in the one total order like any delete. The heap holds
(expiry, bookmark, topic, SowKey); a record replaced before it expires leaves a stale entry,
recognised by its bookmark and skipped, which is cheaper than finding and removing it.
"""

from __future__ import annotations

import heapq

from sowdb.engine.records import StoredRecord


class ExpiryQueue:
    """The records that will expire, soonest first."""

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, str, str]] = []

    def __len__(self) -> int:
        return len(self._heap)

    def add(self, rec: StoredRecord) -> None:
        heapq.heappush(self._heap, (rec.expiry_us, rec.bookmark, rec.topic, rec.sow_key))

    def add_many(self, recs: list[StoredRecord]) -> None:
        """:meth:`add` each of ``recs`` that expires (an expiry of 0: never)."""
        for rec in recs:
            if rec.expiry_us:
                self.add(rec)

    def next_due(self) -> int | None:
        """The earliest expiry time queued, in µs since the epoch."""
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now_us: int) -> list[tuple[str, str, int]]:
        """(topic, SowKey, bookmark) of every entry due at ``now_us``, in expiry order."""
        heap, out = self._heap, []
        while heap and heap[0][0] <= now_us:
            _, bookmark, topic, sow_key = heapq.heappop(heap)
            out.append((topic, sow_key, bookmark))
        return out
