"""The engine: the one object the protocol layer calls, composed of parts with one job each.

``Engine.open`` recovers the store (J-2), loads the state into memory and wires the parts:

- :class:`~sowdb.engine.state.topics.Topics` — the topic registry (SOW and derived topics);
- :class:`~sowdb.engine.write.writer.Writer` — every change, the only assigner of bookmarks;
- :class:`~sowdb.engine.write.fanout.FanOut` — applied changes to subscribers, pages, derived topics;
- :class:`~sowdb.engine.journal.Journal` — bookmarks resolved to points, replays, retention;
- :class:`~sowdb.engine.read.queries.Queries` — SOW queries;
- :class:`~sowdb.engine.live.placement.Placement` — placing, replacing and removing subscriptions,
  whose life after placement is a :class:`~sowdb.engine.live.streams.SubscriptionStream`;
- for pipelines (the data service, SPEC §9): :class:`~sowdb.engine.read.snapshots.Snapshots` (pinned
  query results read in slices), :class:`~sowdb.engine.journal.ranges.JournalReads` (journal
  ranges), :class:`~sowdb.engine.write.staging.Stages` (staged writes committed atomically);
- :class:`~sowdb.engine.stats.Stats` — the operators' figures (SPEC §12), over the
  :class:`~sowdb.engine.counters.Counters` that the writer and the protocol layer keep.

It never imports grpc: the protocol layer translates requests into these calls, and domain
errors (``sowdb.errors``) into gRPC statuses. ``server/sowdb/engine/README.md`` is the map.
"""

from __future__ import annotations

import gc
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from functools import wraps
from pathlib import Path
from typing import Any, ParamSpec, TypeVar, Unpack

from sowdb.config import Config
from sowdb.engine.access import EVERYONE, Access
from sowdb.engine.clock import Clock, system_clock
from sowdb.engine.counters import Counters
from sowdb.engine.events import QueryEvent
from sowdb.engine.feed import Feed
from sowdb.engine.journal import Journal, JournalReads, RecoveryReport, StoreDamaged, load_state, rebuild, recover
from sowdb.engine.live import (
    PageSets,
    Placement,
    Replacement,
    SowAndSubscribeArgs,
    SubscribeArgs,
    Subscription,
    SubscriptionHub,
    SubscriptionStream,
    committed_results,
    restricted_join_name,
)
from sowdb.engine.read import Queries, QueryOptions, Snapshots
from sowdb.engine.replication import ReplicationPort
from sowdb.engine.starting import StartProgress
from sowdb.engine.state import ExpiryQueue, RestrictedJoins, Topics, TopicSummary
from sowdb.engine.stats import Stats, StatsSnapshot
from sowdb.engine.write import FanOut, Stages, Writer
from sowdb.errors import FailedPrecondition, InvalidArgument, SowdbError
from sowdb.storage import Store, StoreUnusable

log = logging.getLogger("sowdb.engine")

P = ParamSpec("P")
R = TypeVar("R")
Acknowledge = Callable[[int], Awaitable[None]]


class Engine:
    """Owns the topics and the store; the protocol layer's only way to read or change state."""

    def __init__(self, config: Config, store: Store, topics: Topics, expiry: ExpiryQueue, clock: Clock) -> None:
        """Wire the parts over loaded state; use :meth:`open`, which recovers and loads first."""
        self.config, self.store, self.clock, self.topics = config, store, clock, topics
        self.hub = SubscriptionHub()
        self.pages = PageSets()
        self.counters = Counters(topics.sow)
        fan_out = FanOut(topics, self.hub, self.pages, self.counters)
        self.writer = Writer(config, store, topics, fan_out, expiry, clock, self.counters)
        self.journal = Journal(store, topics, self.writer, config.server, clock)
        joins = RestrictedJoins(topics, clock, restricted_join_name)  # V-2 under row filters
        self.hub.shown = joins.shown
        self.queries = Queries(
            topics, self.journal, self.writer, clock, frame_bytes=config.server.frame_bytes, joins=joins
        )
        self.placement = Placement(topics, self.hub, self.pages, self.journal, self.writer, config.server, clock, joins)
        # the data service's parts (SPEC §9): pinned snapshots, journal range reads, staged writes
        self.snapshots = Snapshots(self.queries)
        self.journal_reads = JournalReads(store, self.journal, self.writer)
        self.stages = Stages(topics, self.writer, clock)
        self.figures = Stats(self.counters, topics, self.hub, store, self.writer, clock)
        self.replication = ReplicationPort(self)  # what a cluster node may do with this engine
        self.recovery: RecoveryReport | None = None
        # Every change goes to its one owner as it is: the writer's signatures and documents are
        # the engine's (publish: K-1 … K-5, D-1, X-1, J-4; sow_delete: by filter, SowKeys or data).
        self.publish = self.writer.publish
        self.sow_delete = self.writer.sow_delete
        # The data service's calls (SPEC §9) likewise go to their owners as they are.
        self.open_snapshot = self.snapshots.open
        self.read_snapshot = self.snapshots.read
        self.close_snapshot = self.snapshots.close
        self.read_journal = self.journal_reads.read
        self.describe_journal = self.journal_reads.describe
        self.begin_stage = self.stages.begin
        self.commit_stages = self.stages.commit
        self.abort_stages = self.stages.abort
        self.rpc_counters = self.counters.rpc  # the protocol layer notes each RPC's calls (SPEC §12)
        self.acknowledge: Acknowledge | None = None
        """In a cluster (SPEC §13): awaited with a write's last bookmark before it is acknowledged
        (HA-1 fencing, HA-3 ``sync``); raises ``Unavailable`` when it may not be. None alone."""
        self._write_check: Callable[[], None] | None = None
        self._read_hold_s: float | None = None

    def guard_writes(self, check: Callable[[], None], acknowledge: Acknowledge) -> None:
        """Make this engine a cluster node's (SPEC §13): ``check`` runs before every publish
        and delete and refuses them on a replica (``NotPrimary``) or a fenced primary
        (``Unavailable``); ``acknowledge`` is :attr:`acknowledge`. A replica's own expiry sweep
        stops too: its expirations come from the primary's journal (HA-2)."""
        self._write_check = check
        self.acknowledge = acknowledge
        self.publish = _checked(check, self.writer.publish)
        self.sow_delete = _checked(check, self.writer.sow_delete)
        self.begin_stage = _checked(check, self.stages.begin)  # staged writes are writes too
        commit = self.stages.commit

        async def commit_stages(*args: Any, **kwargs: Any) -> Any:
            check()
            return await commit(*args, **kwargs)

        self.commit_stages = commit_stages

    def hold_reads(self, within_s: float | None) -> None:
        """Make queries wait for the gate as deliveries do (a ``sync`` cluster's primary): a
        query's results go out once its bookmark may be shown, or it fails ``Unavailable``
        after ``within_s`` seconds (:func:`sowdb.engine.live.gate.committed_results`). None
        (the node stepped down): queries read the state as written again, those waiting too."""
        self._read_hold_s = within_s
        if within_s is None:
            self.hub.gate.stop_holding_queries()

    def deliver_upto(self, committed: int | None) -> None:
        """Show subscribers only the changes up to bookmark ``committed`` and hold the later
        ones until a call with a higher one (a ``sync`` primary: what its replicas hold,
        :mod:`sowdb.engine.live.gate`); None shows everything, as a lone server does."""
        self.hub.commit(committed)

    def shown_upto(self) -> int:
        """The last bookmark subscribers may see: the delivery gate's point, or the last written
        while it is open. A cluster's primary ships it to its replicas as the committed point."""
        return self.hub.gate.start_point(self.last_seq)

    def require_primary(self) -> None:
        """For a read that must see the primary's state (a client's ``read_from="primary"``):
        nothing on a lone server; on a cluster node, what a write would meet.

        Raises:
            NotPrimary: a replica (naming the primary, where the client goes instead).
            Unavailable: a primary past its fencing deadline, or no primary known yet.
        """
        if self._write_check is not None:
            self._write_check()

    def accepts_writes(self) -> bool:
        """Whether a write would be accepted now (always, outside a cluster)."""
        if self._write_check is None:
            return True
        try:
            self._write_check()
        except SowdbError:
            return False
        return True

    rebuild = staticmethod(rebuild)  # `sowd rebuild`: current and history from the journal (J-2)

    @classmethod
    def open(
        cls, config: Config, store: Store, *, clock: Clock = system_clock, progress: StartProgress | None = None
    ) -> Engine:
        """Check the journal (checksums, within ``verify_budget``), bring the store level with it
        (J-2, and topics whose durability changed), load every topic into memory (J-3), and
        return the engine over it.

        ``current`` is checked while it loads: every block against its checksum and each
        topic's records against its count. A damaged ``current`` is rebuilt from the journal
        when the journal holds everything (it is the authority); otherwise start-up is refused.

        Raises:
            StoreUnusable: the journal is damaged, or ``current`` is and the journal cannot
                rebuild it; the message says how to recover.

        ``progress``, when given, is kept up to date for callers who ask while this runs (it may
        run on a thread of its own while the server answers them: :mod:`sowdb.engine.starting`).
        """
        progress = progress if progress is not None else StartProgress()
        progress.recovering()
        recovery = recover(store, config)
        try:
            topics, expiry = _load(config, store, clock, progress)
        except StoreDamaged as exc:
            trimmed = store.journal_trimmed()
            if trimmed:
                raise StoreUnusable(
                    f"the stored state in {store.path} is damaged ({exc}), and the journal cannot rebuild it: "
                    f"retention removed bookmarks up to {trimmed}. Restore a checkpoint (`sowd checkpoint`), or run "
                    "`sowd rebuild` to rebuild from what the journal holds, losing records last changed before that"
                ) from None
            log.error("the stored state is damaged (%s); rebuilding current and history from the journal", exc)
            recovery = rebuild(store, config)
            topics, expiry = _load(config, store, clock, progress)
        engine = cls(config, store, topics, expiry, clock)
        engine.recovery = recovery
        return engine

    # --- what the protocol layer calls -----------------------------------------------------------

    @property
    def last_seq(self) -> int:
        """The bookmark of the latest change."""
        return self.writer.last_seq

    def sow(self, opts: QueryOptions, access: Access = EVERYONE) -> AsyncIterator[QueryEvent]:
        """A SOW query: group_begin, record batches, group_end (Q-1)."""
        return self._shown_when_committed(self.queries.sow(opts, access))

    def subscribe(self, topic: str, **args: Unpack[SubscribeArgs]) -> SubscriptionStream:
        """A subscription without a query, placed now; with a bookmark it replays first (H-4).
        The arguments are :meth:`Placement.subscribe`'s."""
        return self._stream(self.placement.subscribe(topic, **args), None)

    def sow_and_subscribe(self, opts: QueryOptions, **args: Unpack[SowAndSubscribeArgs]) -> SubscriptionStream:
        """A query and a subscription placed at one point (S-1, H-3, P-1, Q-8); the arguments
        are :meth:`Placement.sow_and_subscribe`'s."""
        sub, query = self.placement.sow_and_subscribe(opts, **args)
        return self._stream(sub, self._shown_when_committed(query))

    def _shown_when_committed(self, events: AsyncIterator[QueryEvent]) -> AsyncIterator[QueryEvent]:
        """A query's results, held by the gate on a ``sync`` primary (:meth:`hold_reads`)."""
        if self._read_hold_s is None:
            return events
        return committed_results(events, self.hub.gate, self._read_hold_s)

    def _stream(self, sub: Subscription, query: AsyncIterator[QueryEvent] | None) -> SubscriptionStream:
        return SubscriptionStream(
            sub,
            query,
            placement=self.placement,
            journal=self.journal,
            writer=self.writer,
            hub=self.hub,
            heartbeat_s=self.config.server.heartbeat_s,
            frame_bytes=self.config.server.frame_bytes,
        )

    def feed(self) -> Feed:
        """The ordered feed to reader processes (``sowd --workers``, issue 41), fed from now on
        with every batch the delivery gate releases, as the subscribers are."""
        feed = Feed(lambda: self.hub.gate.start_point(self.writer.last_seq), self.hub.held_by, self.topics)
        self.hub.behind_gate.append(feed.changes)
        self.hub.elsewhere = feed.held  # the readers' subscriptions count against a user's quota
        self.hub.followed_elsewhere = feed.__bool__  # changes are built while a reader follows
        self.figures.merge = feed.figures.merged  # and in the operators' figures
        return feed

    def replace_subscription(self, sub_id: str, change: Replacement, *, owner: str, user: str = "") -> int:
        """R-1; returns the bookmark at which the replacement took effect (the subscription keeps
        its caller's rights; only ``user``'s own, placed from the connection ``owner``)."""
        return self.placement.replace_subscription(sub_id, change, owner=owner, user=user)

    def list_topics(self, access: Access = EVERYONE) -> list[TopicSummary]:
        """The configured topics the caller may read (A-3; an admin sees all). A topic the caller
        sees some rows of only has no record count (0): the count covers the rows it may not see
        (issue 26), and counting the visible ones would be a scan per call."""
        return [
            t if access.sees_all(t.name) else replace(t, record_count=0)
            for t in self.topics.summaries()
            if access.admin or access.can_read(t.name)
        ]

    def reauthorize(self, rights: Callable[[str], Access | None]) -> int:
        """A-4: rights changed (a reload): each live subscription whose caller lost the right to
        it — the user is gone, a topic it follows is no longer readable, its row entitlement
        changed — ends with PERMISSION_DENIED; returns how many ended. ``rights`` gives a user's
        new rights (None for a user that no longer exists). The snapshots and stages of users who
        lost the right to them end too (streams re-check at each request: ``Authenticator.current``)."""
        snapshots, stages = self.snapshots.reauthorize(rights), self.stages.reauthorize(rights)
        if snapshots or stages:
            log.info("rights changed: %d snapshots and %d stages ended", snapshots, stages)
        return self.hub.reauthorize(rights, self.topics.sow)

    def stats(self, topic: str = "", *, topics_only: bool = False, access: Access = EVERYONE) -> StatsSnapshot:
        """The operators' figures (SPEC §12) at this point of the total order; see
        :meth:`Stats.snapshot` for what a caller without an admin role may see."""
        return self.figures.snapshot(topic, topics_only=topics_only, access=access)

    def checkpoint(self, directory: str, access: Access = EVERYONE) -> tuple[str, int, int]:
        """A consistent copy of the store in a new directory, taken in one step of the writer
        (no change can land half-way); returns (the directory, its last bookmark, its size).

        Raises:
            InvalidArgument: no directory, or its parent does not exist.
            FailedPrecondition: the directory exists already.
        """
        access.require_admin("write a checkpoint")
        if not directory.strip():
            raise InvalidArgument("directory is required", field="directory")
        target = Path(directory).expanduser().resolve()
        if target.exists():
            raise FailedPrecondition(
                f"{target} exists already; a checkpoint goes into a new directory", field="directory"
            )
        if not target.parent.is_dir():
            raise InvalidArgument(f"{target.parent} is not a directory on the server's machine", field="directory")
        size = self.store.checkpoint(str(target))
        return str(target), self.writer.last_seq, size

    # --- the upkeep's chores (sowdb.engine.upkeep) ------------------------------------------------

    @property
    def writable(self) -> bool:
        return self.writer.writable

    def build_columns(self) -> bool:
        """One step of building the columns queries asked for; whether more steps are due."""
        return self.topics.build_columns()

    def compact(self) -> int:
        """Compact the topics' arenas that hold enough replaced or deleted versions no query
        still reads (issue 39); the versions freed."""
        return self.topics.compact()

    def flush_conflated(self) -> None:
        """Conflated topics (C-2) whose interval ended publish their refreshed records; not on
        a replica, which refreshes at its primary's instants (:meth:`refresh_conflated`)."""
        if self.accepts_writes():
            self.writer.flush_conflated()

    def refresh_conflated(self, topic: str, at_us: int) -> int:
        """On a replica (HA-2): refresh conflated topic ``topic`` as its primary did at
        ``at_us``, right after the bookmark the replica has just applied; returns the changes
        (:mod:`sowdb.engine.write.conflation`)."""
        return self.writer.flush_conflated(at_us, topic)

    def expire_leases(self) -> None:
        """End the data service's snapshots and stages whose lease ran out (SPEC §9)."""
        self.snapshots.expire()
        self.stages.expire()

    def recover_storage(self) -> bool:
        """Try to reopen a store whose write failed (a full disk); whether it is writable again."""
        return self.writer.recover_storage()

    def expire_due(self) -> int:
        """Expire the records whose TTL ended (X-1); returns how many (none on a replica: its
        expirations are the primary's, journaled and shipped)."""
        if not self.accepts_writes():
            return 0
        return self.writer.expire_due()

    def trim(self) -> bool:
        """History trimming (H-1) and journal retention; whether history has more to trim."""
        more = self.writer.trim_history()
        self.journal.trim()
        return more

    def next_expiry(self) -> int | None:
        """When the next record expires (µs since the epoch), if any does."""
        return self.writer.expiry.next_due()

    def close(self) -> None:
        self.store.close()
        self.topics.close()


def _checked(check: Callable[[], None], call: Callable[P, R]) -> Callable[P, R]:
    """``call`` behind ``check``, which raises to refuse it."""

    @wraps(call)
    def checked(*args: P.args, **kwargs: P.kwargs) -> R:
        check()
        return call(*args, **kwargs)

    return checked


def _load(config: Config, store: Store, clock: Clock, progress: StartProgress) -> tuple[Topics, ExpiryQueue]:
    topics = Topics(config)
    expiry = ExpiryQueue()
    counts = store.record_counts()
    progress.loading(sum(counts.get(name, 0) for name, t in topics.sow.items() if t.persistent), topics.sow)
    # Loading allocates millions of long-lived objects and no cycles; the cyclic collector
    # would re-scan all of them again and again (a fifth of the load time, measured).
    enabled = gc.isenabled()
    gc.disable()
    try:
        load_state(store, config, topics.sow, expiry, clock())
        topics.load_derived(clock())
    finally:
        if enabled:
            gc.enable()
    return topics, expiry
