"""C-1 conflated subscriptions: the rules on the engine's Subscription with manual flushes (no
time passes). Through the server: ``tests/api/test_conflation.py``."""

from __future__ import annotations

from typing import Any

from sowdb.engine.changes import Change
from sowdb.engine.live.options import SubscriptionOptions
from sowdb.engine.live.subscription import Subscription
from sowdb.engine.records import StoredRecord
from sowdb.expr import compile_filter

_seq = iter(range(1, 10_000))


def rec(key: str, **data: Any) -> StoredRecord:
    return StoredRecord("orders", key, data, repr(data).encode(), next(_seq), 0)


def publish(sub: Subscription, old: StoredRecord | None, new: StoredRecord) -> None:
    sub.offer("orders", [Change("orders", new.sow_key, new.bookmark, 0, old, new)])


def delete(sub: Subscription, old: StoredRecord) -> None:
    sub.offer("orders", [Change("orders", old.sow_key, next(_seq), 0, old, None)])


def queued(sub: Subscription) -> list[tuple[str, str, Any]]:
    return [(e.kind, e.record.sow_key, (e.record.data or {}).get("v")) for e in sub.drain()]


def test_one_delivery_per_key_per_interval_with_the_latest_state() -> None:
    sub = Subscription("orders", None, SubscriptionOptions(conflation_s=1.0))
    a1, b1 = rec("a", v=1), rec("b", v=1)
    publish(sub, None, a1)
    publish(sub, None, b1)
    a2 = rec("a", v=2)
    publish(sub, a1, a2)
    publish(sub, a2, rec("a", v=3))
    assert queued(sub) == []  # nothing before the interval ends
    sub.flush()
    assert queued(sub) == [("publish", "a", 3), ("publish", "b", 1)]
    sub.flush()
    assert queued(sub) == []


def test_conflation_key_groups_records() -> None:
    sub = Subscription("orders", None, SubscriptionOptions(conflation_s=1.0, conflation_key=("/sym",)))
    publish(sub, None, rec("1", sym="X", v=1))
    publish(sub, None, rec("2", sym="X", v=2))
    publish(sub, None, rec("3", sym="Y", v=3))
    sub.flush()
    assert queued(sub) == [("publish", "2", 2), ("publish", "3", 3)]


def test_no_oof_for_a_key_never_delivered() -> None:
    flt = compile_filter("/v < 10")
    sub = Subscription("orders", flt, SubscriptionOptions(oof=True, conflation_s=1.0), track=True)
    delivered = rec("q", v=1)
    sub.held = []
    sub.release([delivered])  # the query part counts as delivered
    fresh = rec("n", v=1)
    publish(sub, None, fresh)
    publish(sub, fresh, rec("n", v=50))  # leaves scope before it was ever delivered: nothing
    publish(sub, delivered, rec("q", v=60))  # was delivered: oof
    assert queued(sub) == [("oof", "q", 60)]
    sub.flush()
    assert queued(sub) == []
    again = rec("n", v=2)
    publish(sub, None, again)
    sub.flush()
    assert queued(sub) == [("publish", "n", 2)]
    delete(sub, again)
    assert [e[:2] for e in queued(sub)] == [("oof", "n")]
