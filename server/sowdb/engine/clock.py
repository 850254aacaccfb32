"""The engine's notion of now, injectable so that tests control time."""

from __future__ import annotations

import time
from collections.abc import Callable

Clock = Callable[[], int]
"""Returns the time in microseconds since the epoch."""


def system_clock() -> int:
    return time.time_ns() // 1000


class FollowingClock:
    """A node's now (SPEC §13, HA-2): its own clock while it writes its journal (a primary, or a
    server alone), the journal's time while it follows another's (a replica).

    A replica's history trims, journal retention, conflated topics' refreshes and the rest of
    the engine's upkeep must be functions of the journal it applied, never of its own clock: a
    replica whose clock runs ahead would trim what its primary keeps, so two nodes' stores would
    differ and a promoted replica would lack history its primary served. The journal's time is
    the newest of the applied entries' timestamps and the primary's clock as it reported it when
    its journal ended at a bookmark the replica holds (its idle ticks). It never goes back.

    The clock knows nothing of clusters: the node that owns it says when it follows
    (:meth:`follow`), what the journal's time became (:meth:`advance`), and when it leads
    (:meth:`lead`)."""

    def __init__(self, own: Clock = system_clock) -> None:
        self.own = own
        self.following = False
        self.journal_us = 0
        """The journal's time as this node knows it (µs since the epoch)."""

    def __call__(self) -> int:
        return self.journal_us if self.following else self.own()

    def follow(self, journal_us: int = 0) -> None:
        """Take the journal's time from now on (at least ``journal_us``, the last applied entry's)."""
        self.advance(journal_us)
        self.following = True

    def lead(self) -> None:
        """Take this node's own clock from now on: it writes the journal."""
        self.following = False

    def advance(self, journal_us: int) -> None:
        """The journal reached ``journal_us``; an older time changes nothing."""
        if journal_us > self.journal_us:
            self.journal_us = journal_us
