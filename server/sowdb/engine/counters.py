"""What the engine counts as it works, for the operators' figures (SPEC §12).

Counting is kept off the per-record path: the writer adds a whole batch's count and bytes at
once (:class:`TopicCounters`), a topic keeps the size of its records as they are replaced
(``SowTopic.stored_bytes``), the hub counts slow consumers as it drops them, and the protocol
layer's error boundary notes each call's end (:class:`RpcCounters`). Nothing else is updated
per message; :mod:`sowdb.engine.stats` reads the rest when asked.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Iterable, Sequence

from sowdb.engine.changes import OOF_EXPIRED, Change

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 60.0)
"""Upper bounds, in seconds, of the call-duration histogram's buckets (a last one holds the rest:
subscriptions, which last as long as their clients want)."""


class TopicCounters:
    """Changes made to one topic since the server started, counted per batch."""

    __slots__ = ("bytes_published", "deletes", "expirations", "publishes")

    def __init__(self) -> None:
        self.publishes = 0
        self.bytes_published = 0
        self.deletes = 0
        self.expirations = 0

    def published(self, raws: Sequence[bytes]) -> None:
        """A batch of documents applied."""
        self.publishes += len(raws)
        self.bytes_published += sum(map(len, raws))

    def followed(self, changes: Sequence[Change]) -> None:
        """Changes a view or conflated topic made following its underlying topic: a change
        with a new version is a publish; a removal (an emptied group, a conflated record whose
        underlying one went) is a delete, or an expiration where the removal says so, so that a
        derived topic's figures read like a SOW topic's (issue 27: deletes counted as publishes)."""
        raws = [c.new.raw for c in changes if c.new is not None]
        self.published(raws)
        removed = len(changes) - len(raws)
        if removed:
            expired = sum(1 for c in changes if c.new is None and c.reason == OOF_EXPIRED)
            self.expirations += expired
            self.deletes += removed - expired

    def removed(self, count: int, *, expired: bool) -> None:
        """Records deleted (sow_delete), or expired (X-1)."""
        if expired:
            self.expirations += count
        else:
            self.deletes += count


class RpcCounters:
    """The calls of one RPC: how many started, how long the ended ones took (a histogram over
    :data:`LATENCY_BUCKETS`), and the refusals by status code name."""

    __slots__ = ("buckets", "calls", "errors", "seconds")

    def __init__(self) -> None:
        self.calls = 0
        self.seconds = 0.0
        self.buckets = [0] * (len(LATENCY_BUCKETS) + 1)
        self.errors: dict[str, int] = {}

    def ended(self, seconds: float) -> None:
        self.seconds += seconds
        self.buckets[bisect_left(LATENCY_BUCKETS, seconds)] += 1

    def refused(self, code: str) -> None:
        self.errors[code] = self.errors.get(code, 0) + 1


class Counters:
    """Everything counted as it happens; the rest of the figures are read when asked."""

    def __init__(self, topics: Iterable[str]) -> None:
        self.topics = {name: TopicCounters() for name in topics}
        self.unconfigured = TopicCounters()  # K-5 topics, together: their names are the clients' to choose
        self.rpcs: dict[str, RpcCounters] = {}
        self._started = time.monotonic()

    def topic(self, name: str) -> TopicCounters:
        """A configured topic's counters; those of every topic without a SOW for any other name."""
        return self.topics.get(name) or self.unconfigured

    def rpc(self, name: str) -> RpcCounters:
        """The counters of an RPC (``SowService/Publish``), made on its first call."""
        counters = self.rpcs.get(name)
        if counters is None:
            counters = self.rpcs[name] = RpcCounters()
        return counters

    @property
    def uptime_s(self) -> float:
        return time.monotonic() - self._started
