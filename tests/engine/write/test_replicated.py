"""A replica's apply (SPEC §13, HA-2; ``Writer.apply_replicated``): the primary's journal
entries written with the primary's bookmarks and timestamps, never the replica's own clock, so
that the replica's journal and state are the primary's, its views recomputed from the changes,
and an entry that does not continue its journal refused with nothing applied."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from sowdb.engine import Engine, InMessage, SubscriptionOptions
from sowdb.errors import FailedPrecondition, NotPrimary
from sowdb.storage.keys import JournalEntry
from tests.support import ManualClock, S, open_engine, publish


def journal(engine: Engine) -> list[JournalEntry]:
    return list(engine.store.iter_journal(0))


def state(engine: Engine, topic: str) -> list[tuple[Any, ...]]:
    found = engine.topics.get(topic)
    assert found is not None
    return sorted((r.sow_key, r.bookmark, r.timestamp_us, r.expiry_us, r.raw) for r in found.records.values())


def view_changes(engine: Engine, subscription: Any) -> list[tuple[str, Any, int]]:
    return [(e.kind, e.record.data, e.record.bookmark) for e in subscription.drain()]


def test_a_replica_writes_the_primarys_entries_and_recomputes_its_views(tmp_path: Path) -> None:
    primary = open_engine(tmp_path / "p", clock=ManualClock())
    replica_clock = ManualClock(now=5 * S)  # far behind: the replica must never use it
    replica = open_engine(tmp_path / "r", clock=replica_clock)
    options = SubscriptionOptions()
    views = [e.placement.subscribe("orders_by_symbol", filter="", options=options) for e in (primary, replica)]
    publish(primary, "orders", {"orderId": 1, "symbol": "A"}, {"orderId": 2, "symbol": "A"})
    primary.clock.advance(1)  # type: ignore[attr-defined]
    publish(primary, "orders", {"orderId": 3, "symbol": "B"})
    primary.sow_delete("orders", sow_keys=[k for k in primary.topics.sow["orders"].records][:1])
    publish(primary, "book", {"id": 1, "v": 1})
    publish(primary, "book", {"id": 1, "v": 2})
    publish(primary, "loose", {"text": "an unconfigured topic: journaled, not stored"})
    primary.publish("markers", [InMessage(b'{"id": 9}')], ttls=[1.0])
    primary.clock.advance(2)  # type: ignore[attr-defined]
    assert primary.expire_due() == 1  # the expiration is journaled, and shipped like any entry

    entries = journal(primary)
    replica.writer.apply_replicated(entries[:3])  # frames need not follow the primary's batches
    replica.writer.apply_replicated(entries[3:])

    assert journal(replica) == entries
    assert replica.last_seq == primary.last_seq
    assert replica.store.record_counts() == primary.store.record_counts()  # counted from each run's keys
    for topic in ("orders", "book", "markers"):
        assert state(replica, topic) == state(primary, topic)
    assert view_changes(replica, views[1]) == view_changes(primary, views[0])
    assert replica.topics.sow["book"].head("1") is not None

    with pytest.raises(FailedPrecondition, match="does not continue"):
        replica.writer.apply_replicated(entries[-1:])  # an entry it holds already: nothing applied
    assert journal(replica) == entries
    replica.close()
    reopened = open_engine(tmp_path / "r", clock=replica_clock)  # the store is whole on its own
    assert state(reopened, "orders") == state(primary, "orders")
    reopened.close()
    primary.close()


def test_a_replica_holds_the_primarys_producer_state_after_each_frame(tmp_path: Path) -> None:
    """J-4 across a failover: the producer state a batch wrote comes with its entries, so a
    promoted replica refuses a producer's retry as the primary would have, after a restart too;
    a frame that splits a batch carries it with the batch's last entry."""
    primary = open_engine(tmp_path / "p", clock=ManualClock())
    replica = open_engine(tmp_path / "r", clock=ManualClock())
    a, b = [InMessage(orjson.dumps({"orderId": i, "symbol": "A"})) for i in (1, 2)]
    assert primary.publish("orders", [a, b], producer=("feed", 7)) == (1, 2)
    publish(primary, "book", {"id": 1, "v": 1})
    primary.publish("loose", [InMessage(b'{"n": 1}')], producer=("feed", 3))  # another topic, another scope
    last = primary.last_seq
    entries = journal(primary)
    shipped = primary.store.producer_log(0, last)
    assert [(bookmark, seq) for bookmark, _, seq in shipped] == [(2, 7), (4, 3)]

    replica.writer.apply_replicated(entries[:1], primary.store.producer_log(0, 1))  # half of a batch
    assert replica.writer.producers.last == {}  # its state comes with the batch's last entry
    replica.writer.apply_replicated(entries[1:], primary.store.producer_log(1, last))
    assert replica.writer.producers.last == primary.writer.producers.last
    assert replica.store.producer_seqs() == primary.store.producer_seqs()
    assert replica.store.producer_log(0, last) == shipped  # it ships them on in turn when promoted
    replica.close()

    promoted = open_engine(tmp_path / "r", clock=ManualClock())
    assert promoted.publish("orders", [a, b], producer=("feed", 7)) == (0, 0)  # the retry: a duplicate
    assert promoted.publish("orders", [a], producer=("feed", 8)) == (last + 1, last + 1)
    promoted.close()
    primary.close()


def test_journal_retention_and_a_roll_back_cut_the_producer_log(tmp_path: Path) -> None:
    """The producer log lives as long as the entries it goes with: retention trims it, and a
    journal cut back (a fork, a failed write) gives each producer its sequence as of the cut."""
    engine = open_engine(tmp_path / "e", clock=ManualClock())
    for seq in (1, 2, 3):
        engine.publish("orders", [InMessage(orjson.dumps({"orderId": seq, "symbol": "A"}))], producer=("feed", seq))
    engine.publish("book", [InMessage(b'{"id": 1}')], producer=("other", 1))
    engine.store.trim_journal(1)
    assert [b for b, _, _ in engine.store.producer_log(0, 10)] == [2, 3, 4]
    engine.store.roll_back(2, {}, set())
    assert [b for b, _, _ in engine.store.producer_log(0, 10)] == [2]
    assert {k.rsplit("\x00", 1)[1]: v for k, v in engine.store.producer_seqs().items()} == {"feed": 2}
    engine.close()


def versions(engine: Engine, topic: str) -> list[tuple[str, int, int, int]]:
    """The history a topic keeps (H-1): in ``history`` (SowKey, bookmark, operation, timestamp),
    and as the version chains of memory, walked from each head."""
    held = [(e.sow_key, e.seq, e.op, e.timestamp_us) for e in engine.store.iter_history() if e.topic == topic]
    found = engine.topics.sow[topic]
    hist = found.history
    assert hist is not None
    chains = []
    for key in sorted({*found.records, *hist.tombstones}):
        r = found.head(key)
        while r is not None:
            chains.append((key, r.bookmark, r.timestamp_us))
            r = r.prev
    return [*held, *[(k, b, -1, t) for k, b, t in sorted(chains)]]


def test_a_replica_thins_history_by_granularity_as_the_primary_did(tmp_path: Path) -> None:
    """H-1 granularity on a replica: a version that replaced the previous one of its interval on
    the primary replaces it on the replica too (the primary's timestamps decide), in the store
    as in memory, publishes and removals alike, and after a restart."""
    topics = {"topic": [{"name": "coarse", "key": ["/id"], "history": {"window": "1h", "granularity": "10s"}}]}
    clock = ManualClock()
    primary = open_engine(tmp_path / "p", topics, clock=clock)
    replica = open_engine(tmp_path / "r", topics, clock=ManualClock(now=5 * S))
    for t, v in [(0, 0), (3, 3), (9, 9), (12, 12), (13, 13), (20, 20), (32, 32)]:
        clock.at(t)
        publish(primary, "coarse", {"id": 1, "v": v}, {"id": 2, "v": v})
    clock.at(34)
    primary.sow_delete("coarse", sow_keys=["2"])  # replaces v 32 of key 2: the same interval
    clock.at(45)
    publish(primary, "coarse", {"id": 2, "v": 45})
    entries = journal(primary)
    for at in range(0, len(entries), 3):  # frames that split the primary's batches
        replica.writer.apply_replicated(entries[at : at + 3])
    expected = versions(primary, "coarse")
    assert [v for _, _, op, _ in expected if op >= 0] != []
    assert versions(replica, "coarse") == expected
    replica.close()
    reopened = open_engine(tmp_path / "r", topics, clock=ManualClock(now=5 * S))
    assert versions(reopened, "coarse") == expected
    reopened.close()
    primary.close()


def test_a_replica_refreshes_conflated_topics_at_its_primarys_instants(tmp_path: Path) -> None:
    """C-2 on a replica (HA-2): it never refreshes by a clock of its own; told of each of the
    primary's refreshes (topic, bookmark, instant), it refreshes right after that bookmark, so
    each refresh publishes what the primary's did, even when a frame straddles the instant."""
    topics = {
        "topic": [{"name": "orders", "key": ["/id"]}],
        "conflated_topic": [{"name": "orders_1s", "underlying": "orders", "interval": "1s"}],
    }
    clock = ManualClock()
    primary = open_engine(tmp_path / "p", topics, clock=clock)
    replica = open_engine(tmp_path / "r", topics, clock=ManualClock(now=clock.now + 5 * S))  # its own: ahead

    def refuse() -> None:
        raise NotPrimary("a replica", primary="elsewhere")

    async def never(bookmark: int) -> None:
        raise AssertionError("a replica acknowledges nothing")

    replica.guard_writes(refuse, never)  # a cluster's replica: it writes nothing of its own
    refreshes: list[tuple[str, int, int]] = []
    primary.writer.refreshed = lambda *refresh: refreshes.append(refresh)
    options = SubscriptionOptions(oof=True)
    subs = [e.placement.subscribe("orders_1s", filter="", options=options) for e in (primary, replica)]
    for step, v in [(0.0, 1), (0.5, 2), (1.0, None), (1.0, 3), (1.2, 4), (2.0, None), (2.0, 5), (2.5, 6)]:
        clock.at(step)
        if v is None:
            primary.flush_conflated()
        else:
            publish(primary, "orders", {"id": v % 2, "v": v})
    clock.at(3.0)
    primary.sow_delete("orders", sow_keys=["1"])
    primary.flush_conflated()
    assert [(b, t - clock.now) for _, b, t in refreshes] == [(2, -2 * S), (4, -S), (7, 0)]

    entries = journal(primary)
    applied = 0
    for topic, bookmark, at in refreshes:  # a frame up to each refresh, then the refresh
        replica.writer.apply_replicated(entries[applied:bookmark])
        applied = bookmark
        replica.flush_conflated()  # its own clock is past every interval: it refreshes nothing
        assert replica.refresh_conflated(topic, at) > 0
    assert [(e.kind, e.record.data, e.record.bookmark, e.reason) for e in subs[1].drain()] == [
        (e.kind, e.record.data, e.record.bookmark, e.reason) for e in subs[0].drain()
    ]
    replica.close()
    primary.close()
