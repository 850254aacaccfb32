"""The engine: one object over the store, the topics and the subscriptions.

:class:`Engine` is assembled from the writer (publish, delete, expiration, trimming),
subscriptions, and the shared base; queries are defined here.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from sowdb.engine.base import Clock, EngineBase, TopicSummary, system_clock
from sowdb.engine.bookmarks import parse_bookmark
from sowdb.engine.query import PreparedQuery, QueryEvent, QueryOptions
from sowdb.engine.subscribing import Subscribing
from sowdb.engine.writer import InMessage, MessageLike, Writer

__all__ = ["Clock", "Engine", "EngineBase", "InMessage", "MessageLike", "TopicSummary", "system_clock"]


class Engine(Writer, Subscribing):
    """Owns the topics and the store; the servicer's only way to read or change state."""

    def sow(self, opts: QueryOptions) -> AsyncIterator[QueryEvent]:
        """Prepare and run a SOW query (all validation happens before the first event).

        Raises:
            InvalidArgument, FailedPrecondition: before any event is produced.
        """
        query = PreparedQuery(opts)
        topics = self.query_topics(opts.topic)
        point = parse_bookmark(opts.bookmark) if opts.bookmark.strip() else None
        if point is not None and not point.now:
            as_of = self._as_of(topics, point)
            return query.run(query.snapshot_heads(topics, as_of), as_of.seq, self.clock(), as_of=as_of)
        sources = query.snapshot(topics)
        return query.run(sources, self.last_seq, self.clock())
