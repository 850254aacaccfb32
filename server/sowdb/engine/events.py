"""The events the engine hands the protocol layer: a query's frames (Q-1) and a subscription's
stream (S-1, H-3, H-4). The protocol layer only encodes them."""

from __future__ import annotations

from dataclasses import dataclass

from sowdb.engine.changes import QueuedEvent
from sowdb.engine.records import StoredRecord


@dataclass(frozen=True)
class GroupBegin:
    """Opens a query's results; ``bookmark`` is the sequence point the query sees."""

    query_id: str
    bookmark: int


@dataclass(frozen=True)
class GroupEnd:
    """Closes a query's results with its counts (Q-1)."""

    query_id: str
    returned: int
    matched: int
    scanned: int


@dataclass(frozen=True)
class RecordBatch:
    """At most ``batch_size`` records of a query's results."""

    records: list[StoredRecord]


QueryEvent = GroupBegin | RecordBatch | GroupEnd


@dataclass(frozen=True)
class Subscribed:
    """A subscription is placed: its id and the point it was placed at.

    The id is the client's when it chose one, else the server's; ReplaceSubscription names the
    subscription by it (R-1)."""

    sub_id: str
    bookmark: int


@dataclass(frozen=True)
class Completed:
    """The journal replay of a subscription with a bookmark is done; live events follow."""

    bookmark: int


@dataclass(frozen=True)
class Heartbeat:
    """Idle progress: the latest bookmark of the instance."""

    bookmark: int


@dataclass(frozen=True)
class Deliveries:
    """A subscriber's queued events, drained in one go, in order."""

    events: list[QueuedEvent]


StreamEvent = QueryEvent | Subscribed | Completed | Heartbeat | Deliveries
