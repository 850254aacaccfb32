"""The cluster's committed point (SPEC §13, HA-3): what this node may acknowledge, show its
subscribers and answer queries with.

One owner for one point. A write is **committed** once the sync set holds it (``sync``; under
``async``, once the primary has it); only then is it acknowledged, shown to subscribers (the
engine's delivery gate, :mod:`sowdb.engine.live.gate`) or shown by a query. On the primary the
point follows its followers' reports; on a replica it is the one the primary ships in its Follow
frames, so a replica's subscribers never see what a failover may lose either. Before this module
the gate was moved from six call sites in three files; now :class:`CommitPoint` is the only
caller of the engine's commit and hold methods (``guard_writes``, ``deliver_upto``,
``shown_upto``, ``hold_reads``).

Acknowledgement under ``sync`` waits until every node of the sync set
(:mod:`sowdb.cluster.syncset`) holds the write. A member that stays connected but does not hold
it after ``lease_ttl`` and has applied nothing for ``lease_ttl`` (paused, stuck) is marked
stalled, so the set keeper replaces it or (``sync``) empties the set; one that still applies is
waited for. Either way the write is ``UNAVAILABLE`` after two ``lease_ttl`` (the client retries
it, J-4).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import TYPE_CHECKING

from sowdb.errors import Unavailable

if TYPE_CHECKING:
    from sowdb.cluster.node import Node

log = logging.getLogger("sowdb.cluster")


class CommitPoint:
    """One node's committed point: acknowledgements, the delivery gate and the read hold."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self.engine = node.engine
        self.written = asyncio.Event()
        """Pulsed when this primary acknowledges or commits a write (or refreshes a conflated
        topic): the Follow streams wake and ship it."""
        self._committed = 0  # the committed point the Follow streams were last woken for

    def attach(self) -> None:
        """Make the engine a node's: writes checked by the role, acknowledged here."""
        self.engine.guard_writes(self.node.check_write, self.acknowledge)

    def pulse(self) -> None:
        self.written.set()
        self.written.clear()

    def shown(self) -> int:
        """The committed point as subscribers see it (a primary ships it to its replicas)."""
        return self.engine.shown_upto()

    # --- the primary --------------------------------------------------------------------------

    async def acknowledge(self, bookmark: int) -> None:
        """Return once the write that ended at ``bookmark`` may be acknowledged (HA-1, HA-3).

        Raises:
            Unavailable: this primary was fenced meanwhile, or (``sync``) the sync set did not
                come to hold the write within two ``lease_ttl``, or (``sync_strict``) it has
                fewer than ``sync_replicas`` nodes.
        """
        node = self.node
        epoch = node.election.epoch
        self.pulse()
        if node.cluster.ack != "async":
            await self.replicated(bookmark, epoch)
        if not node.election.may_acknowledge(epoch):
            raise Unavailable(f"node {node.cluster.node} stopped being the primary before acknowledging; retry")
        node.sync.acknowledged(bookmark)
        self.release()

    def held(self, bookmark: int) -> bool:
        """Every node of the sync set holds ``bookmark`` (an empty set: trivially, the fallback;
        ``sync_strict``: never with fewer than ``sync_replicas`` in the set)."""
        node = self.node
        followers, required = node.followers, node.sync.required()
        if node.cluster.ack == "sync_strict" and len(required) < node.cluster.sync_replicas:
            return False  # never acknowledged by fewer than sync_replicas
        return all(m in followers and followers[m].applied >= bookmark for m in required)

    async def replicated(self, bookmark: int, epoch: int) -> None:
        """Wait until every node of the sync set holds ``bookmark`` (see the module)."""
        node, sync = self.node, self.node.sync
        now = time.monotonic()
        stall_at, give_up = now + node.cluster.lease_ttl_s, now + 2 * node.cluster.lease_ttl_s
        async with node.reported:
            while not (sync.written(epoch) and self.held(bookmark)):
                now = time.monotonic()
                if now >= give_up or not node.election.may_acknowledge(epoch):
                    raise Unavailable(
                        f"the sync set of node {node.cluster.node} ({', '.join(sorted(sync.required())) or 'none'}"
                        f", ack = {node.cluster.ack}) does not hold bookmark {bookmark}: written here but not "
                        "acknowledged; retry"
                    )
                wake = stall_at
                if now >= stall_at and sync.written(epoch):
                    wake = self._stall(bookmark, now)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(min(wake, give_up) - now):  # not wait_for: see SyncSet.run
                        await node.reported.wait()

    def _stall(self, bookmark: int, now: float) -> float:
        """Mark the connected members that do not hold ``bookmark`` and have applied nothing
        for ``lease_ttl`` as stalled (the caller holds the node's ``reported``): the set keeper
        replaces them. A member that still applies is waited for (on a loaded machine a replica
        may fall seconds behind and still be alive: dropping it would give up ``sync`` for
        nothing). Returns when to look again: when the first member still applying has been
        quiet for ``lease_ttl``, if it stays quiet."""
        node = self.node
        ttl, again = node.cluster.lease_ttl_s, now + node.cluster.lease_ttl_s
        for name in sorted(node.sync.required()):
            f = node.followers.get(name)
            if f is None or f.applied >= bookmark or f.stalled_at:
                continue
            if now < f.progressed + ttl:
                again = min(again, f.progressed + ttl)
                continue
            f.stalled_at = bookmark
            log.warning(
                "cluster %s: follower %s has applied nothing for %gs and does not hold bookmark %d (it holds %d): "
                "not counted for sync acknowledgements until it does",
                node.cluster.name,
                f.node,
                ttl,
                bookmark,
                f.applied,
            )
            node.reported.notify_all()
        return again

    def release(self) -> None:
        """On a ``sync`` primary, let subscribers see only what every node of the sync set holds:
        a change a failover can still lose is shown to no one. With the set empty (``sync``
        acknowledging alone) it shows everything, as it acknowledges; before the set is written
        at its epoch it shows nothing new, as it acknowledges nothing."""
        node = self.node
        ack, election, sync = node.cluster.ack, node.election, node.sync
        if ack == "async" or not election.is_leader or not sync.written(election.epoch):
            return
        required = sync.required()
        if not required:
            if ack == "sync":
                self.engine.deliver_upto(None)
        elif ack == "sync" or len(required) >= node.cluster.sync_replicas:
            self.engine.deliver_upto(min(node.followers[m].applied if m in node.followers else 0 for m in required))
        if (committed := self.engine.shown_upto()) != self._committed:
            self._committed = committed
            self.pulse()  # the Follow streams tell the replicas that the committed point moved

    # --- roles --------------------------------------------------------------------------------

    def role_changed(self, kind: str) -> None:
        """The election's event ``kind`` (``lead``, ``fenced``, ``follow``): a new primary holds
        deliveries from its last bookmark until the replicas hold it; a primary's queries show
        no write a failover could lose (HA-3); any other node's read its state as written (reads
        go on everywhere, even with no primary), a replica's while it follows excepted
        (:meth:`following`)."""
        node = self.node
        if node.cluster.ack == "async":
            if kind == "lead":  # it acknowledges alone: it shows what it writes (as a replica, its
                self.engine.deliver_upto(None)  # gate followed the points its primary shipped)
            return
        if kind == "lead":
            self.engine.deliver_upto(self.engine.last_seq)
        holds = kind == "lead" or (node.following and kind == "follow")
        self.engine.hold_reads(2 * node.cluster.lease_ttl_s if holds else None)

    def following(self, started: bool) -> None:
        """A replica started or stopped following: while it follows, its queries' results wait,
        as its subscribers do, for the committed point the primary ships (HA-3); when it follows
        no one it reads its state as written, so reads go on while no primary is known."""
        node = self.node
        if node.cluster.ack == "async" or node.election.is_leader:
            return
        self.engine.hold_reads(2 * node.cluster.lease_ttl_s if started else None)

    def shipped(self, committed: int) -> None:
        """A replica: the primary's committed point came in a frame; show up to it."""
        self.engine.deliver_upto(committed)
