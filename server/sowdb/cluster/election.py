"""The election of a cluster's primary through etcd (SPEC §13, HA-1 and HA-4), Patroni's model.

A node becomes primary by creating the leader key ``/sowdb/NAME/leader`` under its etcd lease,
only if the key is absent; the key's ``create_revision`` is the **epoch**, which rises with every
new primary and which every replication frame will carry. Consensus comes from etcd, never from
us: two nodes can never both create the key.

Fencing is the primary's own business. A lease lapsing on etcd only tells the *others* when they
may act (and etcd may even extend a lease when its own leader changes), so a primary that is
partitioned from etcd, or paused, must stop acknowledging by itself, before its lease can have
lapsed. Each round it refreshes its lease and then checks that it still holds the key at its
epoch; a round that succeeded and began at ``s`` proves the lease lives until at least
``s + ttl`` on etcd's side, hence ``deadline = s + ttl - margin``, and :meth:`may_acknowledge`
is ``time.monotonic() < deadline``. Rounds come every ``loop_wait`` and take at most
``retry_timeout``; ``loop_wait + 2 * retry_timeout ≤ ttl`` leaves a refresh that failed once a
second chance before the deadline. A caller checks :meth:`may_acknowledge` *after* its write is
durable and right before it answers, so a pause between the two only ever costs an answer.

A node that is not eligible — an empty or gapped store, not holding every acknowledged write
(HA-3) — never takes the key; the eligibility callback says so each round, and each node
publishes it in its member record ``/sowdb/NAME/members/NODE`` (under its lease), which is what
a switchover waits on before the primary hands over.

While it leads, a :class:`~sowdb.cluster.keepalive.LeaseKeeper` thread also refreshes the lease
and extends the deadline, apart from the server's event loop: a loop saturated by the data path
delays the round, never the proof that the lease lives (issue: a loaded primary stepped down with
no fault). The deadline of an epoch only ever moves forward, whichever of the two extends it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from sowdb.cluster.dcs import ClusterView, Dcs, EtcdUnavailable, Leader
from sowdb.cluster.keepalive import LeaseKeeper
from sowdb.config.cluster import ClusterConfig

log = logging.getLogger("sowdb.cluster")

Eligible = Callable[[ClusterView], bool]
"""Whether this node may take the leader key, judged over one round's snapshot."""


def _always(view: ClusterView) -> bool:
    return True


def _nothing() -> int:
    return 0


class NotLeader(Exception):
    """A switchover was asked of a node that is not the primary."""


class SwitchoverFailed(Exception):
    """The target did not become eligible, or did not take the key, in time; nothing changed
    hands and the primary acknowledges again."""


@dataclass(frozen=True)
class ElectionEvent:
    """A change of this node's role. ``lead``: it took the key at ``epoch`` and may acknowledge
    from ``at``; ``fenced``: it stopped acknowledging at ``at`` (never later than its deadline);
    ``follow``: it saw ``leader`` hold the key. ``at`` is on the monotonic clock."""

    node: str
    kind: str
    epoch: int
    at: float
    reason: str = ""


Listener = Callable[[ElectionEvent], None]


class Election:
    """One node's part in the election: run :meth:`run` as a task, ask :meth:`may_acknowledge`
    before acknowledging a write."""

    def __init__(
        self,
        cluster: ClusterConfig,
        *,
        eligible: Eligible = _always,
        applied: Callable[[], int] = _nothing,
        listener: Listener | None = None,
        dcs: Dcs | None = None,
    ) -> None:
        """Args:
        eligible: judged each round over the round's snapshot.
        applied: this node's applied bookmark, published each round (what the others'
            eligibility compares).
        """
        self.cluster = cluster
        self._eligible = eligible
        self._applied = applied
        self._listener = listener
        self.dcs = dcs or Dcs(cluster)
        self._ttl = int(cluster.lease_ttl_s)
        self._lease = 0  # this node's session lease (0: none yet, or it lapsed)
        self._published: bool | None = None  # the eligibility the member record says
        self._epoch = 0  # the epoch of the key this node holds (0: it holds none)
        self._deadline = 0.0  # monotonic; acknowledging stops here (HA-1)
        self._timer: asyncio.TimerHandle | None = None  # steps down at the deadline, mid-round too
        self._handing_over = False  # a switchover has fenced this primary
        self._resigned = 0  # an epoch this node stepped down from, whose key it still deletes
        self._lock = asyncio.Lock()  # one round (or switchover step) at a time
        self._guard = threading.Lock()  # the epoch, lease and deadline, also moved by the keeper's thread
        self.keeper = LeaseKeeper(cluster, self)
        self.rounds = 0  # rounds completed (successfully or not): progress a test can wait on
        self.leader: Leader | None = None
        self.view = ClusterView()
        """The last snapshot of the cluster (its members: whom a primary may count for ``sync``)."""

    @property
    def epoch(self) -> int:
        """The epoch this node leads at (the leader key's ``create_revision``); 0 when it is not
        the primary."""
        return self._epoch

    @property
    def lease_id(self) -> int:
        """This node's etcd lease (0: none at the moment)."""
        return self._lease

    @property
    def is_leader(self) -> bool:
        """This node holds the leader key (it may still be fenced: see :meth:`may_acknowledge`)."""
        return self._epoch != 0

    def holding(self) -> tuple[int, int]:
        """(epoch, lease) this node leads at; (0, 0) when it does not lead (the keeper's view)."""
        with self._guard:
            return (self._epoch, self._lease) if self._epoch else (0, 0)

    def extend(self, epoch: int, lease: int, deadline: float) -> bool:
        """Move the fencing deadline to ``deadline``, proven by a refresh of ``lease`` while the
        key was this node's at ``epoch`` (the keeper's thread or the round): only if this node
        still leads at that epoch under that lease, and only forward. True when it moved."""
        with self._guard:
            if self._epoch != epoch or self._lease != lease or deadline <= self._deadline:
                return False
            self._deadline = deadline
            return True

    def may_acknowledge(self, epoch: int | None = None) -> bool:
        """True only while this node holds the key at its epoch and its monotonic deadline has
        not passed (HA-1): a partitioned or paused primary turns False before its lease can
        have lapsed on etcd, hence before any other node can take the key. With ``epoch``, also
        only if that is still the epoch (a write journaled under an epoch this node stepped down
        from is never acknowledged, even if it leads again at a newer one)."""
        if epoch is not None and epoch != self._epoch:
            return False
        return self._epoch != 0 and not self._handing_over and time.monotonic() < self._deadline

    async def run(self) -> None:
        """The HA loop, until cancelled: one round every ``loop_wait``, a follower's every half
        of it (it polls the leader key: a lapsed key is taken within half a loop)."""
        self.keeper.start()
        while True:
            start = time.monotonic()
            wait = 0.0  # a follower's shorter pause before it reads the leader key again
            async with self._lock:
                try:
                    wait = await self._round(start)
                except EtcdUnavailable as exc:
                    log.warning("cluster %s: node %s: %s", self.cluster.name, self.cluster.node, exc)
                    if self._epoch and time.monotonic() >= self._deadline:
                        self._step_down("etcd unreachable until the deadline", at=self._deadline)
                self.rounds += 1
            await asyncio.sleep(max(0.0, start + (wait or self.cluster.loop_wait_s) - time.monotonic()))

    async def close(self, *, resign: bool = True) -> None:
        """Leave the election (after cancelling :meth:`run`): a primary first stops
        acknowledging, then frees the key and its lease so that a successor need not wait for
        the lease to lapse. ``resign=False`` walks away like a crashed node."""
        await asyncio.to_thread(self.keeper.stop)  # joins its thread: not on the loop
        async with self._lock:
            if self._epoch:
                self._step_down("closing", at=time.monotonic())
            if resign and self._lease:
                with contextlib.suppress(EtcdUnavailable):  # else the lease lapses by itself
                    await self.dcs.revoke(self._lease)
            self._lease = 0
            await self.dcs.close()

    async def switchover(self, to: str, within: float, ready: Callable[[], bool] | None = None) -> int:
        """Hand the primary over to node ``to`` with nothing lost (HA-4's ``sowd switchover``).

        This primary stops acknowledging first, so that the target can hold every write it
        acknowledged; it records the intent (under its lease, so that it goes if this node
        dies), waits until the target's member record says it is eligible, and only then
        deletes its key, guarded by its epoch; the other nodes stand back while the intent
        names another node.

        Args:
            ready: also required before the key is given up, asked after the fence: the
                server's check that the target holds every entry this primary wrote (the
                member records' applied bookmarks may be a round old).

        Returns:
            The new primary's epoch.

        Raises:
            NotLeader: this node is not the primary.
            SwitchoverFailed: the target was not eligible, or did not take the key, ``within`` seconds.
        """
        async with self._lock:
            if not self._epoch:
                raise NotLeader(f"node {self.cluster.node} is not the primary")
            epoch = self._epoch
            self._handing_over = True
            self._emit("fenced", epoch, time.monotonic(), f"switchover to {to}")
        give_up = time.monotonic() + within
        try:
            async with self._lock:
                await self.dcs.announce_switchover(to, epoch, self._lease)
            while not (await self.dcs.member_eligible(to) and (ready is None or ready())):
                if time.monotonic() >= give_up:
                    raise SwitchoverFailed(f"node {to} did not become eligible within {within:g}s")
                await asyncio.sleep(self.cluster.loop_wait_s / 4)
            async with self._lock:
                if self._epoch != epoch or not await self.dcs.release_leader(epoch):
                    raise SwitchoverFailed(f"node {self.cluster.node} lost the key at epoch {epoch} meanwhile")
                self._step_down(f"handed over to {to}", at=time.monotonic())
            while (found := await self.dcs.leader()) is None or found.create_revision == epoch:
                if time.monotonic() >= give_up:
                    raise SwitchoverFailed(f"node {to} did not take the key within {within:g}s")
                await asyncio.sleep(self.cluster.loop_wait_s / 4)
            return found.create_revision
        finally:
            self._handing_over = False
            if self._epoch == epoch:  # abandoned: this node acknowledges again
                self._emit("lead", epoch, time.monotonic(), f"switchover to {to} abandoned")
            await self._clear_intent()

    async def _clear_intent(self) -> None:
        with contextlib.suppress(EtcdUnavailable):  # else it goes with this node's lease
            await self.dcs.clear_switchover()

    # -- one round ------------------------------------------------------------------------

    async def _round(self, start: float) -> float:
        """Refresh the session, read the cluster once, then lead or follow over that one
        snapshot. Returns a follower's shorter pause before the next round (0: the whole
        ``loop_wait``)."""
        ttl, view = await self._session()
        if self._epoch:
            self._lead(start, ttl, view)
            return 0.0
        return await self._follow(start, ttl, view)

    async def _session(self) -> tuple[int, ClusterView]:
        """Keep this node's lease alive (a new one if it lapsed), publish its applied bookmark,
        read the cluster's snapshot and keep the member record's eligibility true. Returns the
        lease's TTL as etcd now has it, and the snapshot."""
        ttl = await self.dcs.refresh(self._lease) if self._lease else 0
        if ttl <= 0:
            if self._epoch:
                self._step_down("the lease lapsed", at=min(self._deadline, time.monotonic()))
            self._lease, ttl = await self.dcs.grant(self._ttl)
            self._published = None
        applied = self._applied()
        await self.dcs.publish_applied(applied, self._lease)
        view = self.view = await self.dcs.snapshot()
        view.applied[self.cluster.node] = applied
        eligible = self._eligible(view)
        if eligible != self._published:
            await self.dcs.publish_member(eligible, self._lease)
            self._published = eligible
        return min(ttl, self._ttl), view

    def _lead(self, start: float, ttl: int, view: ClusterView) -> None:
        epoch = self._epoch
        if view.leader is None or view.leader.epoch != epoch or view.leader_lease != self._lease:
            self._step_down("the leader key is gone", at=time.monotonic())
            return
        self.extend(epoch, view.leader_lease, start + ttl - self.cluster.margin_s)

    def _arm(self) -> None:
        """The timer that steps down at the deadline: acknowledging stops there by
        :meth:`may_acknowledge` alone; the timer makes the role change visible at once, even
        while a round waits on an unreachable etcd. When it fires it looks at the deadline as it
        is then (the keeper may have moved it) and waits on to that if it has not passed."""
        if self._timer is not None:
            self._timer.cancel()
        epoch = self._epoch

        def expire() -> None:
            if self._epoch != epoch:
                return
            deadline = self._deadline
            if time.monotonic() < deadline:  # moved meanwhile, or a timer fired a clock tick early
                self._timer = asyncio.get_running_loop().call_at(deadline, expire)
            else:
                self._step_down("no refresh before the deadline", at=deadline)

        # the loop's clock is time.monotonic(), the clock of the deadline
        self._timer = asyncio.get_running_loop().call_at(self._deadline, expire)

    async def _follow(self, start: float, ttl: int, view: ClusterView) -> float:
        leader = view.leader
        if leader is not None and view.leader_lease == self._lease:
            # Our own key. Either a create whose answer was lost (etcd applied it, the reply timed
            # out): it is ours as surely as if the answer had come, so lead at its epoch. Or one
            # left after a step-down, or while not eligible: free it for the others.
            if leader.epoch != self._resigned and self._published:
                self._lead_at(leader.epoch, start, ttl)
            else:
                await self.dcs.release_leader(leader.epoch)
            return 0.0
        if leader is not None:
            self._see(leader)
            return self.cluster.loop_wait_s / 2
        self.leader = None  # the key lapsed: no primary until one takes it (writes: UNAVAILABLE)
        if view.switchover_to and view.switchover_to != self.cluster.node:
            return 0.0  # a switchover to another node is under way
        if not self._published:
            # this round's eligibility, judged maybe before the key lapsed (while the dead
            # primary's applied bookmark still counted): judge again soon, not a whole loop later
            return self.cluster.loop_wait_s / 4
        created, found = await self.dcs.take_leader(self._lease, view.sync_revision)
        if found is not None and created:
            self._lead_at(found.create_revision, start, ttl)
        elif found is not None:
            record = json.loads(found.value)
            self._see(Leader(str(record["node"]), str(record["advertise"]), found.create_revision))
        return 0.0

    def _lead_at(self, epoch: int, start: float, ttl: int) -> None:
        """Become the primary at ``epoch``: this round's lease refresh began at ``start``."""
        with self._guard:
            self._epoch, self._deadline = epoch, start + ttl - self.cluster.margin_s
        self._arm()
        self.leader = Leader(self.cluster.node, self.cluster.advertise, epoch)
        log.info("cluster %s: node %s is the primary at epoch %d", self.cluster.name, self.cluster.node, epoch)
        self._emit("lead", epoch, time.monotonic())

    def _step_down(self, reason: str, *, at: float) -> None:
        """Stop being the primary: acknowledging stops now (or already stopped at ``at``, the
        deadline, which this records as the end of the window)."""
        with self._guard:
            epoch, self._epoch, self._deadline = self._epoch, 0, 0.0
        if self._timer is not None:
            self._timer.cancel()
        self._resigned = epoch
        log.warning(
            "cluster %s: node %s steps down from epoch %d: %s", self.cluster.name, self.cluster.node, epoch, reason
        )
        if not self._handing_over:
            self._emit("fenced", epoch, at, reason)

    def _see(self, leader: Leader) -> None:
        if leader != self.leader:
            self.leader = leader
            self._emit("follow", leader.epoch, time.monotonic(), leader.node)

    def _emit(self, kind: str, epoch: int, at: float, reason: str = "") -> None:
        if self._listener is not None:
            self._listener(ElectionEvent(self.cluster.node, kind, epoch, at, reason))
