"""The sync set (SPEC §13, HA-3): which replicas hold every acknowledged write, kept in etcd.

Patroni's ``/sync`` key. Under ``sync`` the primary keeps ``/sowdb/NAME/sync`` = ``{epoch,
leader, nodes}``: ``sync_replicas`` connected replicas that hold every write it acknowledged. It
writes the key in a transaction guarded by its leader key's ``create_revision``
(:meth:`Dcs.write_sync`), so a deposed primary cannot write it, and without a lease, so it outlives
the primary: it is what the nodes read when the primary is gone. A batch is acknowledged once
every node of the set holds it (:meth:`~sowdb.cluster.commit.CommitPoint.held`). Only a member —
or the primary that wrote the set, which holds everything it acknowledged — may then take the
leader key (the election's eligibility, :meth:`SyncSet.allows`); a node outside a non-empty set
never does, so a lagging replica is not promoted while the replica holding the acknowledged
writes is down: the cluster waits instead of losing them.

The set changes so that at every instant each node etcd names holds every acknowledged write:

- **Only members.** A follower counts only if etcd holds its member record (``members/NODE``,
  under its lease: it takes part in the election) — a stream that calls itself ``n9`` does
  not — and only for what the primary sent it (:mod:`sowdb.cluster.shipping`).
- **Adding first.** A replica joins only once it holds the highest bookmark acknowledged so far
  (:attr:`SyncSet.acked`), and from that instant acknowledgements wait for it too (in memory,
  before the etcd write: stricter, never looser); then etcd gets the union of old and new.
- **Removing after.** A member that is gone or stalled (it did not report holding a bookmark
  within ``lease_ttl``) leaves the set in etcd first; acknowledgements stop waiting for it only
  once etcd no longer names it. A write whose answer was lost (a timeout) may have been
  applied: until a later write is known to be, acknowledgements wait for every node it named.
- **Too few replicas.** Under ``sync`` the primary writes an empty set (logged, counted in
  :attr:`SyncSet.fallbacks`), then acknowledges alone: HA-3's fallback to async, under which the
  most advanced live node is eligible again. ``sync_strict`` never empties the set: a stalled
  member stays in it and writes are ``UNAVAILABLE`` until it, or a replacement, holds them.
- **A new primary** acknowledges nothing until it has written a set at its epoch: the old set
  names nodes that hold the old primary's acknowledged writes, not necessarily the new one's.
  It waits up to ``lease_ttl`` for its followers to connect and catch up before it falls back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import TYPE_CHECKING

from sowdb.cluster.dcs import ClusterView, EtcdUnavailable, SyncRecord

if TYPE_CHECKING:
    from sowdb.cluster.node import Node

log = logging.getLogger("sowdb.cluster")


class SyncSet:
    """The primary's side (keeping the set) and every node's reading of it (eligibility)."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self.epoch = 0  # the epoch of this primary at which the set was last written (0: not yet)
        self.members: tuple[str, ...] = ()  # the set as etcd holds it (written at self.epoch)
        self.adding: tuple[str, ...] = ()  # joining: acknowledgements wait for them already
        self.unsure: set[str] = set()  # named by a write whose answer was lost: etcd may hold it
        self.acked = 0  # the highest bookmark this primary acknowledged (or held when it took the key)
        self.pin = ""  # a switchover's target: added once it holds everything
        self.fallbacks = 0  # how many times the set was emptied (acknowledging alone)
        self._led = 0  # the epoch self._since belongs to
        self._since = 0.0  # monotonic: when this node took the key at self._led
        self._left: dict[str, float] = {}  # follower → when its stream ended
        self.seen: SyncRecord | None = None  # the record as this node last read it
        self._strangers: set[str] = set()  # followers without a member record, logged once each

    # --- acknowledgement -------------------------------------------------------------------------

    def required(self) -> set[str]:
        """The nodes an acknowledgement waits for: the set etcd holds, and those joining it."""
        return (set(self.members) | set(self.adding) | self.unsure) - {self.node.cluster.node}

    def written(self, epoch: int) -> bool:
        """Whether this primary has written the set at ``epoch`` (before that it acknowledges nothing)."""
        return self.epoch == epoch != 0

    def acknowledged(self, bookmark: int) -> None:
        self.acked = max(self.acked, bookmark)

    def left(self, node: str) -> None:
        """A follower's stream ended: it stays in the set for ``lease_ttl`` (it may reconnect)."""
        self._left[node] = time.monotonic()

    # --- eligibility ------------------------------------------------------------------------------

    def allows(self, view: ClusterView) -> bool:
        """Whether this node may take the leader key, given a snapshot of the cluster: with a
        non-empty set, only a member or the primary that wrote it, and the most advanced of
        those alive; with none (a new cluster, or the fallback), the most advanced live node."""
        me, record, applied = self.node.cluster.node, view.sync, view.applied
        if record != self.seen:
            self.seen = record
            if record is not None and record.nodes and me not in record.nodes and me != record.leader:
                log.info(
                    "cluster %s: node %s is not in the sync set %s (written by %s at epoch %d): it never takes "
                    "the leader key while the set names others, who hold every acknowledged write",
                    self.node.cluster.name,
                    me,
                    list(record.nodes),
                    record.leader,
                    record.epoch,
                )
        mine = applied.get(me, 0)
        if record is None or not record.nodes:
            return mine >= max(applied.values(), default=0)
        allowed = {*record.nodes, record.leader}
        if me not in allowed:
            return False
        return mine >= max((a for n, a in applied.items() if n in allowed), default=0)

    # --- the primary keeps it -----------------------------------------------------------------

    async def run(self) -> None:
        """Until cancelled: on the primary, bring the set in etcd to what it should be, at each
        follower report and every quarter loop."""
        node = self.node
        while True:
            epoch = node.election.epoch
            if epoch and epoch != self._led:  # just took the key
                self._led, self._since = epoch, time.monotonic()
                self.acked = node.engine.last_seq  # held here; some of it was acknowledged before
                self.epoch, self.members, self.adding, self.unsure = 0, (), (), set()
            if epoch:
                await self._check_members()
            if not epoch:
                self._led, self.epoch, self.members, self.adding, self.unsure = 0, 0, (), (), set()
            elif (target := self._target(epoch)) is not None and (not self.written(epoch) or target != self.members):
                try:
                    await self._write(epoch, target)
                except EtcdUnavailable as exc:
                    log.warning("cluster %s: the sync set was not written: %s", node.cluster.name, exc)
                except Exception:  # the keeper must outlive a surprise: acknowledgements wait on it
                    log.exception("cluster %s: the sync set was not written", node.cluster.name)
                async with node.reported:
                    node.commit.release()  # what the new set holds may be shown
                    node.reported.notify_all()  # acknowledgements waiting on the set look again
            # asyncio.timeout, not wait_for: Python 3.11's wait_for can swallow a cancellation that
            # arrives as the wait completes, and this loop would then outlive the node's stop
            async with node.reported:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(node.cluster.loop_wait_s / 4):
                        await node.reported.wait()

    def _target(self, epoch: int) -> tuple[str, ...] | None:
        """What the set should be now (None: leave it). Sets :attr:`adding` to the members it
        adds, in the same step as it checks that they hold every acknowledged write."""
        cluster, followers, now = self.node.cluster, self.node.followers, time.monotonic()
        if cluster.ack == "async":
            return ()
        me, ttl = cluster.node, cluster.lease_ttl_s
        grace = now < self._since + ttl  # a new primary's followers are still connecting

        def healthy(n: str) -> bool:
            f = followers.get(n)
            if f is not None:
                return not f.stalled_at
            return now < max(self._since, self._left.get(n, 0.0)) + ttl  # gone, for now

        current = self.members if self.written(epoch) else ()
        want = [m for m in current if m != me and healthy(m)]
        ready = sorted(
            (
                f
                for f in followers.values()
                if f.node not in want and not f.stalled_at and f.applied >= self.acked and f.member
            ),
            key=lambda f: (-f.applied, f.node),
        )
        for f in ready:
            if len(want) < cluster.sync_replicas or f.node == self.pin:
                want.append(f.node)
        if len(want) < cluster.sync_replicas:
            if grace and not self.written(epoch):
                return None  # wait for the followers before falling back
            if cluster.ack == "sync_strict":  # never emptied: keep the stalled members
                want += [m for m in current if m not in want][: cluster.sync_replicas - len(want)]
                if not want:
                    return None
            else:
                want = []
        target = tuple(sorted(want))
        self.adding = tuple(sorted(set(target) - set(current)))
        return target

    async def _check_members(self) -> None:
        """Mark the followers etcd holds a member record of (the last round's snapshot, else one
        read of the key per follower that connected since): a follower without one is a
        stream, not a node of the cluster, and never counts for ``sync``."""
        election = self.node.election
        for f in list(self.node.followers.values()):
            if f.member:
                continue
            try:
                f.member = f.node in election.view.eligible or await election.dcs.is_member(f.node)
            except EtcdUnavailable:
                continue
            if not f.member and f.node not in self._strangers:
                self._strangers.add(f.node)
                log.warning(
                    "cluster %s: follower %s has no member record in etcd: it does not count for sync",
                    self.node.cluster.name,
                    f.node,
                )

    async def _write(self, epoch: int, target: tuple[str, ...]) -> None:
        """Write ``target`` at ``epoch``: the union of old and new first when it adds (adding
        first, removing after), guarded by this primary's leader key."""
        node = self.node
        steps = [target]
        if self.written(epoch) and self.adding and set(self.members) - set(target):
            steps.insert(0, tuple(sorted(set(self.members) | set(target))))
        for nodes in steps:
            record = SyncRecord(epoch, node.cluster.node, nodes)
            # a write that times out may still have been applied: until one is known to be,
            # acknowledgements wait for every node such a write named
            self.unsure |= set(nodes)
            if not await node.election.dcs.write_sync(record):
                log.warning("cluster %s: the sync set was not written: epoch %d is over", node.cluster.name, epoch)
                return
            self.members, self.epoch, self.unsure = nodes, epoch, set()
        self.adding = ()
        if not target and node.cluster.ack != "async":
            self.fallbacks += 1
            log.warning(
                "cluster %s: fewer than %d caught-up replicas follow %s: the sync set is empty, acknowledging "
                "alone (async) until one catches up",
                node.cluster.name,
                node.cluster.sync_replicas,
                node.cluster.node,
            )
        else:
            log.info("cluster %s: the sync set at epoch %d is %s", node.cluster.name, epoch, list(target))
