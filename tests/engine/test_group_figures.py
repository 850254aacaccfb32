"""A reader's figures in its writer's (issue 41, ``sowd --workers``): a real engine's feed and a
:class:`ReaderLive` attached to it, the reader's report carried as the bytes it sends.

The writer's Stats counts the readers' subscriptions as its own (each topic's, the listed ones
with the caller's rights, the server's totals), and forgets a reader's subscriptions when it
detaches, but not what it counted.
"""

from __future__ import annotations

from sowdb.config import RoleConfig
from sowdb.engine import Engine, Feed, ReaderLive
from sowdb.engine.access import Access
from sowdb.engine.feed import FeedQueue
from sowdb.engine.live import Replacement
from tests.support import publish

ALICE = Access("alice", (RoleConfig("trader", read=("orders", "prices")),))
BOB = Access("bob", (RoleConfig("viewer", read=("orders",)),))
NAMES = ["orders", "prices", "notes"]


def _reader(engine: Engine) -> tuple[Feed, FeedQueue, ReaderLive]:
    """The writer's feed, a reader's queue in it, and the reader's registry, fed its first entry."""
    feed = engine.feed()
    queue = feed.attach()
    live = ReaderLive(engine.config.server, engine.config.topics, lambda: None)
    live.apply(queue.entries[0])  # where the feed starts, and the reader's number
    return feed, queue, live


def test_the_writers_stats_count_a_readers_subscriptions(engine: Engine) -> None:
    feed, _, live = _reader(engine)
    live.subscribe("orders", sub_id="a1", access=ALICE, owner="ipv4:127.0.0.1:4001")
    live.subscribe("^(orders|prices|notes)$", sub_id="a2", access=ALICE)  # alice may read two of them
    live.subscribe("orders", sub_id="b1", filter="/qty > 5", access=BOB)
    engine.subscribe("prices", sub_id="w1", access=ALICE)  # one of the writer's
    live.counters.rpc("SowService/Subscribe").calls += 3  # as the protocol layer's error boundary counts
    engine.counters.rpc("SowService/Subscribe").calls += 1
    feed.report(live.report(NAMES))

    snap = engine.stats()
    assert snap.server is not None
    assert snap.server.subscriptions == 4
    assert {t.name: t.subscriptions for t in snap.topics if t.subscriptions} == {"orders": 3, "prices": 2}
    listed = {s.sub_id: s for s in snap.subscriptions}
    assert set(listed) == {"a1", "a2", "b1", "w1"}
    assert (listed["b1"].user, listed["b1"].filter, listed["a1"].peer) == ("bob", "/qty > 5", "ipv4:127.0.0.1:4001")
    assert 0 <= listed["a1"].age_s < 60
    by_process = [(p.name, p.subscriptions) for p in snap.server.processes]
    assert by_process == [("writer", 1), ("reader-1", 3)]  # the reader's number when it has no name
    calls = {r.rpc: r.calls for r in snap.server.rpcs}
    assert calls["SowService/Subscribe"] == 4  # the writer's and the reader's, summed

    assert {s.sub_id for s in engine.stats("prices").subscriptions} == {"a2", "w1"}  # those that follow it
    own = engine.stats(topics_only=True, access=BOB)  # a user without an admin role: its own only
    assert [s.sub_id for s in own.subscriptions] == ["b1"]


def test_a_reader_that_goes_takes_its_subscriptions_out_of_the_figures_but_not_its_counts(engine: Engine) -> None:
    feed, queue, live = _reader(engine)
    live.subscribe("orders", sub_id="a1", access=ALICE)
    live.counters.rpc("SowService/Subscribe").calls += 1
    live.hub.dropped_slow = 2
    report = live.report(NAMES)
    feed.report(report)
    assert engine.stats().server.subscriptions == 1  # type: ignore[union-attr]
    feed.detach(queue)
    snap = engine.stats()
    assert snap.server is not None
    assert (snap.server.subscriptions, len(snap.subscriptions)) == (0, 0)
    assert sum(t.subscriptions for t in snap.topics) == 0
    assert snap.server.slow_consumer_cutoffs == 2
    assert [(p.name, p.subscriptions) for p in snap.server.processes] == [("writer", 0)]
    assert {r.rpc: r.calls for r in snap.server.rpcs}["SowService/Subscribe"] == 1
    feed.report(report)  # a report that comes after its reader went is not kept, nor counted again
    late = engine.stats().server
    assert late is not None
    assert (late.subscriptions, late.slow_consumer_cutoffs) == (0, 2)
    assert {r.rpc: r.calls for r in late.rpcs}["SowService/Subscribe"] == 1


def test_a_report_tells_a_filter_replaced_and_the_queue_as_it_is_now(engine: Engine) -> None:
    """The parts of a subscription's figures a reader takes once (its filter, its topics) are
    taken again when its filter is replaced (R-1); its queue is read at each report."""
    feed, queue, live = _reader(engine)
    live.subscribe("orders", sub_id="b1", filter="/qty > 5", access=BOB, owner="ipv4:127.0.0.1:4002")
    feed.report(live.report(NAMES))
    assert [(s.filter, s.queued_events) for s in engine.stats().subscriptions] == [("/qty > 5", 0)]
    live.replace_subscription("b1", Replacement(filter="/qty > 9"), owner="ipv4:127.0.0.1:4002", user="bob")
    publish(engine, "orders", *({"orderId": i, "qty": 10} for i in range(3)))
    for entry in list(queue.entries)[1:]:  # the feed's entries since its position: three changes to deliver
        live.apply(entry)
    feed.report(live.report(NAMES))
    assert [(s.filter, s.queued_events) for s in engine.stats().subscriptions] == [("/qty > 9", 3)]
