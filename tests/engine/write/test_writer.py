"""The single writer (engine/writer.py) without a server: bookmarks handed out in the order
changes are applied, one RocksDB WriteBatch per request, and a refused request that leaves no
trace (no bookmark, no journal entry, no change)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from sowdb.engine import Engine, InMessage, records
from sowdb.engine.changes import Change
from sowdb.engine.live.options import SubscriptionOptions
from sowdb.engine.write import fanout
from sowdb.errors import PublishError
from sowdb.storage.keys import OP_DELETE, OP_PUBLISH
from tests.support import T0, ManualClock, S, open_engine, publish


def journal(engine: Engine) -> list[tuple[int, int, str, str, int]]:
    """(bookmark, op, topic, SowKey, timestamp) of every journal entry, in journal order."""
    return [(e.seq, e.op, e.topic, e.sow_key, e.timestamp_us) for e in engine.store.iter_journal(0)]


def current(engine: Engine, topic: str) -> dict[str, Any]:
    return {key: rec.data for key, rec in engine.topics.sow[topic].records.items()}


def test_bookmarks_are_consecutive_in_the_order_batches_are_applied(engine: Engine, clock: ManualClock) -> None:
    assert publish(engine, "orders", {"orderId": 1}, {"orderId": 2}, {"orderId": 3}) == (1, 3)
    clock.advance(1)
    assert publish(engine, "markers", {"id": "a"}) == (4, 4)
    clock.advance(1)
    assert engine.sow_delete("orders", sow_keys=["2", "3"]) == (2, 6)
    assert publish(engine, "chat", {"text": "hi"}) == (7, 7)  # a topic without a SOW (K-5): journaled too
    assert engine.last_seq == 7
    assert [e[3] for e in journal(engine)][:6] == ["1", "2", "3", '"a"', "2", "3"]  # a string key is its JSON
    assert [e[:3] for e in journal(engine)] == [
        (1, OP_PUBLISH, "orders"),
        (2, OP_PUBLISH, "orders"),
        (3, OP_PUBLISH, "orders"),
        (4, OP_PUBLISH, "markers"),
        (5, OP_DELETE, "orders"),
        (6, OP_DELETE, "orders"),
        (7, OP_PUBLISH, "chat"),
    ]
    stamps = [e[4] for e in journal(engine)]
    assert stamps == [T0, T0, T0, T0 + S, T0 + 2 * S, T0 + 2 * S, T0 + 2 * S]  # one time per batch


def test_a_clock_that_steps_back_never_makes_journal_time_go_back(engine: Engine, clock: ManualClock) -> None:
    """H-2: a timestamp names one point, so journal timestamps never decrease in bookmark order."""
    publish(engine, "orders", {"orderId": 1})
    clock.advance(-5)  # the system clock was set back
    publish(engine, "orders", {"orderId": 2})
    clock.advance(10)
    publish(engine, "orders", {"orderId": 3})
    assert [e[4] for e in journal(engine)] == [T0, T0, T0 + 5 * S]


def test_a_refused_request_takes_no_bookmark_and_changes_nothing(engine: Engine) -> None:
    publish(engine, "orders", {"orderId": 1, "v": 1})
    with pytest.raises(PublishError):
        engine.publish("orders", [InMessage(orjson.dumps({"orderId": 1, "v": 2})), InMessage(b'{"orderId": ')])
    assert engine.last_seq == 1
    assert current(engine, "orders") == {"1": {"orderId": 1, "v": 1}}  # the good first message is not applied
    assert publish(engine, "orders", {"orderId": 2}) == (2, 2)  # no gap
    assert [e[0] for e in journal(engine)] == [1, 2]


def test_each_request_is_one_write_batch(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    """Atomicity: a request's records, journal entries, history and counts go to RocksDB in one
    WriteBatch, so a crash keeps all of a request or none of it."""
    db = engine.store.db
    writes: list[int] = []
    real_write = db.write

    def counted(wb: Any, *, bulk: bool = False) -> None:
        writes.append(wb.len())
        real_write(wb, bulk=bulk)

    monkeypatch.setattr(db, "write", counted)
    publish(engine, "book", *({"id": i} for i in range(100)))  # history topic: current, history, journal
    assert len(writes) == 1
    assert writes[0] >= 300
    publish(engine, "book", *({"id": i, "v": 2} for i in range(100)))
    engine.sow_delete("book", filter="/id < 50")
    assert len(writes) == 3
    assert engine.last_seq == 250


def test_bookmarks_continue_after_a_restart(tmp_path: Path) -> None:
    first = open_engine(tmp_path)
    publish(first, "orders", {"orderId": 1}, {"orderId": 2})
    publish(first, "quotes", {"symbol": "X", "px": 1})  # transient: journaled, not in current
    first.close()
    again = open_engine(tmp_path)
    try:
        assert again.last_seq == 3
        assert publish(again, "orders", {"orderId": 3}) == (4, 4)
        assert current(again, "orders") == {str(i): {"orderId": i} for i in (1, 2, 3)}
        assert current(again, "quotes") == {'"X"': {"symbol": "X", "px": 1}}  # rebuilt from the journal
    finally:
        again.close()


def test_an_arena_makes_the_versions_a_publish_replaced_only_for_a_follower_that_reads_them(
    engine: Engine, record_store: str
) -> None:
    """Issue 39: in an arena a replaced version is made from its slot (~1.5 µs a message), so
    the writer asks for it only where a follower reads it: a plain subscription takes the new
    versions alone, a delta subscription (D-2) and a view retract or compare the old one. A
    topic of objects gives its records as they are."""
    seen: list[Change] = []
    engine.hub.behind_gate.append(lambda topic, changes: seen.extend(c for c in changes if topic == "orders_noindex"))
    plain = engine.placement.subscribe("orders_noindex")
    publish(engine, "orders_noindex", {"orderId": 1, "qty": 1})
    publish(engine, "orders_noindex", {"orderId": 1, "qty": 2})
    replaced = seen[-1].old
    if record_store == "arena":
        assert replaced is None
    else:
        assert replaced is not None
        assert replaced.data == {"orderId": 1, "qty": 1}
    assert [e.record.data for e in plain.drain()] == [{"orderId": 1, "qty": 1}, {"orderId": 1, "qty": 2}]
    delta = engine.placement.subscribe("orders_noindex", options=SubscriptionOptions(delta=True))
    publish(engine, "orders_noindex", {"orderId": 1, "qty": 3})
    replaced = seen[-1].old
    assert replaced is not None
    assert (replaced.data, replaced.bookmark) == ({"orderId": 1, "qty": 2}, 2)
    assert [e.record.data for e in delta.drain()] == [{"orderId": 1, "qty": 3}]  # not held before: whole
    engine.placement.unsubscribe(delta)
    publish(engine, "orders_noindex", {"orderId": 1, "qty": 4})
    assert (seen[-1].old is None) == (record_store == "arena")
    many = [engine.placement.subscribe("orders_noindex") for _ in range(fanout.SUBS_ASKED)]
    publish(engine, "orders_noindex", {"orderId": 1, "qty": 5})  # too many to ask: made
    replaced = seen[-1].old
    assert replaced is not None
    assert replaced.data == {"orderId": 1, "qty": 4}
    for sub in many:
        engine.placement.unsubscribe(sub)
    # a view follows ``orders``: an update moves an order from one group to another
    publish(engine, "orders", {"orderId": 1, "symbol": "A"}, {"orderId": 2, "symbol": "A"})
    publish(engine, "orders", {"orderId": 1, "symbol": "B"})
    groups = engine.topics.sow["orders_by_symbol"].records
    assert {k: r.data for k, r in groups.items()} == {
        '["A"]': {"symbol": "A", "n": 1},
        '["B"]': {"symbol": "B", "n": 1},
    }


def test_an_arena_makes_no_record_objects_for_a_publish_nobody_follows(engine: Engine, record_store: str) -> None:
    """Issue 39: a topic in an arena keeps a publish's JSON itself; where no subscriber, view,
    history or expiry takes the versions, the writer makes no ``StoredRecord`` for them (a
    record object per message cost the arena ~15 % of its publish rate). What was written
    reads back alike, with the point lookup's and the journal's view of it."""
    ring = records._recent.held  # every version built from a decoded document enters it last
    before = ring[-1] if ring else None
    publish(engine, "pairs", {"region": "eu", "id": 1, "v": 1}, {"region": "us", "id": 2, "v": 2})
    publish(engine, "pairs", {"region": "eu", "id": 1, "v": 3})
    newest = ring[-1] if ring else None
    if record_store == "arena":
        assert newest is before
    else:
        assert newest is not None
        assert (newest.sow_key, newest.bookmark) == ('"eu",1', 3)
    assert current(engine, "pairs") == {
        '"eu",1': {"region": "eu", "id": 1, "v": 3},
        '"us",2': {"region": "us", "id": 2, "v": 2},
    }
    assert engine.topics.sow["pairs"].head('"eu",1').bookmark == 3  # type: ignore[union-attr]
    assert [e[0] for e in journal(engine)] == [1, 2, 3]
