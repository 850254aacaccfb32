"""The journal as the instance's time axis: bookmarks resolved to points of the total order
(H-2, H-3, H-4), replays of a range as changes, and retention.

The writer appends to the journal (it alone assigns sequences); everything here only reads it,
or drops its oldest entries. A timestamp names the last entry at or before it: the writer keeps
journal timestamps non-decreasing in sequence order, so that is found by bisection.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from typing import Protocol

from sowdb.config import ServerConfig
from sowdb.engine.bookmarks import AsOf, Point, last_seq_at_or_before
from sowdb.engine.changes import Change
from sowdb.engine.clock import Clock
from sowdb.engine.journal.replay import replay_changes
from sowdb.engine.state import SowTopic, Topics
from sowdb.errors import FailedPrecondition, InvalidArgument, OutOfRange
from sowdb.storage import Store

log = logging.getLogger("sowdb.engine")


class Position(Protocol):
    """Where the writer is: the last sequence it assigned."""

    @property
    def last_seq(self) -> int: ...


class Journal:
    """Reads of the journal in bookmark terms, and its retention."""

    def __init__(self, store: Store, topics: Topics, writer: Position, config: ServerConfig, clock: Clock) -> None:
        self.store, self.topics, self.writer = store, topics, writer
        self.config, self.clock = config, clock

    def seq_at(self, timestamp_us: int, *, inclusive: bool = True) -> int:
        """The last retained sequence with a timestamp ≤ (or <) ``timestamp_us``; the last
        trimmed sequence when none is."""
        store = self.store

        def timestamp_of(seq: int) -> int | None:
            e = store.journal_entry(seq)
            return None if e is None else e.timestamp_us

        target = timestamp_us if inclusive else timestamp_us - 1
        return last_seq_at_or_before(target, store.journal_trimmed() + 1, self.writer.last_seq, timestamp_of)

    def as_of(self, topics: list[SowTopic], point: Point, field: str = "bookmark") -> AsOf:
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
        last = self.writer.last_seq
        if point.seq is not None:
            seq = point.seq
            if seq > last:
                raise InvalidArgument(f"bookmark {seq} is after the latest bookmark {last}", field=field)
            entry = self.store.journal_entry(seq) if seq else None
            ts = 0 if seq == 0 else (entry.timestamp_us if entry is not None else None)
        else:
            assert point.timestamp_us is not None
            ts = point.timestamp_us
            seq = self.seq_at(ts)
        now = self.clock()
        gone = set()
        for t in topics:
            history = t.history
            assert history is not None
            # a sequence number the journal no longer holds is placed by what trimming removed
            if (ts < now - history.window_us) if ts is not None else seq <= history.floor:
                gone.add(t.name)
        return AsOf(seq, ts if point.timestamp_us is not None else None, frozenset(gone))

    def replay_start(self, point: Point, field: str = "bookmark", *, whole: bool = False) -> int:
        """The sequence a replay starts after.

        ``0`` means the start of the retained journal (H-4: "everything there is"), unless
        ``whole``: a replay that continues a state as of the point (H-3) must start right after
        it, so there ``0`` means bookmark 0 and needs the whole journal. A timestamp is the last
        entry at or before it.

        Raises:
            OutOfRange: the point is older than the retained journal.
            InvalidArgument: a sequence number after the latest one.
        """
        trimmed = self.store.journal_trimmed()
        last = self.writer.last_seq
        if point.now:
            return last
        if point.seq == 0 and not whole:
            return trimmed
        if point.seq is not None:
            after = point.seq
            if after > last:
                raise InvalidArgument(f"bookmark {after} is after the latest bookmark {last}", field=field)
        else:
            assert point.timestamp_us is not None
            after = self.seq_at(point.timestamp_us)
            if after == trimmed and trimmed:
                # no retained entry is at or before that time, and the trimmed ones' times are
                # gone, so nothing says the replay would be complete
                after = -1
        if after < trimmed:
            raise OutOfRange(
                f"bookmark {point.seq if point.seq is not None else 'at that time'} is older than the retained "
                f"journal, which starts after bookmark {trimmed}; resubscribe from {trimmed} or later (or query "
                "the current state)",
                oldest_bookmark=trimmed,
                field=field,
            )
        return after

    def replay(
        self, span: tuple[int, int], wants: Callable[[str], bool], *, track_old: bool
    ) -> AsyncIterator[list[Change]]:
        """The journal changes in ``span`` (after, upto] that a subscription placed with a
        bookmark must see first: ``wants`` picks its topics, ``track_old`` its delta (D-2)."""
        after, upto = span
        return replay_changes(
            self.store,
            wants=wants,
            sow_topics=self.topics.sow,
            after=after,
            upto=upto,
            track_old=track_old,
        )

    def trim(self) -> int:
        """Retention: remove entries older than ``journal_max_age``, beyond the newest
        ``journal_max_entries``, or beyond about ``journal_max_bytes`` on disk; returns the last
        removed sequence (0: none yet)."""
        cfg = self.config
        trimmed = self.store.journal_trimmed()
        last = self.writer.last_seq
        upto = trimmed
        if cfg.journal_max_entries:
            upto = max(upto, last - cfg.journal_max_entries)
        if cfg.journal_max_age_s:
            cutoff = self.clock() - int(cfg.journal_max_age_s * 1_000_000)
            upto = max(upto, self.seq_at(cutoff, inclusive=False))
        if cfg.journal_max_bytes:
            size = self.store.journal_bytes()
            if size > cfg.journal_max_bytes:
                # keep the share of the newest entries that fits, assuming entries of even size;
                # the trimmed range is compacted at once, so the next look sees the new size
                kept = int((last - trimmed) * cfg.journal_max_bytes / size)
                upto = max(upto, last - kept)
        if upto > trimmed:
            self.store.trim_journal(upto)
            log.info("journal retention: removed bookmarks %d..%d", trimmed + 1, upto)
        return upto
