"""Live deliveries held until the cluster holds the write (HA-3 with ``ack = "sync"``).

A subscriber must not be shown a change its cluster could still lose. Should a primary die after
telling its subscribers of a write that no replica had, its successor writes other entries at
those bookmarks, and a subscriber resuming from its last bookmark (HA-5) would have seen one
history and go on in another (the Node SDK's kill -9 test caught it, about one run in ten). So on
a ``sync`` primary the gate is shut: the writer's fan-out to subscribers is held here batch by
batch and let through, in order, as the replicas report holding each batch
(:meth:`DeliveryGate.release`): Raft's commit index, with the sync replicas as the quorum. A
replica's gate follows the committed point its primary ships in every Follow frame, so that a
replica's subscribers see no write the sync set does not hold yet either (issue 38, finding 3).
A lone server and an ``async`` primary keep it open, and nothing is held.

A subscription placed while the gate is shut starts where its first event can come from:

- a plain subscription at the committed bookmark; the held batches after it reach it when
  released, and its ``subscribed`` bookmark is that point, so a resume never skips what a
  successor may write there;
- one with a bookmark replays the journal up to the committed bookmark only, then the same;
- one with a query of the current state at the writer's last bookmark: the query read every
  applied record, so the held batches before it are not its business.

The hub offers a released batch only to the subscriptions placed before it (:attr:`since`).

Queries wait too, on a ``sync`` cluster's primary (:meth:`sowdb.engine.Engine.hold_reads`): a
query's snapshot is pinned at once, but its results (a ``sow``, the first state of a
``sow_and_subscribe``, a first page) go out only once the gate has let its bookmark through
(:meth:`DeliveryGate.reached`), so no query of the primary shows a write a failover could lose
either; a replica's too while it follows (its gate being the committed point). A node that
follows no one, or a primary that stepped down, reads its state as written, so that reads go on
everywhere while no primary is known.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import aclosing
from dataclasses import dataclass

from sowdb.engine.changes import Change
from sowdb.engine.events import GroupBegin, QueryEvent
from sowdb.errors import Unavailable


@dataclass(slots=True)
class HeldBatch:
    """One fan-out call of the writer, waiting: a run of one topic's changes."""

    bookmark: int  # its last change's
    topic: str
    changes: Sequence[Change]


class DeliveryGate:
    """The held batches and the committed point (None: open, nothing held)."""

    def __init__(self) -> None:
        self.committed: int | None = None
        self.held: deque[HeldBatch] = deque()
        self.since: dict[str, int] = {}  # while shut: a subscription's id -> its placement point
        self._waiting: list[tuple[int, asyncio.Future[None]]] = []  # queries: (bookmark, woken there)

    @property
    def shut(self) -> bool:
        return self.committed is not None

    def start_point(self, last_seq: int) -> int:
        """Where a subscription without a query of the current state starts (module doc)."""
        return last_seq if self.committed is None else min(self.committed, last_seq)

    def holds_back(self, bookmark: int) -> bool:
        """Whether ``bookmark`` is past what may be shown."""
        return self.committed is not None and bookmark > self.committed

    async def reached(self, bookmark: int, within_s: float) -> bool:
        """Wait until ``bookmark`` may be shown (at once when it may); False if it still may not
        after ``within_s`` seconds."""
        if not self.holds_back(bookmark):
            return True
        woken = asyncio.get_running_loop().create_future()
        self._waiting.append((bookmark, woken))
        try:
            async with asyncio.timeout(within_s):
                await woken
        except TimeoutError:
            return False
        finally:
            self._waiting = [w for w in self._waiting if w[1] is not woken]
        return True

    def stop_holding_queries(self) -> None:
        """Let every waiting query go on, whatever its bookmark (its node is no longer the
        primary: it reads its state as written, as any other node does)."""
        for _, woken in self._waiting:
            if not woken.done():
                woken.set_result(None)

    def _wake(self) -> None:
        """Wake the queries waiting for a bookmark the gate now lets through."""
        if self._waiting:
            for bookmark, woken in self._waiting:
                if not self.holds_back(bookmark) and not woken.done():
                    woken.set_result(None)

    def hold(self, topic: str, changes: Sequence[Change]) -> None:
        self.held.append(HeldBatch(max(c.bookmark for c in changes), topic, changes))

    def shut_at(self, committed: int) -> Iterator[HeldBatch]:
        """Shut the gate (or move it on) with everything up to ``committed`` let through; yields
        the batches released, in order, for the hub to offer."""
        self.committed = max(committed, self.committed or 0)
        self._wake()
        while self.held and self.held[0].bookmark <= self.committed:
            yield self.held.popleft()

    def open(self) -> Iterator[HeldBatch]:
        """Open the gate: every held batch is released, in order; nothing is held from now on."""
        self.committed = None
        self._wake()
        while self.held:
            yield self.held.popleft()
        self.since.clear()


async def committed_results(
    events: AsyncIterator[QueryEvent], gate: DeliveryGate, within_s: float
) -> AsyncIterator[QueryEvent]:
    """A query's ``events``, the first of them (its ``group_begin``, which names the bookmark its
    snapshot was pinned at) sent once ``gate`` lets that bookmark through.

    Raises:
        Unavailable: the bookmark is still held after ``within_s`` seconds (the sync replicas
            are gone or stalled): the caller retries, or reads elsewhere.
    """
    async with aclosing(events):  # type: ignore[type-var]  # typed an iterator, made by an async generator
        async for event in events:
            if isinstance(event, GroupBegin) and not await gate.reached(event.bookmark, within_s):
                raise Unavailable(
                    f"the sync replicas do not hold bookmark {event.bookmark} yet, and this query's results would "
                    f"show it (a failover could still lose it); retry, or read from a replica (read_from=any)"
                )
            yield event
