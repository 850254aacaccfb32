"""Where applied changes go after the writer: subscribers and live pages (P-1), both through the
hub and so behind its delivery gate, and the topics derived from the changed topic (V-1, C-2),
whose own changes go the same way.

All of it runs in the writer's step, synchronously, so everything downstream sees the one total
order, and a derived change takes the bookmark of the change that caused it.
"""

from __future__ import annotations

from collections.abc import Sequence

from sowdb.engine.changes import Change
from sowdb.engine.counters import Counters
from sowdb.engine.live import PageSets, SubscriptionHub
from sowdb.engine.state import Topics

SUBS_ASKED = 64
""":meth:`FanOut.olds_wanted` asks up to this many subscriptions whether they read the versions
a publish replaced (each costs ~0.12 µs on every publish); beyond, it answers yes."""


class FanOut:
    """The writer's one exit for applied changes."""

    def __init__(self, topics: Topics, hub: SubscriptionHub, pages: PageSets, counters: Counters) -> None:
        self.topics = topics
        self.hub = hub
        self.pages = pages
        self.counters = counters
        hub.behind_gate.append(pages.apply)  # a live page shows no more than a subscriber (HA-3)

    def wanted(self, topic: str) -> bool:
        """Whether anyone follows ``topic``: if not, the writer need not build changes at all
        (a shut gate keeps them for subscriptions placed before they are released; reader
        processes, ``sowd --workers``, follow every topic)."""
        hub = self.hub
        return bool(hub) or hub.gate.shut or topic in self.topics.downstream or hub.followed_elsewhere()

    def olds_wanted(self, topic: str) -> bool:
        """Whether anything that follows ``topic`` reads the versions a publish replaced (a store
        that makes them from its own form, :meth:`ArenaTopic.put_followed
        <sowdb.engine.state.arena_topic.ArenaTopic.put_followed>`, makes them only then): a
        derived topic that reads them (a view retracts the old version), reader
        processes (the feed carries both), a shut gate (what it holds goes to whoever is there
        when it opens), or a subscription that sends deltas (D-2) or sees rows under an
        entitlement (an oof then carries the version last seen, A-2). A plain subscription, a
        live page, a conflated topic and a joined view's anchor topic read only the new
        versions (:meth:`Derived.reads_olds <sowdb.engine.state.derived.Derived.reads_olds>`)."""
        hub = self.hub
        if hub.gate.shut or hub.followed_elsewhere():
            return True
        if any(d.reads_olds(topic) for d in self.topics.downstream.get(topic, ())):
            return True
        subs = hub.subs
        return len(subs) > SUBS_ASKED or any(s.options.delta or not s.access.unrestricted for s in subs.values())

    def __call__(self, topic: str, changes: Sequence[Change], now_us: int) -> None:
        self.hub.fan_out(topic, changes)  # the subscriptions and the live pages, behind the gate
        for d in self.topics.downstream.get(topic, ()):
            out = d.apply(changes, now_us)
            if out:
                counted = self.counters.topics.get(d.name)  # a configured one, not an aggregated subscription's
                if counted is not None:
                    counted.followed(out)
                self(d.name, out, now_us)
