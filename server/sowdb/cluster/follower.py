"""Journal shipping, the replica's side (SPEC §13, HA-2): the follower loop, with fork
handling and catch-up.

A replica streams the primary's journal (:mod:`sowdb.cluster.shipping` is the other side) and
applies each frame through its engine's replication port (the primary's bookmarks, timestamps
and data, never its own), reporting its applied bookmark back on the same stream, which is
what ``sync`` acknowledgement waits on. Each frame's committed point goes to the commit owner
(:class:`~sowdb.cluster.commit.CommitPoint`): the replica's subscribers see only what the
cluster cannot lose. A frame's clock is the journal's time (HA-2), by which the replica's
upkeep runs.

When the primary refuses it with ``JOURNAL_FORKED`` (its ErrorInfo reason, never the
message's words), the follower finds the fork point (:func:`_fork_point`), records it and stops,
to cut the fork at its next start (:mod:`sowdb.cluster.fork`). When the primary answers
OUT_OF_RANGE (the replica is behind the retained journal), it copies a checkpoint
(:mod:`sowdb.cluster.catchup`) and stops to install it. After a cut, once caught up, it checks
the lost-writes file against the primary's journal.

Nothing is followed on etcd's word alone (issue 40): the follower follows the primary its
leader key names, only after that primary proves it is that node (its certificate, with node
certificates: :func:`~sowdb.cluster.peers.verify_primary`), and applies a frame only if its
epoch is the leader key's ``create_revision``. A frame of any other epoch is refused and
counted (``sowdb_cluster_refused_total{reason="epoch"}``), never applied: a server that sends
a forged epoch (10⁹) cannot leave it in the replicas' journals.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import grpc

from sowdb.cluster.catchup import copy_checkpoint
from sowdb.cluster.dcs import Leader
from sowdb.cluster.fork import LOST_WRITES, check_lost_writes, lost_writes_unchecked, mark_fork
from sowdb.cluster.node import Node
from sowdb.cluster.peers import Metadata, peer_channel, peer_metadata, peer_target, reason_of, verify_primary
from sowdb.engine.replication import EpochStart, JournalEntry
from sowdb.storage.epochs import fork_point
from sowdb_api.v1 import replication_pb2 as pb
from sowdb_api.v1 import replication_pb2_grpc as pb_grpc

log = logging.getLogger("sowdb.cluster")


async def follow(node: Node, leader: Leader) -> None:
    """A replica's stream from the primary ``leader`` (as its leader key names it), applying
    each frame, until it fails (the supervisor starts another)."""
    engine = node.engine
    target = peer_target(leader, node.cluster)
    if node.cluster.node_certs and (refusal := await verify_primary(leader, node.cluster)) is not None:
        node.refuse(*refusal)
        node.not_following(f"refused: {refusal[1]}")
        await asyncio.sleep(node.cluster.loop_wait_s)
        return
    reports: asyncio.Queue[pb.FollowRequest] = asyncio.Queue()
    last = engine.entry(engine.last_seq)
    await reports.put(
        pb.FollowRequest(
            node=node.cluster.node,
            epoch=node.known_epoch,
            applied_bookmark=engine.last_seq,
            advertise=node.cluster.advertise,
            applied_timestamp_us=last.timestamp_us if last is not None else 0,
        )
    )

    metadata = peer_metadata(node.cluster)
    try:
        channel = peer_channel(leader, node.cluster, engine.config.security)
    except OSError as exc:
        node.not_following(f"cannot dial {target}: {exc}")
        await asyncio.sleep(node.cluster.loop_wait_s)
        return
    async with channel:
        stub = pb_grpc.ReplicationServiceStub(channel)
        call = stub.Follow(metadata=metadata)
        # the reports are written by a task of ours, ended with the call: given an async
        # generator of them instead, gRPC's own reading task outlived every call that ended
        # ("Task was destroyed but it is pending", then "aclose(): asynchronous generator is
        # already running" in every failover's log)
        sending = asyncio.create_task(_send(call, reports), name="sowdb-follow-reports")
        unchecked = lost_writes_unchecked(engine.config.server.data_dir)  # cut at the fork: check
        try:
            async for frame in call:
                if frame.epoch != leader.epoch:  # not the primary etcd elected: nothing of it applied
                    node.refuse("epoch", f"{target} sends epoch {frame.epoch}, but its leader key's is {leader.epoch}")
                    node.not_following(f"{target}: refused: epoch {frame.epoch} is not the leader key's")
                    await asyncio.sleep(node.cluster.loop_wait_s)
                    return
                node.streaming(target)
                if node.election.is_leader:
                    return  # promoted meanwhile: this node writes its own journal now
                if frame.epoch < node.known_epoch:
                    log.warning("cluster: a frame of epoch %d, older than %d: refused", frame.epoch, node.known_epoch)
                    return
                node.known_epoch = frame.epoch
                node.primary_last = frame.last_bookmark
                if frame.HasField("committed_bookmark"):  # show subscribers what the cluster has
                    node.commit.shipped(frame.committed_bookmark)  # committed, never what it may lose
                if frame.epochs:  # the primary's history describes this journal, a prefix of its own
                    engine.adopt_epoch_history([EpochStart(e.epoch, e.first_bookmark, e.node) for e in frame.epochs])
                if frame.entries:
                    entries = [
                        JournalEntry(e.bookmark, e.timestamp_us, e.operation, e.expiry_us, e.topic, e.sow_key, e.data)
                        for e in frame.entries
                    ]
                    producers = [(p.bookmark, p.producer, p.sequence) for p in frame.producers]
                    applied = engine.apply(entries, producers)
                    await reports.put(pb.FollowRequest(applied_bookmark=applied))
                if frame.HasField("refresh"):
                    _refresh(node, frame.refresh)
                _follow_time(node, frame)
                if unchecked and engine.last_seq >= frame.last_bookmark:  # caught up after a cut
                    unchecked = False
                    await asyncio.to_thread(check_lost_writes, engine.journal_after, engine.config.server.data_dir)
        except grpc.aio.AioRpcError as exc:
            if reason_of(exc) == "JOURNAL_FORKED":
                node.diverged = exc.details() or "forked"
                at = await _fork_point(node, stub, metadata)
                mark_fork(engine.config.server.data_dir, at)
                log.error(
                    "cluster: %s refuses this node: %s. It forked after bookmark %d: it stops, and at its next start "
                    "moves the %d entries after that to %s and follows",
                    target,
                    exc.details(),
                    at,
                    engine.last_seq - at,
                    LOST_WRITES,
                )
                node.restart.set()
                return
            if exc.code() == grpc.StatusCode.OUT_OF_RANGE:  # behind the retained journal: copy the store
                await _copy(node, stub, metadata, exc.details() or "")
                return
            log.info("cluster: following %s ended: %s %s", target, exc.code().name, exc.details())
            node.not_following(f"{target}: {exc.code().name}: {exc.details()}")
            await asyncio.sleep(node.cluster.loop_wait_s / 4)
        finally:
            sending.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):  # its call ended under it
                await sending
            call.cancel()
            node.not_following()


async def _send(call: Any, reports: asyncio.Queue[pb.FollowRequest]) -> None:
    """A follower's reports (its hello, then each applied bookmark) written on its Follow call as
    they come, until the call ends (then ``write`` raises, and the task is done)."""
    while True:
        await call.write(await reports.get())


def _follow_time(node: Node, frame: pb.FollowResponse) -> None:
    """The journal's time (HA-2) after a frame: its last applied entry's timestamp, or the
    primary's clock when this node holds everything the primary's journal held then."""
    node.clock.advance(node.engine.last_ts)
    if node.engine.last_seq >= frame.last_bookmark:
        node.clock.advance(frame.clock_us)


def _refresh(node: Node, refresh: pb.ConflatedRefresh) -> None:
    """The primary refreshed a conflated topic after ``refresh.bookmark`` (which this node has
    just applied, the frames being in order) at ``refresh.timestamp_us``: so does this node.
    The primary's journal ended at that bookmark then: that is the journal's time too."""
    if node.engine.last_seq != refresh.bookmark:
        log.warning(
            "cluster: a refresh of %s after bookmark %d, but this node is at %d: refreshed now",
            refresh.topic,
            refresh.bookmark,
            node.engine.last_seq,
        )
    node.clock.advance(refresh.timestamp_us)
    node.engine.refresh_conflated(refresh.topic, refresh.timestamp_us)


async def _copy(node: Node, stub: Any, metadata: Metadata, why: str) -> None:
    """Copy the primary's store (:mod:`sowdb.cluster.catchup`), then stop to install it."""
    log.warning("cluster: the primary no longer holds this node's next entries (%s): copying a checkpoint", why)
    data_dir = node.engine.config.server.data_dir
    bookmark = await copy_checkpoint(
        data_dir, stub.CopyCheckpoint(pb.CopyCheckpointRequest(node=node.cluster.node), metadata=metadata)
    )
    node.diverged = f"a checkpoint at bookmark {bookmark} waits to be installed"
    log.error(
        "cluster: copied the primary's checkpoint at bookmark %d into %s: this node stops, and at its next start "
        "installs it and follows from there",
        bookmark,
        data_dir,
    )
    node.restart.set()


async def _fork_point(node: Node, stub: Any, metadata: Metadata) -> int:
    """The last bookmark at which this node's journal is the primary's (0: they agree on
    nothing). First from the two epoch histories (HA-4; a probe's answer carries the primary's),
    confirmed by two probes (the journals agree there and not one entry later); else, or for
    a store older than the records, by a binary search with probes (the journals agree on a
    prefix)."""
    last = node.engine.last_seq  # the primary refused this node at its last bookmark
    answer = await _probe(node, stub, metadata, 0)  # the journals agree at 0: the history comes back
    if answer is not None and answer.epochs:
        theirs = [EpochStart(e.epoch, e.first_bookmark, e.node) for e in answer.epochs]
        at = fork_point(node.engine.epoch_history(), theirs, last, answer.last_bookmark)
        if (
            at is not None
            and at < last
            and await _probe(node, stub, metadata, at) is not None
            and await _probe(node, stub, metadata, at + 1) is None
        ):
            log.info("cluster: the epoch histories place the fork after bookmark %d (confirmed by probes)", at)
            return at
        log.warning("cluster: the epoch histories do not tell the fork point (%s): probing", at)
    agree, forked = 0, last
    while forked - agree > 1:
        mid = (agree + forked) // 2
        if await _probe(node, stub, metadata, mid) is not None:
            agree = mid
        else:
            forked = mid
    return agree


async def _probe(node: Node, stub: Any, metadata: Metadata, bookmark: int) -> pb.FollowResponse | None:
    """Whether the journals agree at ``bookmark``: the primary's answer (its last bookmark and
    epoch history), or None when it says they forked there."""
    entry = node.engine.entry(bookmark)
    probe = pb.FollowRequest(
        node=node.cluster.node,
        epoch=node.known_epoch,
        applied_bookmark=bookmark,
        applied_timestamp_us=entry.timestamp_us if entry is not None else 0,
        probe=True,
    )

    async def one() -> AsyncIterator[pb.FollowRequest]:
        yield probe

    answer = pb.FollowResponse()
    try:
        async for frame in stub.Follow(one(), metadata=metadata):
            answer = frame
    except grpc.aio.AioRpcError as exc:
        if reason_of(exc) == "JOURNAL_FORKED":
            return None
        raise
    return answer
