"""The figures operators look at (SPEC §12), taken in one synchronous step: a snapshot is one
point of the total order. The Stats RPC answers it and the Prometheus metrics export it.

What is counted as it happens is in :mod:`sowdb.engine.counters`; everything else (records,
queues, the journal, the disk, the process) is read here, when asked.
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sowdb.engine.access import EVERYONE, Access
from sowdb.engine.counters import Counters, TopicCounters
from sowdb.engine.journal import Position
from sowdb.engine.live import Subscription, SubscriptionHub
from sowdb.engine.read import readable_topics
from sowdb.engine.state import SowTopic, Topics
from sowdb.errors import PermissionDenied
from sowdb.storage import Store


@dataclass(frozen=True)
class TopicFigures:
    """One topic's figures (kind: ``sow``, ``view`` or ``conflated``)."""

    name: str
    kind: str
    records: int
    bytes_stored: int
    publishes: int
    bytes_published: int
    deletes: int
    expirations: int
    subscriptions: int


@dataclass(frozen=True)
class SubscriptionFigures:
    """One live subscription and its queue."""

    sub_id: str
    topic: str
    filter: str
    user: str
    peer: str
    queued_events: int
    queued_bytes: int
    max_queued_events: int
    max_queued_bytes: int
    sent_events: int
    catching_up: bool
    age_s: float


@dataclass(frozen=True)
class JournalFigures:
    bytes: int
    entries: int
    oldest_bookmark: int
    oldest_timestamp_us: int  # 0: the journal is empty
    last_bookmark: int

    @property
    def oldest_timestamp_s(self) -> float:
        return self.oldest_timestamp_us / 1e6


@dataclass(frozen=True)
class RpcFigures:
    rpc: str
    calls: int
    errors: dict[str, int]
    seconds: float
    buckets: tuple[int, ...]  # counts per bucket of LATENCY_BUCKETS, then the rest (not cumulative)


@dataclass(frozen=True)
class ProcessFigures:
    """One process's share of a group's subscriptions (``writer``, ``reader-1`` ...)."""

    name: str
    subscriptions: int
    queued_events: int


@dataclass(frozen=True)
class ServerFigures:
    uptime_s: float
    cpu_seconds: float
    resident_bytes: int
    disk_bytes: int
    journal: JournalFigures
    subscriptions: int
    queued_events: int
    slow_consumer_cutoffs: int
    rpcs: tuple[RpcFigures, ...]
    unconfigured_publishes: int
    unconfigured_bytes_published: int
    processes: tuple[ProcessFigures, ...] = ()
    """Per process of a ``sowd --workers`` group (the writer, then its readers); empty for a
    server alone. The figures above are the group's totals."""


@dataclass(frozen=True)
class StatsSnapshot:
    """The figures at one point of the total order (``bookmark``), taken at ``taken_us``."""

    topics: tuple[TopicFigures, ...]
    subscriptions: tuple[SubscriptionFigures, ...]
    server: ServerFigures | None
    bookmark: int
    taken_us: int


class Stats:
    """Takes :class:`StatsSnapshot` s from the engine's parts and its :class:`Counters`."""

    def __init__(
        self,
        counters: Counters,
        topics: Topics,
        hub: SubscriptionHub,
        store: Store,
        writer: Position,
        clock: Callable[[], int],
    ) -> None:
        self.counters = counters
        self.topics = topics
        self.hub = hub
        self.store = store
        self.writer = writer
        self.clock = clock
        self.merge: Callable[[StatsSnapshot, Access, str], StatsSnapshot] | None = None
        """Adds the figures of the group's other processes (``sowd --workers``: the readers'
        subscriptions, ``GroupFigures.merged``); None for a server alone."""

    def snapshot(self, topic: str = "", *, topics_only: bool = False, access: Access = EVERYONE) -> StatsSnapshot:
        """The figures of the topics ``topic`` names (a name or a regex; empty: every topic)
        that the caller may read, of the live subscriptions that follow them, and, unless
        ``topics_only``, the server-wide figures.

        Raises:
            PermissionDenied: server-wide figures asked for by a caller without an admin role
                (§11: they cover every user's activity), or a topic named that it may not read.
            InvalidArgument, FailedPrecondition: not a valid topic name or regex, or no such topic.
        """
        if not topics_only and not access.admin:
            raise PermissionDenied(
                f"user {access.user!r} may not see the server-wide figures (they need an admin role); ask for "
                "topics_only to see the figures of the topics it may read and of its own subscriptions"
            )
        topics = self._topics(topic, access)
        subs = [s for s in self.hub.subs.values() if access.admin or (access.user and s.access.user == access.user)]
        followed = {id(s): self.hub.follows(s) for s in self.hub.subs.values()}
        if topic:
            names = {t.name for t in topics}
            subs = [s for s in subs if any(followed[id(s)](n) for n in names)]
        now_us = self.clock()
        snap = StatsSnapshot(
            topics=tuple(self._topic(t, [followed[id(s)] for s in self.hub.subs.values()], access) for t in topics),
            subscriptions=tuple(_subscription(s, self.hub.shown_topic(s)) for s in subs),
            server=None if topics_only else self._server(),
            bookmark=self.writer.last_seq,
            taken_us=now_us,
        )
        return snap if self.merge is None else self.merge(snap, access, topic)

    def _topics(self, pattern: str, access: Access) -> list[SowTopic]:
        if not pattern:
            everything = sorted(self.topics.sow.values(), key=lambda t: t.name)
            return [t for t in everything if access.admin or access.can_read(t.name)]
        if access.admin:
            return self.topics.resolve(pattern)
        return readable_topics(self.topics, pattern, access)

    def _topic(self, topic: SowTopic, follows: list[Callable[[str], bool]], access: Access) -> TopicFigures:
        """A topic's figures; a caller that sees some of its rows only is told none of those that
        count rows or bytes (0): they cover the rows it may not see (issue 26)."""
        hidden = not access.sees_all(topic.name)
        c = TopicCounters() if hidden else self.counters.topics.get(topic.name) or TopicCounters()
        return TopicFigures(
            name=topic.name,
            kind=self.topics.derived_kind(topic.name) or "sow",
            records=0 if hidden else len(topic.records),
            bytes_stored=0 if hidden else topic.stored_bytes,
            publishes=c.publishes,
            bytes_published=c.bytes_published,
            deletes=c.deletes,
            expirations=c.expirations,
            subscriptions=sum(1 for f in follows if f(topic.name)),
        )

    def _server(self) -> ServerFigures:
        counters, store = self.counters, self.store
        oldest = store.first_sequence()
        entry = store.journal_entry(oldest) if oldest else None
        last = self.writer.last_seq
        subs = self.hub.subs.values()
        return ServerFigures(
            uptime_s=counters.uptime_s,
            cpu_seconds=cpu_seconds(),
            resident_bytes=resident_bytes(),
            disk_bytes=directory_bytes(store.path),
            journal=JournalFigures(
                bytes=store.journal_bytes(),
                entries=last - oldest + 1 if oldest else 0,
                oldest_bookmark=oldest,
                oldest_timestamp_us=entry.timestamp_us if entry is not None else 0,
                last_bookmark=last,
            ),
            subscriptions=len(self.hub.subs),
            queued_events=sum(_queued(s) for s in subs),
            slow_consumer_cutoffs=self.hub.dropped_slow,
            rpcs=tuple(
                RpcFigures(name, c.calls, dict(c.errors), c.seconds, tuple(c.buckets))
                for name, c in sorted(counters.rpcs.items())
            ),
            unconfigured_publishes=counters.unconfigured.publishes,
            unconfigured_bytes_published=counters.unconfigured.bytes_published,
        )


def _queued(sub: Subscription) -> int:
    return len(sub.queue) + len(sub.held or ())


def _subscription(sub: Subscription, topic: str) -> SubscriptionFigures:
    return SubscriptionFigures(
        sub_id=sub.name,
        topic=topic,
        filter=sub.filter.text if sub.filter is not None else "",
        user=sub.access.user,
        peer=sub.owner,
        queued_events=_queued(sub),
        queued_bytes=sub.queued_bytes,
        max_queued_events=sub.max_records,
        max_queued_bytes=sub.max_bytes,
        sent_events=sub.sent_events,
        catching_up=sub.held is not None,
        age_s=time.monotonic() - sub.placed_at,
    )


def cpu_seconds() -> float:
    """CPU time of this process, user and system, in seconds."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def resident_bytes() -> int:
    """This process's resident memory now (Linux ``/proc``); elsewhere its peak."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return pages * os.sysconf("SC_PAGE_SIZE")


def directory_bytes(path: str | Path) -> int:
    """The size of the files in a directory (RocksDB's data directory is flat)."""
    total = 0
    with os.scandir(path) as entries:
        for entry in entries:
            try:
                if entry.is_file(follow_symlinks=False):
                    total += entry.stat(follow_symlinks=False).st_size
            except FileNotFoundError:  # compaction removed it meanwhile
                continue
    return total
