"""Past versions of a topic's records (H-1, H-2): version chains, granularity, trimming.

Each record of a topic with history points at its previous version (``StoredRecord.prev``),
and a deleted or expired key is kept as a :class:`Tombstone` that points at the last version.
"The state as of point P" is then, for every chain, the first version walking back from the
head whose bookmark is ≤ P — no decoding and no storage reads, so a historical query costs
about what a query of the current state costs. The ``history`` column family is the chains'
durable copy (persistent topics); it is read back at start.

Versions are immutable and only ever *unlinked* below the trimming cutoff, so a query that took
its list of heads at one moment can walk the chains while new versions are added in front.
"""

from __future__ import annotations

from collections import deque

from sowdb.config import HistoryConfig
from sowdb.engine.records import StoredRecord


class Tombstone(StoredRecord):
    """A delete or expiration in a version chain: the key had no record from this bookmark."""

    __slots__ = ()


def version_at(head: StoredRecord | None, seq: int, timestamp_us: int) -> StoredRecord | None:
    """The version of a chain current at sequence ``seq`` and time ``timestamp_us`` (None when
    the key had no record then)."""
    r = head
    while r is not None:
        s = r.stamp  # bookmark and timestamp without the properties' calls: one step per version walked
        if s.base + r.low <= seq and s.timestamp_us <= timestamp_us:
            break
        r = r.prev
    return None if r is None or type(r) is Tombstone else r


class TopicHistory:
    """The history bookkeeping of one topic: tombstones, granularity and the trim queue."""

    def __init__(self, config: HistoryConfig) -> None:
        self.window_us = int(config.window_s * 1_000_000)
        self.granularity_us = int(config.granularity_s * 1_000_000)
        self.tombstones: dict[str, StoredRecord] = {}
        # the newest version removed by trimming: points at or before it are outside the window
        self.floor = 0
        # (timestamp, SowKey) of every version that has a predecessor, in time order: the keys
        # whose chains may hold versions to trim once that time leaves the window
        self._queue: deque[tuple[int, str]] = deque()

    def drops(self, previous: StoredRecord | None, timestamp_us: int) -> bool:
        """Whether a new version at ``timestamp_us`` replaces ``previous`` instead of following
        it: at most one version per key per granularity interval (H-1)."""
        return previous is not None and self.same_interval(previous.timestamp_us, timestamp_us)

    def same_interval(self, a_us: int, b_us: int) -> bool:
        """Whether two instants fall in one granularity interval (never without a granularity)."""
        g = self.granularity_us
        return bool(g) and a_us // g == b_us // g

    def link(self, rec: StoredRecord, old: StoredRecord | None) -> None:
        """Chain a new version ``rec`` of a key whose previous live version was ``old``."""
        prev = old if old is not None else self.tombstones.pop(rec.sow_key, None)
        if prev is not None and self.drops(prev, rec.timestamp_us):
            prev = prev.prev
        rec.prev = prev
        if prev is not None:
            self._queue.append((rec.timestamp_us, rec.sow_key))

    def bury(self, old: StoredRecord, bookmark: int, timestamp_us: int) -> None:
        """The key of ``old`` was deleted or expired at ``bookmark``."""
        stone = Tombstone(old.topic, old.sow_key, None, b"", bookmark, timestamp_us)
        stone.prev = old.prev if self.drops(old, timestamp_us) else old
        if stone.prev is not None:
            self.tombstones[old.sow_key] = stone
            self._queue.append((timestamp_us, old.sow_key))

    def restore(self, chain: list[StoredRecord]) -> None:
        """Re-link a key's versions read back at start (oldest first; the last is the head)."""
        prev: StoredRecord | None = None
        for rec in chain:
            rec.prev = prev
            if prev is not None:
                self._queue.append((rec.timestamp_us, rec.sow_key))
            prev = rec
        if prev is not None and type(prev) is Tombstone:
            self.tombstones[prev.sow_key] = prev

    def restore_behind(self, past: list[StoredRecord], head_timestamp_us: int) -> None:
        """:meth:`restore` of a chain whose head (written at ``head_timestamp_us``) is not an
        object here but a slot of an arena: ``past``, oldest first, is linked, and the head's
        place in the trim queue taken (it has a predecessor)."""
        self.restore(past)
        self._queue.append((head_timestamp_us, past[-1].sow_key))
        if type(past[-1]) is Tombstone:  # restore took it for the key's end: the key lives on
            del self.tombstones[past[-1].sow_key]

    def sort_queue(self) -> None:
        self._queue = deque(sorted(self._queue))

    def trim(
        self, records: dict[str, StoredRecord], cutoff_us: int, limit: int = 100_000
    ) -> tuple[list[tuple[str, int]], bool]:
        """Unlink the versions no point inside the window needs (H-1).

        For each key, the newest version older than ``cutoff_us`` is the state at the window's
        start and stays (unless it is a delete); everything older goes. At most ``limit`` queue
        entries are handled per call, so the caller can spread the work.

        Returns:
            The removed versions as (SowKey, bookmark), and whether more work is queued.
        """
        removed: list[tuple[str, int]] = []
        queue, tombstones = self._queue, self.tombstones
        done = 0
        while queue and queue[0][0] < cutoff_us and done < limit:
            _, key = queue.popleft()
            done += 1
            head = records.get(key) or tombstones.get(key)
            newer: StoredRecord | None = None
            base = head
            while base is not None and base.timestamp_us >= cutoff_us:
                newer, base = base, base.prev
            if base is None:
                continue
            gone = base.prev
            base.prev = None
            while gone is not None:
                removed.append((key, gone.bookmark))
                gone = gone.prev
            if type(base) is Tombstone:  # nothing existed at the window's start: drop it too
                removed.append((key, base.bookmark))
                if newer is None:
                    del tombstones[key]
                else:
                    newer.prev = None
        return removed, bool(queue) and queue[0][0] < cutoff_us
