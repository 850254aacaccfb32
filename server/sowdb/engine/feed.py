"""The writer's ordered feed to its reader processes, and a reader's live registry fed by it
(SPEC §14, issue 41: a server per core).

``sowd --workers N`` runs one writer and N - 1 readers on one port. The writer applies every write
as a single process does; each batch its gate releases (what its own subscribers are offered) is
encoded once, as one feed entry, and queued for every reader in the writer's total order, as
are the events that change what a reader may deliver (a rights reload). A reader applies the
entries in that order to its own :class:`~sowdb.engine.live.SubscriptionHub`, whose
subscriptions it serves on its own connections: the Python cost of delivering a frame, which
bounds one process, is spread over the processes.

A reader never sees a change before the writer's subscribers could (the feed is fed behind the
writer's gate), places a subscription at its feed position in one synchronous step (as the
writer places one at its last bookmark: no gap, no duplicate), and delivers every subscription
the same sequence the writer would. A reader that falls :data:`FEED_LIMIT` entries behind is cut
off (publishers never wait for it) and started again by the supervisor; its clients reconnect.

The engine never imports grpc: the entries are bytes here, carried by :mod:`sowdb.workers`.
"""

from __future__ import annotations

import asyncio
import marshal
from collections import Counter, deque
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import replace
from itertools import count
from typing import Any

from sowdb.config import ServerConfig, TopicConfig, is_regex_topic
from sowdb.engine.access import EVERYONE, Access, check_quota
from sowdb.engine.changes import Change
from sowdb.engine.counters import Counters
from sowdb.engine.filters import request_filter
from sowdb.engine.group_figures import GroupFigures, ReaderReports
from sowdb.engine.live import (
    Replacement,
    Subscription,
    SubscriptionHub,
    SubscriptionOptions,
    SubscriptionStream,
    is_private,
    new_subscription,
)
from sowdb.engine.records import StoredRecord
from sowdb.engine.state import key_fields_of
from sowdb.errors import InvalidArgument, ResourceExhausted, SowdbError, Unavailable

FEED_LIMIT = 65_536
"""Entries a reader may have waiting before the writer cuts it off (it is started again)."""

CHANGES, RIGHTS, POSITION = 0, 1, 2
"""The kinds of entry: a released batch of one topic; a rights reload; where the feed starts."""

_Version = tuple[bytes, str, int, int, int] | None  # raw, sow_key, bookmark, timestamp_us, expiry_us


def _version(r: StoredRecord | None) -> _Version:
    return None if r is None else (r.raw, r.sow_key, r.bookmark, r.timestamp_us, r.expiry_us)


def encode_changes(topic: str, changes: Sequence[Change]) -> bytes:
    """One released batch as a feed entry (``marshal``: the types are bytes, str and int only)."""
    rows = [(c.sow_key, c.bookmark, c.timestamp_us, c.reason, _version(c.old), _version(c.new)) for c in changes]
    return marshal.dumps((CHANGES, topic, rows))


def decode_changes(topic: str, rows: list[Any]) -> list[Change]:
    """The :class:`Change` objects of an entry, their versions made from the bytes it carries."""

    def version(v: _Version) -> StoredRecord | None:
        return None if v is None else StoredRecord(topic, v[1], None, v[0], v[2], v[3], v[4])

    return [
        Change(topic, key, bookmark, ts, version(old), version(new), reason)
        for key, bookmark, ts, reason, old, new in rows
    ]


class FeedQueue:
    """One reader's entries waiting to be sent, in order; cut off past :data:`FEED_LIMIT`.
    ``reader``: the number the writer knows the reader by (its claims, :meth:`Feed.claim`)."""

    def __init__(self, reader: int, first: bytes) -> None:
        self.reader = reader
        self.entries: deque[bytes] = deque([first])
        self.ready = asyncio.Event()
        self.ready.set()
        self.cut = False

    def put(self, entry: bytes) -> None:
        if self.cut:
            return
        if len(self.entries) >= FEED_LIMIT:
            self.cut = True  # the reader is too far behind: it starts again (its clients reconnect)
            self.entries.clear()
        else:
            self.entries.append(entry)
        self.ready.set()

    async def stream(self) -> AsyncIterator[bytes]:
        """The entries as they come.

        Raises:
            ResourceExhausted: the reader fell :data:`FEED_LIMIT` entries behind.
        """
        while True:
            await self.ready.wait()
            self.ready.clear()
            while self.entries:
                yield self.entries.popleft()
            if self.cut:
                raise ResourceExhausted(f"the reader fell {FEED_LIMIT} feed entries behind; it starts again")


class Feed:
    """The writer's end: every released batch and rights reload, encoded once, to every reader.

    Attached as a consumer behind the writer's delivery gate (``SubscriptionHub.behind_gate``),
    so a reader gets exactly what the writer's subscribers are offered, in the same order.
    """

    def __init__(self, position: Callable[[], int], held_by: Callable[[str], int]) -> None:
        self.position = position  # the last bookmark the writer's subscribers may see
        self.held_by = held_by  # a user's live subscriptions in the group (the writer's and the claims)
        self.readers: set[FeedQueue] = set()
        self.claims: dict[int, Counter[str]] = {}  # per reader: its users' live subscriptions
        self.figures = GroupFigures()  # per reader: its last report of its subscriptions and calls
        self._numbers = count(1)

    def attach(self) -> FeedQueue:
        """A new reader's queue, starting at the writer's position now (what it has not been
        sent is in the state the reader's clients query through the writer)."""
        reader = next(self._numbers)
        queue = FeedQueue(reader, marshal.dumps((POSITION, self.position(), reader)))
        self.readers.add(queue)
        self.claims[reader] = Counter()
        return queue

    def detach(self, queue: FeedQueue) -> None:
        """The reader is gone: so are its subscriptions, and what they counted."""
        self.readers.discard(queue)
        self.claims.pop(queue.reader, None)
        self.figures.forget(queue.reader)

    def report(self, payload: bytes) -> None:
        """A reader's figures (:meth:`~sowdb.engine.group_figures.ReaderReports.take`), kept while it is attached."""
        self.figures.report(payload, self.claims)

    def held(self, user: str) -> int:
        """``user``'s live subscriptions in the readers."""
        return sum(c[user] for c in self.claims.values())

    def claim(self, reader: int, access: Access, adding: int) -> None:
        """A reader places (``adding`` 1) or ends (-1) a subscription of ``access``'s user, which
        counts against the user's ``max_subscriptions`` across the group.

        Raises:
            ResourceExhausted: the user holds its quota already (the reader refuses the call).
            InvalidArgument: no such reader (it was cut off).
        """
        claims = self.claims.get(reader)
        if claims is None:
            raise InvalidArgument(f"reader {reader} is not attached to the feed")
        if adding > 0:
            check_quota(access, "max_subscriptions", self.held_by(access.user))
        claims[access.user] = max(0, claims[access.user] + adding)

    def changes(self, topic: str, changes: Sequence[Change]) -> None:
        if self.readers and not is_private(topic):  # a private view is its writer-side subscriber's alone
            entry = encode_changes(topic, changes)
            for queue in self.readers:
                queue.put(entry)

    def rights(self) -> None:
        """The writer reloaded its users and roles: each reader reloads at this point of the order."""
        entry = marshal.dumps((RIGHTS,))
        for queue in self.readers:
            queue.put(entry)


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
        elif kind == POSITION:
            self.position, self.reader, self.started = item[1], item[2], True
        elif kind == RIGHTS:
            self.on_rights()

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
        return SubscriptionStream(
            sub,
            None,
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
        None when there is none here (the writer's, then). A reader's subscriptions hold no
        records (no oof, no delta, no query: those are the writer's), so a new filter needs no
        state, only the changes from now on.

        Raises:
            InvalidArgument: a page, or oof (the server does not know what its subscriber holds).
        """
        sub = next((s for s in self.hub.subs.values() if s.name == sub_id and s.access.user == user), None)
        if sub is None or sub.owner != owner:
            return None
        if change.top_n is not None or change.skip_n is not None or change.order_by.strip():
            raise InvalidArgument("only a paginated subscription takes top_n, skip_n and order_by", field="top_n")
        options = change.options
        options.check()
        if options.oof or options.delta:
            raise InvalidArgument(
                "oof and delta cannot be turned on for this subscription: it was placed without them, so the server "
                "does not know which records its subscriber holds; subscribe again with them",
                field="options.oof" if options.oof else "options.delta",
            )
        compiled = request_filter(change.filter)
        sub.replace(compiled, replace(options, deleted_events=sub.options.deleted_events), {})
        self.hub.refilter(sub)
        return self.position

    def end_all(self, failure: SowdbError) -> None:
        """The feed ended: every subscription ends with ``failure`` (its clients resubscribe)."""
        for sub in list(self.hub.subs.values()):
            sub.end(failure)

    def reauthorize(self, rights: Callable[[str], Access | None]) -> int:
        """A-4 in this process: end the subscriptions whose callers lost the right to them."""
        return self.hub.reauthorize(rights, self.sow_topics)
