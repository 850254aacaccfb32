"""One live subscription (engine/subscription.py) fed by the real writer, without a server:
its filter, oof (O-1) on an update, a delete and an expiration, delta (D-2), conflation (C-1)
and its bounded queue (SL-1: a slow subscriber is cut off, the publisher never waits)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from sowdb.engine import Engine, InMessage, SubscriptionOptions
from sowdb.engine.live.subscription import SlowConsumer, Subscription
from tests.support import ManualClock, open_engine, publish


def sub(engine: Engine, topic: str, filter: str = "", **options: Any) -> Subscription:
    return engine.placement.subscribe(topic, filter=filter, options=SubscriptionOptions(**options))


def events(s: Subscription) -> list[tuple[str, Any, str]]:
    """(kind, document, reason) of what ``s`` has queued."""
    return [(e.kind, e.record.data, e.reason) for e in s.drain()]


def test_oof_when_an_update_moves_a_record_out_and_when_it_is_deleted(engine: Engine) -> None:
    s = sub(engine, "orders", "/qty > 10", oof=True)
    publish(engine, "orders", {"orderId": 1, "qty": 20}, {"orderId": 2, "qty": 5}, {"orderId": 3, "qty": 30})
    assert events(s) == [("publish", {"orderId": 1, "qty": 20}, ""), ("publish", {"orderId": 3, "qty": 30}, "")]
    publish(engine, "orders", {"orderId": 1, "qty": 7})  # out of the filter: the update itself as the oof
    publish(engine, "orders", {"orderId": 2, "qty": 6})  # never held by the subscriber: nothing
    engine.sow_delete("orders", sow_keys=["3"])
    assert events(s) == [("oof", {"orderId": 1, "qty": 7}, "match"), ("oof", {"orderId": 3, "qty": 30}, "deleted")]
    publish(engine, "orders", {"orderId": 1, "qty": 11})  # back in: whole again
    assert events(s) == [("publish", {"orderId": 1, "qty": 11}, "")]


def test_an_expiration_is_an_oof_with_its_reason(engine: Engine, clock: ManualClock) -> None:
    s = sub(engine, "orders", oof=True)
    engine.publish("orders", [InMessage(orjson.dumps({"orderId": 1}))], ttls=[5.0])
    publish(engine, "orders", {"orderId": 2})
    events(s)
    clock.advance(4)
    assert engine.writer.expire_due() == 0
    clock.advance(2)
    assert engine.writer.expire_due() == 1
    assert events(s) == [("oof", {"orderId": 1}, "expired")]
    assert set(engine.topics.sow["orders"].records) == {"2"}


def test_without_oof_a_plain_subscriber_hears_nothing_of_records_leaving(engine: Engine) -> None:
    s = sub(engine, "orders", "/qty > 10")
    publish(engine, "orders", {"orderId": 1, "qty": 20})
    publish(engine, "orders", {"orderId": 1, "qty": 1})
    engine.sow_delete("orders", sow_keys=["1"])
    assert events(s) == [("publish", {"orderId": 1, "qty": 20}, "")]


def test_delta_sends_the_key_and_the_changed_fields_of_records_it_holds(engine: Engine) -> None:
    s = sub(engine, "orders", delta=True, no_empties=True)
    publish(engine, "orders", {"orderId": 1, "symbol": "A", "qty": 1, "px": 9})
    publish(engine, "orders", {"orderId": 1, "symbol": "A", "qty": 2, "px": 9})
    publish(engine, "orders", {"orderId": 1, "symbol": "A", "qty": 2, "px": 9})  # no change: no empty delta
    assert events(s) == [
        ("publish", {"orderId": 1, "symbol": "A", "qty": 1, "px": 9}, ""),  # not held yet: whole
        ("publish", {"orderId": 1, "qty": 2}, ""),
    ]


def test_conflation_keeps_the_latest_version_per_key_until_the_flush(engine: Engine) -> None:
    s = sub(engine, "orders", conflation_s=1.0)
    for v in range(3):
        publish(engine, "orders", {"orderId": 1, "v": v}, {"orderId": 2, "v": v})
    assert events(s) == []
    s.flush()
    assert events(s) == [("publish", {"orderId": 1, "v": 2}, ""), ("publish", {"orderId": 2, "v": 2}, "")]


def test_a_subscriber_past_its_queue_limit_is_cut_off_and_the_publisher_goes_on(tmp_path: Path) -> None:
    engine = open_engine(tmp_path, subscriber_queue_records=5)
    try:
        slow, quick = sub(engine, "orders"), sub(engine, "orders")
        publish(engine, "orders", *({"orderId": i} for i in range(4)))
        assert len(events(quick)) == 4
        publish(engine, "orders", *({"orderId": i} for i in range(4, 6)))  # slow now holds 6 > 5
        assert isinstance(slow.failure, SlowConsumer)
        assert not slow.queue  # what it held is let go
        with pytest.raises(SlowConsumer, match="subscriber too slow: 6 events"):
            slow.drain()
        assert publish(engine, "orders", {"orderId": 6}) == (7, 7)  # the publisher never waits
        assert [d["orderId"] for _, d, _ in events(quick)] == [4, 5, 6]
    finally:
        engine.close()


def test_the_byte_limit_counts_the_records_queued(tmp_path: Path) -> None:
    engine = open_engine(tmp_path, subscriber_queue_bytes=1024)
    try:
        s = sub(engine, "notes")  # no key: each message a new record
        engine.publish("notes", [InMessage(b'{"pad": "' + b"x" * 500 + b'"}', sow_key=str(i)) for i in range(2)])
        assert s.failure is None
        engine.publish("notes", [InMessage(b'{"pad": "' + b"x" * 500 + b'"}', sow_key="3")])
        assert isinstance(s.failure, SlowConsumer)
    finally:
        engine.close()
