"""One ``sowd`` as a node of a cluster (SPEC §13): its parts, and the role they follow.

The parts, cut along Patroni's seams:

- :mod:`sowdb.cluster.dcs`: the one door to etcd, one snapshot per round;
- :mod:`sowdb.cluster.election`: the HA loop, one decision per round over that snapshot (who
  leads, this node's eligibility, a switchover), with its lease kept apart from the data path
  (:mod:`sowdb.cluster.keepalive`);
- :mod:`sowdb.cluster.commit`: the committed point (acknowledgements, the delivery gate, the
  read hold), over the sync set :mod:`sowdb.cluster.syncset` keeps in etcd;
- :mod:`sowdb.cluster.shipping` (the primary's Follow streams) and
  :mod:`sowdb.cluster.follower` (a replica's loop, with fork handling and catch-up).

:class:`Node` holds them together and owns what follows from the role: the write check (a
replica refuses writes naming the primary; a primary past its fencing deadline refuses them as
UNAVAILABLE), the replicas that follow this primary and what they report having applied, the
switchover, and the status rows. It reaches the engine only through its replication port
(:class:`~sowdb.engine.replication.ReplicationPort`).

Eligibility (judged over each round's snapshot): each node publishes its applied bookmark under
its lease every round; while the sync set in etcd is not empty only its members (and the
primary that wrote it) may take the leader key, the most advanced live one of them, so the
successor of a dead primary holds every acknowledged write; with no set (a new cluster,
``async``, or the fallback) the most advanced live node.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter, deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace

from sowdb.cluster.commit import CommitPoint
from sowdb.cluster.dcs import ClusterView, Leader
from sowdb.cluster.election import Election, ElectionEvent, NotLeader, SwitchoverFailed
from sowdb.cluster.syncset import SyncSet
from sowdb.config.cluster import ClusterConfig
from sowdb.engine.clock import FollowingClock
from sowdb.engine.replication import ReplicationPort
from sowdb.errors import FailedPrecondition, InvalidArgument, NotPrimary, SowdbError, Unavailable

log = logging.getLogger("sowdb.cluster")

REFRESHES_KEPT = 10_000
"""How many conflated topics' refreshes a primary keeps for followers that are behind."""


@dataclass
class Follower:
    """A replica following this primary, as its last report says."""

    node: str
    advertise: str
    applied: int
    stalled_at: int = 0
    """Not counted for ``sync`` since it failed to hold this bookmark within ``lease_ttl`` (0:
    counted); counted again once it reports holding it."""
    progressed: float = field(default_factory=time.monotonic)
    """When (monotonic) it last reported applying more: a replica that still applies, however
    far behind a loaded machine leaves it, is not stalled; one that stopped for ``lease_ttl`` is."""
    sent: int = 0
    """The last bookmark this primary sent it (or that it held when it came): what it reports
    having applied is bounded by this."""
    member: bool = False
    """etcd held its member record since it connected: it may count for ``sync``."""


class Node:
    """The cluster side of one server: start with :meth:`start` once the engine is open."""

    def __init__(
        self, cluster: ClusterConfig, engine: ReplicationPort, port: int, clock: FollowingClock, peer_port: int = 0
    ) -> None:
        """``clock`` is the engine's: this node's own clock while it leads, the journal's time
        (the primary's, as shipped) otherwise, so that the engine's upkeep follows the journal
        (HA-2). It follows from here until the node leads. ``peer_port``: where it serves the
        other nodes (with node certificates), advertised on the host of ``advertise``."""
        host, _, bound = cluster.advertise.rpartition(":")
        if bound == "0":  # `--advertise HOST:0`: the port the server bound (tests bind port 0)
            cluster = replace(cluster, advertise=f"{host}:{port}")
        if peer_port:
            cluster = replace(cluster, peer=f"{host}:{peer_port}")
        else:
            log.warning(
                "cluster %s: no node certificates ([cluster] cert, key, ca): the nodes do not prove who they are, "
                "and whoever can write to etcd can make them follow a primary of its own; see docs/security.md",
                cluster.name,
            )
        self.cluster, self.engine, self.clock = cluster, engine, clock
        clock.follow(engine.last_ts)
        # the conflated topics' refreshes (C-2) as (serial, bookmark, topic, time), for followers
        self.refreshes: deque[tuple[int, int, str, int]] = deque(maxlen=REFRESHES_KEPT)
        self.refreshed = 0  # how many refreshes there were: the next one's serial
        engine.on_refresh(self._refreshed)
        self.election = Election(
            cluster, eligible=self._eligible, applied=lambda: engine.last_seq, listener=self._changed
        )
        self.followers: dict[str, Follower] = {}  # on the primary: who follows, what each applied
        self.reported = asyncio.Condition()  # a follower reported, came or went
        self.known_epoch = 0  # the newest epoch seen (led or followed)
        self.primary_last = 0  # on a replica: the primary's latest bookmark, as its last frame said
        self.diverged = ""  # on a replica: why it cannot follow (its journal forked), if so
        self.following = False  # on a replica: a Follow stream from the primary delivers frames now
        self.follow_error = ""  # on a replica: why it last failed to follow (kept until it follows)
        self.restart = asyncio.Event()  # set when this node must restart (its journal forked)
        self.refused: Counter[str] = Counter()  # peers refused, by reason (sowdb_cluster_refused_total)
        self.closers: list[Callable[[], Awaitable[None]]] = []  # run at stop, after the tasks (the peer port)
        self.sync = SyncSet(self)
        self.commit = CommitPoint(self)
        self._tasks: list[asyncio.Task[None]] = []
        self._following: asyncio.Task[None] | None = None

    @property
    def role(self) -> str:
        return "primary" if self.election.is_leader else "replica"

    @property
    def primary(self) -> str:
        """The primary's address (empty while none is known)."""
        leader = self.election.leader
        return leader.advertise if leader is not None else ""

    async def start(self) -> None:
        self.commit.attach()
        self._tasks.append(asyncio.create_task(self.election.run(), name="sowdb-election"))
        self._tasks.append(asyncio.create_task(self._supervise(), name="sowdb-replica"))
        self._tasks.append(asyncio.create_task(self.sync.run(), name="sowdb-sync-set"))

    async def stop(self) -> None:
        """Cancel the node's tasks and leave the election. A task that does not end within a
        lease (a cancellation swallowed by a library) is left behind, logged: stopping must
        not hang, and the process ends anyway."""
        tasks = [*self._tasks, *([self._following] if self._following else [])]
        for task in tasks:
            task.cancel()
        _, stuck = await asyncio.wait(tasks, timeout=self.cluster.lease_ttl_s) if tasks else (set(), set())
        for task in stuck:
            log.error("cluster %s: task %s did not end when cancelled", self.cluster.name, task.get_name())
        await self.election.close()
        for close in self.closers:
            await close()

    def refuse(self, reason: str, why: str) -> None:
        """A peer failed a check (its certificate, its name, its epoch): counted by ``reason``,
        logged, and nothing it sent applied."""
        self.refused[reason] += 1
        log.warning("cluster %s: node %s refuses a peer (%s): %s", self.cluster.name, self.cluster.node, reason, why)

    # --- writes -------------------------------------------------------------------------------

    def check_write(self) -> None:
        """Raises unless this node is a primary that may acknowledge now."""
        if self.election.may_acknowledge():
            return
        if self.election.is_leader:
            raise Unavailable(f"node {self.cluster.node} is a primary past its fencing deadline (HA-1); retry")
        primary = self.primary
        if not primary or self.election.leader is None or self.election.leader.node == self.cluster.node:
            raise Unavailable(f"node {self.cluster.node} is a replica and no primary is known yet; retry")
        raise NotPrimary(
            f"node {self.cluster.node} is a replica; write to the primary {self.election.leader.node} at {primary}",
            primary=primary,
        )

    def _refreshed(self, topic: str, bookmark: int, at_us: int) -> None:
        """A conflated topic refreshed after ``bookmark`` at ``at_us``: the followers refresh it
        there too (HA-2), woken as by a write."""
        self.refreshes.append((self.refreshed, bookmark, topic, at_us))
        self.refreshed += 1
        self.commit.pulse()

    def first_refresh(self, bookmark: int) -> int:
        """The serial of the first kept refresh at or after ``bookmark``: a follower that holds
        ``bookmark`` is sent it and every later one (one it had done already publishes nothing
        again: nothing changed since)."""
        return next((r[0] for r in self.refreshes if r[1] >= bookmark), self.refreshed)

    def refreshes_since(self, serial: int) -> list[tuple[int, int, str, int]]:
        """The refreshes from number ``serial`` on (only the last ``REFRESHES_KEPT`` are kept:
        a replica further behind misses some, and publishes their changes at a later one)."""
        if serial >= self.refreshed:  # the common case, looked at every poll: none since
            return []
        return [r for r in self.refreshes if r[0] >= serial]

    async def report(self, follower: Follower | None, node: str = "") -> None:
        """A follower's applied bookmark (None: ``node`` stopped following)."""
        async with self.reported:
            if follower is None:
                self.followers.pop(node, None)
                self.sync.left(node)
            else:
                if follower.stalled_at and follower.applied >= follower.stalled_at:
                    follower.stalled_at = 0
                    log.info(
                        "cluster %s: follower %s caught up: counted for sync again", self.cluster.name, follower.node
                    )
                self.followers[follower.node] = follower
            self.commit.release()
            self.reported.notify_all()

    def _holds_all(self, node: str) -> bool:
        """Whether follower ``node`` reported holding this node's last bookmark (after the
        switchover's fence nothing more is written here)."""
        follower = self.followers.get(node)
        return follower is not None and follower.applied >= self.engine.last_seq

    # --- role ---------------------------------------------------------------------------------

    async def switchover(self, to: str = "") -> tuple[str, int, int]:
        """Hand the primary role to the follower ``to`` (empty: the most advanced one) with
        nothing lost (HA-4, :meth:`Election.switchover`); returns (new primary, its epoch, the
        epoch this node led at). Waits at most five lease_ttl (at least 10 s).

        Raises:
            NotPrimary, Unavailable: this node is not the primary.
            FailedPrecondition: no follower, or ``to`` does not follow this primary.
            InvalidArgument: ``to`` is this node.
            Unavailable: the target did not catch up or take the key in time; nothing changed.
        """
        if not self.election.is_leader:
            self.check_write()  # names the primary, if one is known
            raise Unavailable(f"node {self.cluster.node} is not the primary")
        if to == self.cluster.node:
            raise InvalidArgument(f"node {to} is the primary already", field="to")
        if not to:
            if not self.followers:
                raise FailedPrecondition(f"no replica follows the primary {self.cluster.node}: none to hand over to")
            to = max(self.followers.values(), key=lambda f: (f.applied, f.node)).node
        elif to not in self.followers:
            known = ", ".join(sorted(self.followers)) or "none"
            raise FailedPrecondition(f"node {to} does not follow the primary {self.cluster.node} (followers: {known})")
        previous = self.election.epoch
        within = max(10.0, 5.0 * self.cluster.lease_ttl_s)
        log.info("cluster %s: switchover from %s to %s at epoch %d", self.cluster.name, self.cluster.node, to, previous)
        self.sync.pin = to  # the target joins the sync set once it holds everything: eligible then
        try:
            epoch = await self.election.switchover(to, within, ready=lambda: self._holds_all(to))
        except NotLeader as exc:
            raise Unavailable(str(exc)) from None
        except SwitchoverFailed as exc:
            raise Unavailable(f"switchover to {to} abandoned: {exc}") from None
        finally:
            self.sync.pin = ""
        return to, epoch, previous

    def _changed(self, event: ElectionEvent) -> None:
        self.known_epoch = max(self.known_epoch, event.epoch)
        if event.kind == "lead":  # it writes the journal: its own clock; fenced or following: the journal's
            self.clock.lead()
        else:
            self.clock.follow(self.engine.last_ts)
        self.commit.role_changed(event.kind)
        if event.kind == "lead":  # the epoch record goes in before this primary's first write (HA-4)
            try:
                self.engine.begin_epoch(event.epoch, self.cluster.node)
            except SowdbError as exc:  # a store that cannot write this refuses the writes too
                log.error("cluster %s: the epoch record of epoch %d: %s", self.cluster.name, event.epoch, exc)
        log.info(
            "cluster %s: node %s: %s at epoch %d %s",
            self.cluster.name,
            event.node,
            event.kind,
            event.epoch,
            event.reason,
        )

    def _eligible(self, view: ClusterView) -> bool:
        """Eligible when the sync set allows it (a member of a non-empty set, or the primary
        that wrote it, and the most advanced of those alive; with no set, the most advanced live
        node) and its journal has not forked."""
        return not self.diverged and self.sync.allows(view)

    async def _supervise(self) -> None:
        """On a replica, keep a follower task streaming from the current primary."""
        from sowdb.cluster.follower import follow

        following: Leader | None = None
        while True:
            leader = self.election.leader
            if self.election.is_leader or (leader is not None and leader.node == self.cluster.node):
                leader = None
            if leader != following or (self._following is not None and self._following.done()):
                if self._following is not None:
                    self._following.cancel()
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await self._following
                    self._following = None
                following = leader
                if leader is not None:
                    self._following = asyncio.create_task(follow(self, leader), name="sowdb-follow")
            await asyncio.sleep(self.cluster.loop_wait_s / 4)

    def streaming(self, target: str) -> None:
        """A frame came from the primary at ``target``: this replica follows it."""
        if not self.following:
            log.info("cluster %s: node %s follows %s", self.cluster.name, self.cluster.node, target)
            self.commit.following(True)
        self.following, self.follow_error = True, ""

    def not_following(self, why: str = "") -> None:
        """The Follow stream ended or never started (``why``, logged once per new reason: a
        replica that cannot reach its primary, such as over the wrong transport, says so).
        Its queries read its state as written again: reads go on while no primary is known."""
        if self.following:
            self.commit.following(False)
        self.following = False
        if why and why != self.follow_error:
            log.warning("cluster %s: node %s does not follow: %s", self.cluster.name, self.cluster.node, why)
            self.follow_error = why

    def status(self) -> list[dict[str, object]]:
        """This node (with its epoch history), then the followers it knows (ClusterStatus)."""
        me = self.engine.last_seq
        last = me if self.election.is_leader else max(self.primary_last, me)
        seen = self.sync.seen
        members = set(self.sync.members) if self.election.is_leader else set(seen.nodes if seen else ())
        epochs = [{"epoch": e, "first_bookmark": b, "node": n} for e, b, n in self.engine.epoch_history()]
        rows: list[dict[str, object]] = [
            {
                "node": self.cluster.node,
                "address": self.cluster.advertise,
                "role": self.role,
                "epoch": self.election.epoch or self.known_epoch,
                "applied_bookmark": me,
                "lag": last - me,
                "sync": self.cluster.node in members,
                "epochs": epochs,
                "following": self.following and not self.election.is_leader,
                "follow_error": "" if self.election.is_leader else self.follow_error,
            }
        ]
        for f in sorted(self.followers.values(), key=lambda f: f.node):
            rows.append(
                {
                    "node": f.node,
                    "address": f.advertise,
                    "role": "replica",
                    "epoch": self.election.epoch,
                    "applied_bookmark": f.applied,
                    "lag": max(0, me - f.applied),
                    "sync": f.node in members,
                    "following": True,
                }
            )
        return rows
