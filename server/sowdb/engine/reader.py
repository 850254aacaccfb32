"""A reader process of ``sowd --workers N`` (issue 41): its live subscriptions, fed by the
writer's ordered feed (:mod:`sowdb.engine.feed`), and its queries, read from the writer's record
arenas (:mod:`sowdb.engine.arena`) mapped read-only.

A reader applies the feed's entries in the writer's order to its own
:class:`~sowdb.engine.live.SubscriptionHub`, whose subscriptions it serves on its own
connections: the Python cost of delivering a frame, which bounds one process, is spread over the
processes. It answers a query of a topic whose records are in an arena (``[server] record_store
= "arena"``) from the arena itself: the versions visible at the last bookmark the writer
committed, pinned in the arena's shared pins so that the writer's compactions spare them, and
shown only once the feed has reached that bookmark (no reader answers above what the writer's
subscribers may see). A query it cannot answer so (a pattern, a point in the past, a topic of
objects, a view) is the writer's: its caller relays it.
"""

from __future__ import annotations

import asyncio
import logging
import marshal
from collections import Counter
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable, Sequence
from contextlib import suppress
from dataclasses import replace
from pathlib import Path
from typing import cast

import numpy as np

from sowdb.config import ServerConfig, TopicConfig, is_regex_topic
from sowdb.engine.access import EVERYONE, Access
from sowdb.engine.arena import ArenaBusy, ArenaReader, AtPoint, HeldRecords, StalePin
from sowdb.engine.bookmarks import historical
from sowdb.engine.clock import system_clock
from sowdb.engine.counters import Counters
from sowdb.engine.events import QueryEvent
from sowdb.engine.feed import CHANGES, POSITION, RIGHTS, decode_changes
from sowdb.engine.filters import request_filter
from sowdb.engine.group_figures import ReaderReports
from sowdb.engine.live import (
    Replacement,
    Subscription,
    SubscriptionHub,
    SubscriptionOptions,
    SubscriptionStream,
    new_subscription,
)
from sowdb.engine.read import PreparedQuery, QueryOptions
from sowdb.engine.records import StoredRecord
from sowdb.engine.state import key_fields_of
from sowdb.errors import FailedPrecondition, InvalidArgument, SowdbError, Unavailable

log = logging.getLogger("sowdb.engine.reader")


class ReaderLive:
    """A reader process's live subscriptions, fed by the writer's :class:`Feed`.

    It places plain subscriptions (a topic or pattern, a filter, options) as the writer's
    ``Placement.subscribe`` does without a bookmark, at its feed position, and offers them every
    change of the feed through its own hub. ``on_rights`` is called at a rights entry (the
    process reloads its users and calls :meth:`reauthorize`).
    """

    def __init__(self, config: ServerConfig, topics: Iterable[TopicConfig], on_rights: Callable[[], None]) -> None:
        self.config = config
        self.hub = SubscriptionHub()
        self.position = 0  # the last bookmark applied from the feed
        self.reader = 0  # the number its writer knows it by
        self.started = False  # the feed's first entry (its position) came
        self.on_rights = on_rights
        self.counters = Counters(set())
        self.rpc_counters = self.counters.rpc  # the protocol layer counts its calls here
        self.reports = ReaderReports()  # its figures for its writer's
        topic_list = list(topics)
        self.key_fields = key_fields_of(topic_list)
        self.sow_topics = [t.name for t in topic_list]
        self.arenas: dict[str, ArenaReader] = {}  # the writer's record arenas, mapped read-only
        self.pin_slot = -1  # this reader's slot in the arenas' shared pins
        self._held: dict[str, Counter[int]] = {}  # per topic: the bookmarks its queries read at
        self._waiting: list[tuple[int, asyncio.Future[None]]] = []  # queries until the feed reaches a point

    @property
    def last_seq(self) -> int:
        """The point subscriptions are placed at (a :class:`~sowdb.engine.journal.Position`)."""
        return self.position

    def report(self, topics: Iterable[str], name: str = "") -> bytes:
        """This reader's figures for its writer's (``topics``: those a pattern may follow;
        ``name``: the process's, ``reader-1``)."""
        return self.reports.take(self.reader, name or f"reader-{self.reader}", self.hub, self.counters, topics)

    def apply(self, entry: bytes) -> None:
        """One feed entry, in order."""
        item = marshal.loads(entry)
        kind = item[0]
        if kind == CHANGES:
            changes = decode_changes(item[1], item[2])
            if changes:
                self.position = max(self.position, max(c.bookmark for c in changes))
                if self.hub.subs:
                    self.hub.fan_out(item[1], changes)
                if self._waiting:
                    self._wake()
        elif kind == POSITION:
            self.position, self.reader, self.started = item[1], item[2], True
            self.pin_slot = item[3]
            self._map(item[4])
        elif kind == RIGHTS:
            self.on_rights()

    # ------------------------------------------------------------------------------ queries

    def sow(self, opts: QueryOptions, access: Access = EVERYONE) -> AsyncGenerator[QueryEvent, None] | None:
        """A SOW query answered from the topic's arena, as the writer would answer it; None when
        this reader cannot (its caller relays the query to the writer).

        Raises:
            InvalidArgument, PermissionDenied: as the writer's refusals, before any event.
        """
        arena = self._arena(opts)
        if arena is None:
            return None
        query = PreparedQuery(opts)  # every option checked first, as the writer does
        access.require_read(opts.topic)
        if access.join_filters(opts.topic) is not None:
            return None
        at = arena.committed  # the caller's own acknowledged writes are in it
        records = self._records(opts.topic, opts.sow_keys, arena, at)
        if records is None:
            return None
        return self._shown_at(at, self._run(query, records, at, access))

    def sow_and_subscribe(
        self,
        opts: QueryOptions,
        *,
        options: SubscriptionOptions,
        sub_id: str = "",
        owner: str = "",
        access: Access = EVERYONE,
    ) -> SubscriptionStream | None:
        """S-1 in a reader: the query read from the topic's arena at the feed's position and the
        subscription placed there, in one synchronous step; None when the writer must answer it
        (an aggregated or paginated subscription, a past point, a topic of objects). Await
        :meth:`caught_up` first, so that the caller's own acknowledged writes are in it.

        Raises:
            InvalidArgument, PermissionDenied, ResourceExhausted: as the writer's refusals.
        """
        arena = self._arena(opts)
        if arena is None or opts.skip_n is not None:
            return None
        query = PreparedQuery(opts)
        if query.aggregation is not None:
            return None
        access.require_read(opts.topic)
        if access.join_filters(opts.topic) is not None:
            return None
        sub = new_subscription(
            self.hub,
            self.config,
            self.key_fields,
            opts.topic,
            opts.filter,
            options,
            sub_id,
            owner,
            track=True,
            select=query.select,
            sow_keys=opts.sow_keys,
            access=access,
        )  # its quota is the group's: the reader claims it at the writer first
        at = self.position  # where the subscription is placed: the query reads exactly that
        records = self._records(opts.topic, opts.sow_keys, arena, at)
        if records is None:
            return None
        sub.hold()  # the changes after ``at`` wait for the query's group_end
        events = self._run(query, records, at, sub.access)
        self.hub.add(sub, since=at)
        return self._stream(sub, events)

    def may_serve(self, opts: QueryOptions) -> bool:
        """Whether this reader may answer the query (its topic has an arena, it asks for now);
        the answer can still be the writer's (:meth:`sow`, :meth:`sow_and_subscribe`: None)."""
        return self._arena(opts) is not None

    async def caught_up(self, topic: str) -> None:
        """Return once the feed has reached the last commit of ``topic``'s arena."""
        arena = self.arenas.get(topic)
        if arena is not None and self.position < (at := arena.committed):
            await self._reached(at)

    def _arena(self, opts: QueryOptions) -> ArenaReader | None:
        arena = self.arenas.get(opts.topic)
        if arena is None or not self.started or self.pin_slot < 0:
            return None
        try:
            return None if historical(opts.bookmark) else arena
        except InvalidArgument:
            return None  # the writer says what is wrong, with whatever else is

    def _records(self, topic: str, sow_keys: Sequence[str], arena: ArenaReader, at: int) -> HeldRecords | None:
        """The records of ``arena`` a query at ``at`` reads (those of ``sow_keys`` only, if
        any), pinned; None when a compaction has freed them already."""
        try:
            if not self._hold(topic, arena, at):
                return None
            release = self._releaser(topic, arena, at)
            if sow_keys:
                keys = [k.encode() for k in dict.fromkeys(sow_keys)]
                slots = np.asarray(arena.live_at(keys, at), np.int64)
            else:
                slots = arena.visible(at)
        except (ArenaBusy, StalePin, OSError) as exc:
            log.info("reader %d relays a query of %s: %s", self.reader, topic, exc)
            return None
        return HeldRecords(arena, slots, release)

    def _run(self, query: PreparedQuery, records: HeldRecords, at: int, access: Access) -> AsyncIterator[QueryEvent]:
        entitlements = None if access.unrestricted else [access.entitlement(records.arena.topic)]
        now, frame = system_clock(), self.config.frame_bytes
        return query.run([records], at, now, frame_bytes=frame, entitlements=entitlements)

    async def _shown_at(self, at: int, events: AsyncIterator[QueryEvent]) -> AsyncGenerator[QueryEvent, None]:
        """``events`` once the feed has reached ``at``: the writer's subscribers may see it."""
        if self.position < at:
            await self._reached(at)
        async for event in events:
            yield event

    async def _reached(self, at: int) -> None:
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append((at, done))
        await done

    def _wake(self) -> None:
        still = []
        for at, done in self._waiting:
            if at <= self.position:
                if not done.done():
                    done.set_result(None)
            else:
                still.append((at, done))
        self._waiting = still

    def _map(self, arenas: dict[str, str]) -> None:
        """Map the writer's arenas (read-only; its shared pins read-write)."""
        for topic, directory in arenas.items():
            try:
                self.arenas[topic] = ArenaReader(Path(directory), topic)
            except (OSError, ArenaBusy) as exc:
                log.warning(
                    "reader %d relays the queries of %s: its arena cannot be mapped: %s", self.reader, topic, exc
                )

    def _hold(self, topic: str, arena: ArenaReader, at: int) -> bool:
        """Pin ``at`` in ``topic``'s arena for this reader (the oldest bookmark its queries of
        the topic read at); False when a compaction has freed what it sees already."""
        held = self._held.setdefault(topic, Counter())
        if held and min(held) <= at:  # pinned already by an older read
            held[at] += 1
            return True
        if not arena.hold(self.pin_slot, at):  # the slot keeps what it held
            return False
        held[at] += 1
        return True

    def _releaser(self, topic: str, arena: ArenaReader, at: int) -> Callable[[], None]:
        def release() -> None:
            held = self._held[topic]
            held[at] -= 1
            if held[at] <= 0:
                del held[at]
            with suppress(OSError, ValueError):  # the arena is gone (the process ends)
                arena.hold(self.pin_slot, min(held) if held else 0)

        return release

    # ------------------------------------------------------------------------ subscriptions

    def subscribe(
        self,
        topic: str,
        *,
        filter: str = "",
        options: SubscriptionOptions | None = None,
        sub_id: str = "",
        owner: str = "",
        access: Access = EVERYONE,
    ) -> SubscriptionStream:
        """A subscription without a query or bookmark, placed now (at the feed's position).

        Raises:
            Unavailable: the feed has not started.
            InvalidArgument: a bad topic, filter, options or sub_id.
            ResourceExhausted: the caller's ``max_subscriptions``, or the server's bound.
            PermissionDenied: a topic name the caller may not read.
        """
        if not self.started:
            raise Unavailable("this reader has not joined its writer's feed yet; try again")
        options = options or SubscriptionOptions()
        sub = new_subscription(
            self.hub, self.config, self.key_fields, topic, filter, options, sub_id, owner, access=access
        )  # its quota is the group's: the reader claims it at the writer first
        if not is_regex_topic(topic):
            access.require_read(topic)
        self.hub.add(sub, since=self.position)
        return self._stream(sub, None)

    def _stream(self, sub: Subscription, query: AsyncIterator[QueryEvent] | None) -> SubscriptionStream:
        return SubscriptionStream(
            sub,
            query,
            placement=self,
            journal=None,
            writer=self,
            hub=self.hub,
            heartbeat_s=self.config.heartbeat_s,
            frame_bytes=self.config.frame_bytes,
        )

    def unsubscribe(self, sub: Subscription) -> None:
        self.hub.remove(sub)

    def replace_subscription(self, sub_id: str, change: Replacement, *, owner: str, user: str = "") -> int | None:
        """R-1 for a subscription of this reader (its caller's connection is to this process);
        None when there is none here (the writer's, then). A subscription placed with a query
        holds what it was sent: the new filter's scope is read from the arena at the feed's
        position, as the writer reads its state. One placed without holds nothing (no oof, no
        delta: those are the writer's), so a new filter needs only the changes from now on.

        Raises:
            InvalidArgument: a page, or oof or delta for a subscription placed without them.
            FailedPrecondition: its query has not finished yet.
        """
        sub = next((s for s in self.hub.subs.values() if s.name == sub_id and s.access.user == user), None)
        if sub is None or sub.owner != owner:
            return None
        if sub.held is not None:
            raise FailedPrecondition("the subscription's query is still being sent; replace it after group_end")
        if change.top_n is not None or change.skip_n is not None or change.order_by.strip():
            raise InvalidArgument("only a paginated subscription takes top_n, skip_n and order_by", field="top_n")
        options = change.options
        options.check()
        if sub.focus is None and (options.oof or options.delta):
            raise InvalidArgument(
                "oof and delta cannot be turned on for this subscription: it was placed without them, so the server "
                "does not know which records its subscriber holds; subscribe again with them",
                field="options.oof" if options.oof else "options.delta",
            )
        compiled = request_filter(change.filter)
        scope: dict[str, AtPoint] = {}
        if sub.focus is not None:  # placed by sow_and_subscribe here: its topic has an arena
            arena = self.arenas[sub.topic]
            records = self._records(sub.topic, (), arena, self.position)
            if records is None:
                raise Unavailable("this reader fell behind the arena's compaction; replace the subscription again")
            scope[sub.topic] = AtPoint(records, self.position)
        options = replace(options, deleted_events=sub.options.deleted_events and not options.oof)
        sub.replace(compiled, options, cast("dict[str, dict[str, StoredRecord]]", scope))  # values() and get()
        self.hub.refilter(sub)
        return self.position

    def end_all(self, failure: SowdbError) -> None:
        """The feed ended: every subscription ends with ``failure`` (its clients resubscribe)."""
        for sub in list(self.hub.subs.values()):
            sub.end(failure)

    def reauthorize(self, rights: Callable[[str], Access | None]) -> int:
        """A-4 in this process: end the subscriptions whose callers lost the right to them."""
        return self.hub.reauthorize(rights, self.sow_topics)
