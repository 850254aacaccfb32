"""The primary's lease kept alive apart from the data path (SPEC §13, HA-1; Patroni's HA loop
runs apart from PostgreSQL's work).

A primary's fencing deadline moves only when a refresh of its etcd lease succeeds and the leader
key is still its own. When those refreshes ran on the server's event loop, a loop saturated by
queries, fan-out or replication (a loaded machine, a large commit) delayed them past the
deadline, and a healthy primary stepped down ("no refresh before the deadline") with no fault in
sight. :class:`LeaseKeeper` does the refresh and the key check in a thread of its own, with its
own event loop and its own connection to etcd, so that the proof the deadline rests on no longer
waits for the server's loop. The election's decisions (who leads, eligibility, switchover) stay
in its round on the server's loop; the keeper only extends the deadline of the epoch it found
in the key, through :meth:`Election.extend`, which refuses anything stale.

The proof is the round's: a refresh that succeeded and began at ``s`` shows the lease lives
until at least ``s + ttl`` on etcd's side, hence ``deadline = s + ttl - margin``. A keeper that
cannot reach etcd extends nothing, and the primary steps down at its deadline as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from typing import Protocol

from sowdb.cluster.dcs import Dcs, EtcdUnavailable
from sowdb.config.cluster import ClusterConfig

log = logging.getLogger("sowdb.cluster")


class Holder(Protocol):
    """What the keeper needs of the election (:class:`sowdb.cluster.election.Election`)."""

    def holding(self) -> tuple[int, int]:
        """(epoch, lease) this node leads at now; (0, 0) when it does not lead."""
        ...

    def extend(self, epoch: int, lease: int, deadline: float) -> bool:
        """Move the fencing deadline of ``epoch`` (held under ``lease``) to ``deadline``."""
        ...


class LeaseKeeper:
    """A thread that refreshes the primary's lease every half ``loop_wait`` and extends its
    fencing deadline; idle (one cheap check a period) while the node does not lead."""

    def __init__(self, cluster: ClusterConfig, holder: Holder) -> None:
        self._cluster = cluster
        self._holder = holder
        self._period = cluster.loop_wait_s / 2
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self.extended = 0
        """How many refreshes extended the deadline: progress a test can wait on."""

    def start(self) -> None:
        """Start the thread (once; a started keeper is left as it is)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._main, name=f"sowdb-lease-{self._cluster.node}", daemon=True)
            self._thread.start()

    def stop(self, timeout: float | None = None) -> None:
        """Stop the thread and wait for it (at most ``timeout``: one etcd call's budget by default)."""
        self._stopping.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(self._cluster.retry_timeout_s + 1 if timeout is None else timeout)

    def _main(self) -> None:
        asyncio.run(self._run())

    async def _run(self) -> None:
        dcs = Dcs(self._cluster)  # its own connection: the server's loop is not this thread's
        try:
            while not self._stopping.is_set():
                start = time.monotonic()
                epoch, lease = self._holder.holding()
                if epoch and lease:
                    with contextlib.suppress(EtcdUnavailable):  # extends nothing: the round decides
                        await self._keep(dcs, start, epoch, lease)
                await asyncio.sleep(max(0.0, start + self._period - time.monotonic()))
        finally:
            await dcs.close()

    async def _keep(self, dcs: Dcs, start: float, epoch: int, lease: int) -> None:
        ttl = await dcs.refresh(lease)
        if ttl <= 0:
            return  # the lease lapsed: the election's round steps down and starts again
        found = await dcs.leader()
        if found is None or found.create_revision != epoch or found.lease != lease:
            return  # not ours any more: the round finds out and steps down
        ttl = min(ttl, int(self._cluster.lease_ttl_s))
        if self._holder.extend(epoch, lease, start + ttl - self._cluster.margin_s):
            self.extended += 1
