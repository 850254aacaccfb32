"""The readers' figures in the writer's: a ``sowd --workers N`` group reads as one server (issue 41).

A reader serves its own subscriptions, but the operators' figures are the writer's to answer
(the Stats RPC, ``sow stats``, ``/metrics``, the console). So each reader sends the writer what
those figures need of it — its subscriptions and their queues, the slow consumers it cut off,
its calls — in one small report (:meth:`ReaderReports.take`), about once a second and only when it
changed (``sowdb.workers.reports``), and the writer adds them to its own snapshot
(:meth:`GroupFigures.merged`). The writer's figures are of one point of its total order; a
reader's are as old as its last report (a second or so): the group's figures are a sum, not
one point of the order. A report costs the reader a look-up and a tuple per subscription (what
never changes is taken once, :class:`ReaderReports`) and the writer a ``marshal.loads``: on a
loaded 2-core machine, ~2 ms a second on the reader and ~0.6 ms on the writer per 1,000
subscriptions.

A reader that goes (its feed ended: it died, or was cut off) takes its subscriptions and queues
out of the figures with it, as the writer forgets its claims (:meth:`GroupFigures.forget`); what
it counted (slow consumers cut off, calls) stays in the group's totals, so that a counter of
the group never goes back while the writer runs.
"""

from __future__ import annotations

import marshal
import time
from collections import Counter
from collections.abc import Container, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from sowdb.engine.access import Access
from sowdb.engine.counters import Counters
from sowdb.engine.live import Subscription, SubscriptionHub
from sowdb.engine.stats import ProcessFigures, RpcFigures, StatsSnapshot, SubscriptionFigures

_Rpc = tuple[str, int, dict[str, int], float, tuple[int, ...]]  # name, calls, errors, seconds, buckets


class ReaderReports:
    """A reader's reports to its writer (:meth:`take`), the part of each subscription's figures
    that does not change (its id, topic, filter, user, peer, limits, age, the topics it follows)
    taken once: a report then costs a look-up and a tuple per subscription."""

    def __init__(self) -> None:
        self._fixed: dict[str, tuple[Subscription, object, tuple[Any, ...]]] = {}  # sub key: (sub, filter, part)

    def take(self, reader: int, name: str, hub: SubscriptionHub, counters: Counters, topics: Iterable[str]) -> bytes:
        """What the writer's figures need of a reader's subscriptions and calls (``marshal``:
        str, int, float, bool, tuples and dicts only). ``name``: the process's (``reader-1``);
        ``topics``: the names a pattern subscription may follow (the configured topics, views and
        conflated topics).

        A subscription's age is sent as the wall-clock time it was placed (to a tenth of a
        second), so that a report of subscriptions that did nothing is the same bytes as the last.
        """
        names: tuple[str, ...] | None = None
        fixed: dict[str, tuple[Subscription, object, tuple[Any, ...]]] = {}
        subs = []
        for key, s in hub.subs.items():
            had = self._fixed.get(key)
            if had is None or had[0] is not s or had[1] is not s.filter:  # new, or refiltered
                names = tuple(topics) if names is None else names
                had = (s, s.filter, _fixed_part(s, hub, names))
            fixed[key] = had
            sub_id, topic, flt, user, peer, max_events, max_bytes, placed, followed = had[2]
            queue = (len(s.queue) + len(s.held or ()), s.queued_bytes, max_events, max_bytes, s.sent_events)
            subs.append((sub_id, topic, flt, user, peer, *queue, s.held is not None, placed, followed))
        self._fixed = fixed
        rpcs = [(rpc, c.calls, dict(c.errors), c.seconds, tuple(c.buckets)) for rpc, c in sorted(counters.rpcs.items())]
        return marshal.dumps((reader, name, subs, hub.dropped_slow, rpcs))


def _fixed_part(s: Subscription, hub: SubscriptionHub, names: tuple[str, ...]) -> tuple[Any, ...]:
    """What a report tells of a subscription that its deliveries never change."""
    follows = hub.follows(s)
    followed = tuple(n for n in (names if s.regex is not None else (s.topic,)) if follows(n))
    placed = round(time.time() - time.monotonic() + s.placed_at, 1)
    flt = s.filter.text if s.filter is not None else ""
    return (s.name, hub.shown_topic(s), flt, s.access.user, s.owner, s.max_records, s.max_bytes, placed, followed)


@dataclass
class _Report:
    """A reader's last report, decoded."""

    name: str
    subscriptions: list[tuple[Any, ...]]  # the fields of SubscriptionFigures but the age; placed; followed
    cutoffs: int
    rpcs: list[_Rpc]


@dataclass
class GroupFigures:
    """The writer's copy of its readers' last reports, by the number the feed knows each by."""

    readers: dict[int, _Report] = field(default_factory=dict)
    gone_cutoffs: int = 0  # counted by readers that have gone
    gone_rpcs: list[_Rpc] = field(default_factory=list)

    def report(self, payload: bytes, attached: Container[int]) -> None:
        """Keep a reader's report (:meth:`ReaderReports.take`) if the reader is among ``attached``
        (one that went meanwhile was forgotten, and what it counted is in the totals already)."""
        reader, name, subs, cutoffs, rpcs = marshal.loads(payload)
        if reader in attached:
            self.readers[reader] = _Report(name, subs, cutoffs, rpcs)

    def forget(self, reader: int) -> None:
        """The reader is gone: its subscriptions leave the figures; its counts stay in the totals."""
        gone = self.readers.pop(reader, None)
        if gone is not None:
            self.gone_cutoffs += gone.cutoffs
            self.gone_rpcs = _sum_rpcs([*self.gone_rpcs, *gone.rpcs])

    def merged(self, snap: StatsSnapshot, access: Access, topic: str) -> StatsSnapshot:
        """``snap`` (the writer's figures for a caller with ``access``, of the topics ``topic``
        names) with the readers' added, as :meth:`Stats.snapshot` would count them: each
        topic's subscriptions, the caller's own subscriptions (all for an admin) that follow
        the topics asked for, and the server-wide totals."""
        if not self.readers and not self.gone_cutoffs and not self.gone_rpcs:
            return snap
        subs = [s for r in self.readers.values() for s in r.subscriptions]
        following = Counter(name for s in subs for name in s[-1])
        topics = tuple(replace(t, subscriptions=t.subscriptions + following[t.name]) for t in snap.topics)
        asked = {t.name for t in snap.topics}
        now = time.time()
        shown = tuple(
            _figures(s, now)
            for s in subs
            if (access.admin or (access.user and s[3] == access.user)) and (not topic or asked.intersection(s[-1]))
        )
        server = snap.server
        if server is not None:
            rpcs = _sum_rpcs(
                [*((r.rpc, r.calls, r.errors, r.seconds, r.buckets) for r in server.rpcs), *self.gone_rpcs]
                + [rpc for r in self.readers.values() for rpc in r.rpcs]
            )
            server = replace(
                server,
                subscriptions=server.subscriptions + len(subs),
                queued_events=server.queued_events + sum(s[5] for s in subs),
                slow_consumer_cutoffs=server.slow_consumer_cutoffs
                + self.gone_cutoffs
                + sum(r.cutoffs for r in self.readers.values()),
                rpcs=tuple(RpcFigures(*r) for r in rpcs),
                processes=(
                    ProcessFigures("writer", server.subscriptions, server.queued_events),
                    *sorted((_process(r) for r in self.readers.values()), key=lambda p: p.name),
                ),
            )
        return replace(snap, topics=topics, subscriptions=snap.subscriptions + shown, server=server)


def _process(report: _Report) -> ProcessFigures:
    return ProcessFigures(report.name, len(report.subscriptions), sum(s[5] for s in report.subscriptions))


def _figures(sub: tuple[Any, ...], now: float) -> SubscriptionFigures:
    """A reader's subscription as reported, its age now."""
    sub_id, topic, flt, user, peer, queued, queued_bytes, max_events, max_bytes, sent, catching_up, placed, _ = sub
    age = max(0.0, now - placed)
    return SubscriptionFigures(
        sub_id, topic, flt, user, peer, queued, queued_bytes, max_events, max_bytes, sent, catching_up, age
    )


def _sum_rpcs(rpcs: Iterable[_Rpc]) -> list[_Rpc]:
    """The figures of each RPC summed over processes, by name."""
    calls: Counter[str] = Counter()
    errors: dict[str, Counter[str]] = {}
    seconds: Counter[str] = Counter()
    buckets: dict[str, list[int]] = {}
    for name, n, refused, s, counts in rpcs:
        calls[name] += n
        errors.setdefault(name, Counter()).update(refused)
        seconds[name] += s  # type: ignore[assignment]  # a Counter of floats
        had = buckets.setdefault(name, [0] * len(counts))
        buckets[name] = [a + b for a, b in zip(had, counts, strict=True)]
    return [(name, calls[name], dict(errors[name]), seconds[name], tuple(buckets[name])) for name in sorted(calls)]
