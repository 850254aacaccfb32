"""Journal shipping (SPEC §13, HA-2): ``ReplicationService.Follow`` on the primary, and the
follower loop of a replica.

The primary streams its journal from the replica's last bookmark — the data service's range
reader (:class:`~sowdb.engine.journal.ranges.JournalReads`) — and then each write as it lands:
it wakes when it acknowledges one (``Node.written``) and looks every ``POLL_S`` for writes that
are not acknowledged to a client (expirations, staged commits). A frame with no entries is a
tick. Every frame carries the primary's epoch; a replica refuses a frame of an epoch older than
one it has seen, and a primary refuses a follower that knows a newer epoch than its own. Every
frame also carries the primary's clock when its journal ended at the frame's ``last_bookmark``:
a replica that holds that bookmark takes it as its time, the journal's time
(:class:`~sowdb.engine.clock.FollowingClock`), by which its upkeep runs (HA-2).

The replica applies each frame through :meth:`Writer.apply_replicated` (the primary's
bookmarks, timestamps and data, never its own) and reports its applied bookmark back on the
same stream, which is what ``sync`` acknowledgement waits on. Before streaming, the primary
checks that the replica's last entry is its own entry at that bookmark (timestamp, topic and
SowKey): a replica whose journal forked (a former primary with writes that never reached its
successor) is refused with FAILED_PRECONDITION, ErrorInfo reason ``JOURNAL_FORKED`` (what the
replica acts on, never the message's words), instead of being fed entries that do not continue
its journal.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import grpc

from sowdb.api.servicer import Context, Servicer, error_boundary
from sowdb.auth import Authenticator
from sowdb.cluster.catchup import checkpoint_chunks, copy_checkpoint
from sowdb.cluster.fork import LOST_WRITES, check_lost_writes, lost_writes_unchecked, mark_fork
from sowdb.cluster.node import Follower, Node
from sowdb.cluster.peers import Metadata, peer_channel, peer_metadata, reason_of
from sowdb.engine import Engine
from sowdb.engine.access import Access
from sowdb.errors import FailedPrecondition, JournalForked
from sowdb.storage.epochs import EpochStart, epoch_history, fork_point, write_epoch_history
from sowdb.storage.keys import JournalEntry
from sowdb_api.v1 import replication_pb2 as pb
from sowdb_api.v1 import replication_pb2_grpc as pb_grpc

log = logging.getLogger("sowdb.cluster")

POLL_S = 0.05
"""How often an idle Follow stream looks for writes that nobody acknowledged (expirations)."""
TICK_S = 1.0
"""An idle primary sends a frame without entries this often: the replica sees it is alive."""
FRAME_ENTRIES = 2000


class ReplicationServicer(Servicer):
    """The primary's side: one Follow stream per replica. Behind the same boundary as every
    other service: with security on, only an admin may follow (the journal is every topic's)."""

    service = "ReplicationService"

    def __init__(self, node: Node, auth: Authenticator) -> None:
        super().__init__(node.engine, auth)
        self.node = node

    @error_boundary
    async def Follow(
        self, request_iterator: AsyncIterator[pb.FollowRequest], context: Context, access: Access
    ) -> AsyncIterator[pb.FollowResponse]:
        access.require_admin("follow the journal (replication)")
        node, engine = self.node, self.node.engine
        hello = await anext(aiter(request_iterator), None)
        if hello is None:
            return
        epoch = node.election.epoch
        if not epoch:
            raise FailedPrecondition(f"node {node.cluster.node} is not the primary")
        if hello.epoch > epoch:
            raise FailedPrecondition(f"the follower knows epoch {hello.epoch}, newer than {epoch}")
        position = hello.applied_bookmark
        fork = self._fork(position, hello.applied_timestamp_us)
        if fork:
            raise JournalForked(fork)
        if hello.probe:  # a forked replica looking for the fork point: the journals agree here
            yield pb.FollowResponse(epoch=epoch, last_bookmark=engine.last_seq, epochs=_epochs(engine))
            return
        follower = Follower(hello.node, hello.advertise, position)
        await node.report(follower)
        reports = asyncio.create_task(self._reports(request_iterator, follower))
        try:
            # the first frame: this primary's epoch history (HA-4), which the replica adopts
            yield pb.FollowResponse(
                epoch=epoch,
                last_bookmark=engine.last_seq,
                epochs=_epochs(engine),
                clock_us=engine.clock(),
                committed_bookmark=engine.shown_upto(),
            )
            idle, seen = 0.0, node.first_refresh(position)  # conflated refreshes, each in its place
            committed = -1  # the committed point last sent
            while node.election.epoch == epoch:
                last, now = engine.last_seq, engine.clock()  # the journal ended at `last` at `now`
                refreshes = node.refreshes_since(seen)
                if last > position or refreshes:
                    # the entries up to each refresh's bookmark, the refresh, ..., the rest
                    for upto, refresh in [*((r[1], r) for r in refreshes), (last, None)]:
                        if upto > position:
                            async for entries in engine.read_journal(position, upto, batch_size=FRAME_ENTRIES):
                                committed = engine.shown_upto()
                                yield _frame(engine, epoch, entries, last, now, committed)
                            position = upto
                        if refresh is not None:
                            seen, bookmark, topic, at = refresh
                            yield pb.FollowResponse(
                                epoch=epoch,
                                last_bookmark=last,
                                refresh=pb.ConflatedRefresh(topic=topic, bookmark=bookmark, timestamp_us=at),
                            )
                            seen += 1
                    idle = 0.0
                    continue
                shown = engine.shown_upto()
                if idle >= TICK_S or shown != committed:  # a tick, or the committed point moved
                    committed = shown
                    yield pb.FollowResponse(epoch=epoch, last_bookmark=last, clock_us=now, committed_bookmark=committed)
                    idle = 0.0
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(node.written.wait(), POLL_S)
                idle += POLL_S
            raise FailedPrecondition(f"node {node.cluster.node} stepped down")
        finally:  # (OutOfRange, behind the retained journal, goes to the replica: it copies a checkpoint)
            reports.cancel()
            await node.report(None, follower.node)

    @error_boundary
    async def CopyCheckpoint(
        self, request: pb.CopyCheckpointRequest, context: Context, access: Access
    ) -> AsyncIterator[pb.CopyCheckpointResponse]:
        access.require_admin("copy the store (replication)")
        if not self.node.election.is_leader:
            raise FailedPrecondition(f"node {self.node.cluster.node} is not the primary")
        log.info("cluster: node %s copies a checkpoint", request.node)
        async for chunk in checkpoint_chunks(self.node.engine):
            yield chunk

    def _fork(self, bookmark: int, timestamp_us: int) -> str:
        """Why a follower whose last entry is (``bookmark``, ``timestamp_us``) cannot continue
        from this journal (empty: it can)."""
        engine = self.node.engine
        if bookmark > engine.last_seq:
            return (
                f"the follower is at bookmark {bookmark}, ahead of this primary's {engine.last_seq}: its journal forked"
            )
        mine = engine.store.journal_entry(bookmark) if bookmark else None
        if mine is not None and mine.timestamp_us != timestamp_us:
            return f"the follower's entry at bookmark {bookmark} is not this primary's: its journal forked"
        return ""

    async def _reports(self, requests: AsyncIterator[pb.FollowRequest], follower: Follower) -> None:
        async for req in requests:
            if req.applied_bookmark > follower.applied:
                follower.applied, follower.progressed = req.applied_bookmark, time.monotonic()
            await self.node.report(follower)


def _frame(
    engine: Engine, epoch: int, entries: list[JournalEntry], last: int, now: int, committed: int
) -> pb.FollowResponse:
    """A frame of entries, with the producer state (J-4) of the batches that end within them;
    ``now`` is this primary's clock when its journal ended at ``last``; ``committed`` the
    cluster's committed point (what the replica may show its subscribers)."""
    producers = engine.store.producer_log(entries[0].seq - 1, entries[-1].seq)
    return pb.FollowResponse(
        epoch=epoch,
        entries=[_entry(e) for e in entries],
        last_bookmark=last,
        clock_us=now,
        producers=[pb.ReplicatedProducer(bookmark=b, producer=p, sequence=q) for b, p, q in producers],
        committed_bookmark=committed,
    )


def _epochs(engine: Engine) -> list[pb.EpochStart]:
    return [pb.EpochStart(epoch=e, first_bookmark=b, node=n) for e, b, n in epoch_history(engine.store)]


def _entry(e: JournalEntry) -> pb.ReplicatedEntry:
    return pb.ReplicatedEntry(
        bookmark=e.seq,
        timestamp_us=e.timestamp_us,
        operation=e.op,
        expiry_us=e.expiry_us,
        topic=e.topic,
        sow_key=e.sow_key,
        data=e.payload,
    )


async def follow(node: Node, target: str) -> None:
    """A replica's stream from the primary at ``target``, applying each frame, until it fails
    (the supervisor starts another)."""
    writer = node.engine.writer
    reports: asyncio.Queue[pb.FollowRequest] = asyncio.Queue()
    last = node.engine.store.journal_entry(writer.last_seq) if writer.last_seq else None
    await reports.put(
        pb.FollowRequest(
            node=node.cluster.node,
            epoch=node.known_epoch,
            applied_bookmark=writer.last_seq,
            advertise=node.cluster.advertise,
            applied_timestamp_us=last.timestamp_us if last is not None else 0,
        )
    )

    metadata = peer_metadata()
    try:
        channel = peer_channel(target, node.cluster, node.engine.config.security)
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
        unchecked = lost_writes_unchecked(node.engine.config.server.data_dir)  # cut at the fork: check
        try:
            async for frame in call:
                node.streaming(target)
                if node.election.is_leader:
                    return  # promoted meanwhile: this node writes its own journal now
                if frame.epoch < node.known_epoch:
                    log.warning("cluster: a frame of epoch %d, older than %d: refused", frame.epoch, node.known_epoch)
                    return
                node.known_epoch = frame.epoch
                node.primary_last = frame.last_bookmark
                if frame.HasField("committed_bookmark"):  # show subscribers what the cluster has
                    node.engine.deliver_upto(frame.committed_bookmark)  # committed, never what it may lose
                if frame.epochs:  # the primary's history describes this journal, a prefix of its own
                    history = [EpochStart(e.epoch, e.first_bookmark, e.node) for e in frame.epochs]
                    write_epoch_history(node.engine.store, history)
                if frame.entries:
                    entries = [
                        JournalEntry(e.bookmark, e.timestamp_us, e.operation, e.expiry_us, e.topic, e.sow_key, e.data)
                        for e in frame.entries
                    ]
                    producers = [(p.bookmark, p.producer, p.sequence) for p in frame.producers]
                    applied = writer.apply_replicated(entries, producers)
                    await reports.put(pb.FollowRequest(applied_bookmark=applied))
                if frame.HasField("refresh"):
                    _refresh(node, frame.refresh)
                _follow_time(node, frame)
                if unchecked and writer.last_seq >= frame.last_bookmark:  # caught up after a cut
                    unchecked = False
                    await asyncio.to_thread(check_lost_writes, node.engine.store, node.engine.config.server.data_dir)
        except grpc.aio.AioRpcError as exc:
            if reason_of(exc) == "JOURNAL_FORKED":
                node.diverged = exc.details() or "forked"
                at = await _fork_point(node, stub, metadata)
                mark_fork(node.engine.config.server.data_dir, at)
                log.error(
                    "cluster: %s refuses this node: %s. It forked after bookmark %d: it stops, and at its next start "
                    "moves the %d entries after that to %s and follows",
                    target,
                    exc.details(),
                    at,
                    writer.last_seq - at,
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
    node.clock.advance(node.engine.writer.last_ts)
    if node.engine.writer.last_seq >= frame.last_bookmark:
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
        at = fork_point(epoch_history(node.engine.store), theirs, last, answer.last_bookmark)
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
    entry = node.engine.store.journal_entry(bookmark) if bookmark else None
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
