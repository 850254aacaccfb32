"""What flows from the writer to everything downstream of it: applied changes, and the events
they become in a subscriber's queue."""

from __future__ import annotations

from dataclasses import dataclass

from sowdb.engine.records import StoredRecord

OOF_DELETED = "deleted"
OOF_EXPIRED = "expired"
OOF_MATCH = "match"


@dataclass(slots=True)
class QueuedEvent:
    """An event waiting in a subscriber's queue: ``publish``, ``oof`` or ``deleted``."""

    kind: str
    record: StoredRecord
    reason: str = ""


@dataclass(slots=True)
class Change:
    """One applied change, as subscribers, pages and derived topics see it.

    Attributes:
        old: the version before the change (None for an insert or a non-SOW topic, and for
            a publish to a topic in an arena when nothing that follows it reads the replaced
            versions: :meth:`FanOut.olds_wanted <sowdb.engine.write.fanout.FanOut.olds_wanted>`).
        new: the version after it (None for a delete or expiration).
        reason: for removals, ``deleted`` or ``expired``.
        event: the ``publish`` event of ``new``, made once and queued by every subscriber
            that takes it whole (encode once, share among subscribers).
    """

    topic: str
    sow_key: str
    bookmark: int
    timestamp_us: int
    old: StoredRecord | None
    new: StoredRecord | None
    reason: str = OOF_DELETED
    event: QueuedEvent | None = None
