"""SOW queries (Q-1 … Q-9) against the topic registry, current or as of a bookmark (H-2).

A query is prepared (:class:`~sowdb.engine.read.prepared.PreparedQuery`: every option checked, the
filter compiled) before anything is read; its snapshot is taken in one synchronous step, so it
sees exactly one sequence point (Q-2).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

from sowdb.config import is_regex_topic
from sowdb.engine.access import EVERYONE, Access
from sowdb.engine.bookmarks import AsOf, historical, parse_bookmark
from sowdb.engine.clock import Clock
from sowdb.engine.events import QueryEvent
from sowdb.engine.journal import Journal, Position
from sowdb.engine.read.prepared import PreparedQuery, QueryOptions
from sowdb.engine.records import StoredRecord
from sowdb.engine.state import RestrictedJoins, SowTopic, Topics
from sowdb.expr import CompiledFilter


@dataclass(frozen=True)
class Pinned:
    """What a query reads, taken in one synchronous step: the records to scan per topic, the
    point they are at, the caller's row entitlement per topic (None: unrestricted)."""

    sources: Sequence[Sequence[StoredRecord]]
    bookmark: int
    as_of: AsOf | None
    entitlements: list[CompiledFilter | None] | None


def pin(query: PreparedQuery, topics: list[SowTopic], access: Access, journal: Journal, writer: Position) -> Pinned:
    """The one sequence of every query and query-subscription once its topics are resolved:
    entitle, resolve the bookmark (H-2, H-3), snapshot (Q-2). Call with no await in between.

    Raises:
        InvalidArgument, OutOfRange: a bad bookmark, or one older than the retained journal.
    """
    opts = query.opts
    entitlements = None if access.unrestricted else [access.entitlement(t.name) for t in topics]
    point = parse_bookmark(opts.bookmark) if opts.bookmark.strip() else None
    if point is not None and not point.now:
        as_of = journal.as_of(topics, point)
        return Pinned(query.snapshot_heads(topics, as_of), as_of.seq, as_of, entitlements)
    return Pinned(query.snapshot(topics), writer.last_seq, None, entitlements)


class Queries:
    """Runs SOW queries."""

    def __init__(
        self,
        topics: Topics,
        journal: Journal,
        writer: Position,
        clock: Clock,
        *,
        frame_bytes: int,
        joins: RestrictedJoins,
    ) -> None:
        self.topics = topics
        self.joins = joins  # the joined views as readers under row filters see them
        self.journal = journal
        self.writer = writer
        self.clock = clock
        self.frame_bytes = frame_bytes

    def sow(self, opts: QueryOptions, access: Access = EVERYONE) -> AsyncIterator[QueryEvent]:
        """Prepare and run a SOW query (all validation happens before the first event), over the
        topics and rows ``access`` allows (A-1 … A-3).

        Raises:
            InvalidArgument, FailedPrecondition, OutOfRange, PermissionDenied: before any event.
        """
        query = PreparedQuery(opts)
        topics = readable_topics(self.topics, opts.topic, access)
        if not historical(opts.bookmark):  # a view keeps no history: the refusal names the view
            topics = [self.joins.route(t, access.join_filters(t.name)) for t in topics]  # V-2 under row filters
        p = pin(query, topics, access, self.journal, self.writer)
        return query.run(
            p.sources,
            p.bookmark,
            self.clock(),
            as_of=p.as_of,
            frame_bytes=self.frame_bytes,
            entitlements=p.entitlements,
        )


def readable_topics(topics: Topics, pattern: str, access: Access) -> list[SowTopic]:
    """The SOW topics a request's topic names that its caller may read: a regex matches only
    those (A-3), and no joined view it reads under row filters (those it reads by name only,
    :class:`RestrictedJoins`); a name the caller may not read is refused.

    Raises:
        PermissionDenied: a topic name the caller may not read.
    """
    if is_regex_topic(pattern):
        return topics.resolve(pattern, access.by_pattern)
    access.require_read(pattern)  # first: a name the caller may not read is not looked up (issue 26)
    return topics.resolve(pattern, known=access.known)
