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

    def __call__(self, topic: str, changes: Sequence[Change], now_us: int) -> None:
        self.hub.fan_out(topic, changes)  # the subscriptions and the live pages, behind the gate
        for d in self.topics.downstream.get(topic, ()):
            out = d.apply(changes, now_us)
            if out:
                counted = self.counters.topics.get(d.name)  # a configured one, not an aggregated subscription's
                if counted is not None:
                    counted.followed(out)
                self(d.name, out, now_us)
