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
from collections.abc import AsyncIterator, Callable, Sequence
from itertools import count
from typing import Any, Protocol

from sowdb.engine.access import Access, check_quota
from sowdb.engine.arena import PIN_SLOTS
from sowdb.engine.changes import Change
from sowdb.engine.group_figures import GroupFigures
from sowdb.engine.live import (
    is_private,
)
from sowdb.engine.records import StoredRecord
from sowdb.errors import InvalidArgument, ResourceExhausted

FEED_LIMIT = 65_536
"""Entries a reader may have waiting before the writer cuts it off (it is started again)."""

CHANGES, RIGHTS, POSITION = 0, 1, 2
"""The kinds of entry: a released batch of one topic; a rights reload; where the feed starts
(with the reader's number, its slot in the arenas' shared pins and the arenas' directories)."""


class Arenas(Protocol):
    """The writer's topics, as the feed tells readers about their record arenas."""

    def arenas(self) -> dict[str, str]: ...

    def release_pins(self, reader: int) -> None: ...


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
        self.pin_slot = -1  # its slot in the arenas' shared pins (:mod:`sowdb.engine.arena.pins`)

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

    def __init__(self, position: Callable[[], int], held_by: Callable[[str], int], arenas: Arenas) -> None:
        self.position = position  # the last bookmark the writer's subscribers may see
        self.held_by = held_by  # a user's live subscriptions in the group (the writer's and the claims)
        self.arenas = arenas  # the topics' record arenas, which readers map to answer queries
        self.readers: set[FeedQueue] = set()
        self.claims: dict[int, Counter[str]] = {}  # per reader: its users' live subscriptions
        self.figures = GroupFigures()  # per reader: its last report of its subscriptions and calls
        self._numbers = count(1)

    def __bool__(self) -> bool:
        """Whether a reader follows the feed (the writer then builds every batch's changes)."""
        return bool(self.readers)

    def attach(self) -> FeedQueue:
        """A new reader's queue, starting at the writer's position now (what it has not been
        sent is in the state the reader's clients query through the writer)."""
        reader = next(self._numbers)
        taken = {q.pin_slot for q in self.readers}
        pin_slot = next((i for i in range(PIN_SLOTS) if i not in taken), -1)  # -1: it reads no arena
        arenas = self.arenas.arenas() if pin_slot >= 0 else {}
        queue = FeedQueue(reader, marshal.dumps((POSITION, self.position(), reader, pin_slot, arenas)))
        queue.pin_slot = pin_slot
        self.readers.add(queue)
        self.claims[reader] = Counter()
        return queue

    def detach(self, queue: FeedQueue) -> None:
        """The reader is gone: so are its subscriptions, and what they counted."""
        self.readers.discard(queue)
        self.claims.pop(queue.reader, None)
        if queue.pin_slot >= 0:
            self.arenas.release_pins(queue.pin_slot)
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
