"""Conflated topics' refreshes (C-2): by the clock on a primary or a server alone; on a replica
at its primary's instants (SPEC §13, HA-2).

What a refresh publishes depends only on which changes precede it, so a replica that refreshed
by its own clock, or even by the journal's time, could publish a key's state that its primary
published a refresh later: a frame whose entries straddle the primary's refresh is applied
whole. So a replica never refreshes on its own (``Engine.flush_conflated`` does nothing there);
its primary tells it of each refresh, the topic, the bookmark after which and the instant
(``Writer.refreshed``, shipped by the cluster), and the replica refreshes that topic right
after applying that bookmark, at that instant, whatever its interval says.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sowdb.engine.write.writer import Writer

Refreshed = Callable[[str, int, int], None]
"""Told of a refresh: (conflated topic, the last bookmark before it, its time in µs)."""


def refresh(writer: Writer, at_us: int | None = None, topic: str = "") -> int:
    """Refresh every conflated topic whose interval has passed by the writer's clock; or, with
    ``at_us`` (a replica), ``topic`` at that instant, as its primary did. A topic's restricted
    copies (readers under row filters, :mod:`sowdb.engine.state.restricted_joins`) refresh
    right after it, at its instants. Each refresh that published something goes to
    ``writer.refreshed``; returns the changes published."""
    now = writer.clock() if at_us is None else at_us
    count = 0
    for d in writer.topics.conflated():
        if topic not in ("", d.name) or (at_us is None and now < d.next_flush_us):
            continue
        out = d.flush(now, force=True)
        if out:
            writer.counters.topic(d.name).followed(out)
            writer.fan_out(d.name, out, now)
        published = len(out)
        for copy in d.copies:
            copied = copy.flush(now, force=True)
            if copied:
                writer.fan_out(copy.name, copied, now)
                published += len(copied)
        if published:
            count += published
            if writer.refreshed is not None:
                writer.refreshed(d.name, writer.last_seq, now)
    return count
