"""Journal shipping, the primary's side (SPEC §13, HA-2): one Follow stream per replica.

The primary streams its journal from the replica's last bookmark — the data service's range
reader — and then each write as it lands: it wakes when it acknowledges or commits one
(:attr:`CommitPoint.written <sowdb.cluster.commit.CommitPoint.written>`) and looks every
``POLL_S`` for writes that are not acknowledged to a client (expirations, staged commits). A
frame with no entries is a tick. Every frame carries the primary's epoch; a replica refuses a
frame of an epoch older than one it has seen, and a primary refuses a follower that knows a
newer epoch than its own. Every frame also carries the primary's clock when its journal ended
at the frame's ``last_bookmark`` (the journal's time, HA-2), and the cluster's committed point
(what the replica may show; a frame carrying only that is sent whenever it moves).

Before streaming, the primary checks that the replica's last entry is its own entry at that
bookmark (its timestamp): a replica whose journal forked (a former primary with writes that
never reached its successor) is refused with :class:`~sowdb.errors.JournalForked` (ErrorInfo
reason ``JOURNAL_FORKED``, what the replica acts on), instead of being fed entries that do not
continue its journal. The gRPC side is :mod:`sowdb.api.replication`.

Who follows (issue 40): with node certificates, the follower's hello must name a node its
certificate names (else it is refused, and the refusal counted); and what it reports having
applied is bounded by what this primary has sent it (or what it held when it came, checked
against this journal), so that a follower cannot make ``sync`` acknowledge on its word.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

from sowdb.cluster.node import Follower, Node
from sowdb.engine.replication import JournalEntry
from sowdb.errors import FailedPrecondition, JournalForked, PermissionDenied
from sowdb_api.v1 import replication_pb2 as pb

POLL_S = 0.05
"""How often an idle Follow stream looks for writes that nobody acknowledged (expirations)."""
TICK_S = 1.0
"""An idle primary sends a frame without entries this often: the replica sees it is alive."""
FRAME_ENTRIES = 2000


async def ship(
    node: Node, requests: AsyncIterator[pb.FollowRequest], names: frozenset[str] | None = None
) -> AsyncIterator[pb.FollowResponse]:
    """The frames of one Follow stream, until this node steps down (FailedPrecondition), the
    follower goes, or the follower is behind the retained journal (OutOfRange: it copies a
    checkpoint). ``requests``: the follower's hello, then its reports; ``names``: the node
    names the follower's certificate carries (None: no node certificates, nothing to check).

    Raises:
        PermissionDenied: the follower claims a node name its certificate does not carry.
    """
    engine, commit = node.engine, node.commit
    hello = await anext(aiter(requests), None)
    if hello is None:
        return
    if names is not None and hello.node not in names:
        why = f"a follower calls itself {hello.node!r} with a certificate for {sorted(names)}"
        node.refuse("name", why)
        raise PermissionDenied(f"{why}: refused")
    epoch = node.election.epoch
    if not epoch:
        raise FailedPrecondition(f"node {node.cluster.node} is not the primary")
    if hello.epoch > epoch:
        raise FailedPrecondition(f"the follower knows epoch {hello.epoch}, newer than {epoch}")
    position = hello.applied_bookmark
    if fork := forked(node, position, hello.applied_timestamp_us):
        raise JournalForked(fork)
    if hello.probe:  # a forked replica looking for the fork point: the journals agree here
        yield pb.FollowResponse(epoch=epoch, last_bookmark=engine.last_seq, epochs=_epochs(node))
        return
    follower = Follower(hello.node, hello.advertise, position, sent=position)
    await node.report(follower)
    reports = asyncio.create_task(_reports(node, requests, follower))
    try:
        # the first frame: this primary's epoch history (HA-4), which the replica adopts
        yield pb.FollowResponse(
            epoch=epoch,
            last_bookmark=engine.last_seq,
            epochs=_epochs(node),
            clock_us=engine.clock(),
            committed_bookmark=commit.shown(),
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
                            committed = commit.shown()
                            follower.sent = entries[-1].seq  # what it may report having applied
                            yield _frame(node, epoch, entries, last, now, committed)
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
            shown = commit.shown()
            if idle >= TICK_S or shown != committed:  # a tick, or the committed point moved
                committed = shown
                yield pb.FollowResponse(epoch=epoch, last_bookmark=last, clock_us=now, committed_bookmark=committed)
                idle = 0.0
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(POLL_S):
                    await commit.written.wait()
            idle += POLL_S
        # Stepped down. What was committed while it led stays committed: the last acknowledgements
        # come right before a deadline, and a replica that then follows no one (etcd stopped)
        # would otherwise hold its subscribers at an older point than writes acknowledged.
        yield pb.FollowResponse(epoch=epoch, last_bookmark=engine.last_seq, committed_bookmark=commit.shown())
        raise FailedPrecondition(f"node {node.cluster.node} stepped down")
    finally:  # (OutOfRange, behind the retained journal, goes to the replica: it copies a checkpoint)
        reports.cancel()
        await node.report(None, follower.node)


def forked(node: Node, bookmark: int, timestamp_us: int) -> str:
    """Why a follower whose last entry is (``bookmark``, ``timestamp_us``) cannot continue
    from this journal (empty: it can)."""
    engine = node.engine
    if bookmark > engine.last_seq:
        return f"the follower is at bookmark {bookmark}, ahead of this primary's {engine.last_seq}: its journal forked"
    mine = engine.entry(bookmark)
    if mine is not None and mine.timestamp_us != timestamp_us:
        return f"the follower's entry at bookmark {bookmark} is not this primary's: its journal forked"
    return ""


async def _reports(node: Node, requests: AsyncIterator[pb.FollowRequest], follower: Follower) -> None:
    """A follower's reports: its applied bookmark, never beyond what it was sent."""
    async for req in requests:
        applied = min(req.applied_bookmark, follower.sent)
        if applied > follower.applied:
            follower.applied, follower.progressed = applied, time.monotonic()
        await node.report(follower)


def _frame(
    node: Node, epoch: int, entries: list[JournalEntry], last: int, now: int, committed: int
) -> pb.FollowResponse:
    """A frame of entries, with the producer state (J-4) of the batches that end within them;
    ``now`` is this primary's clock when its journal ended at ``last``; ``committed`` the
    cluster's committed point (what the replica may show its subscribers)."""
    producers = node.engine.producer_log(entries[0].seq - 1, entries[-1].seq)
    return pb.FollowResponse(
        epoch=epoch,
        entries=[_entry(e) for e in entries],
        last_bookmark=last,
        clock_us=now,
        producers=[pb.ReplicatedProducer(bookmark=b, producer=p, sequence=q) for b, p, q in producers],
        committed_bookmark=committed,
    )


def _epochs(node: Node) -> list[pb.EpochStart]:
    return [pb.EpochStart(epoch=e, first_bookmark=b, node=n) for e, b, n in node.engine.epoch_history()]


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
