"""Restricted copies of the topics derived from a joined view (V-2, A-2;
``state/restricted_joins.py``) on the engine: a copy of a chain holds the copies below it and
lets them go when it is dropped, and a replica refreshes a conflated copy at its primary's
instants, as it does the shared conflated topic (HA-2). Through gRPC, as readers see them:
``tests/security/test_derived_row_filters.py``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sowdb.auth import view_sources
from sowdb.config import RoleConfig, config_from_dict
from sowdb.engine import SubscriptionOptions
from sowdb.engine.access import Access
from sowdb.engine.state import restricted_joins
from sowdb.errors import NotPrimary
from tests.support import ManualClock, S, open_engine, publish

TOPICS: dict[str, Any] = {
    "topic": [{"name": "orders", "key": ["/id"]}, {"name": "customers", "key": ["/id"]}],
    "view": [
        {
            "name": "lines",
            "underlying": "orders",
            "join": ["[orders]./customer = [customers]./id"],
            "grouping": ["[orders]./id"],
            "projection": ["[orders]./id AS /id", "[customers]./region AS /region", "SUM([orders]./qty) AS /qty"],
        },
        {
            "name": "by_region",
            "underlying": "lines",
            "grouping": ["/region"],
            "projection": ["/region", "SUM(/qty) AS /qty"],
        },
    ],
    "conflated_topic": [{"name": "by_region_1s", "underlying": "by_region", "interval": "1s"}],
}


def reader(region: str) -> Access:
    """A reader of every order and of the customers of ``region``."""
    roles = (
        RoleConfig("orders", read=("orders", "lines", "by_region", "by_region_1s")),
        RoleConfig(region, read=("customers",), filter=f"/region = '{region}'"),
    )
    return Access(region, roles, views=view_sources(config_from_dict(TOPICS, source="<tests>")))


def test_a_copy_of_a_chain_holds_the_copies_below_it(tmp_path: Path, monkeypatch: Any) -> None:
    """A conflated copy of a view of the joined view is three copies, each holding the one
    below; when it goes (past the idle few), the ones below it go too, once nothing else holds
    them, and the shared topics are left as they were."""
    monkeypatch.setattr(restricted_joins, "IDLE", 0)
    engine = open_engine(tmp_path, TOPICS)
    joins = engine.placement.joins
    publish(engine, "customers", {"id": 1, "region": "eu"}, {"id": 2, "region": "us"})
    publish(engine, "orders", {"id": 1, "customer": 1, "qty": 5}, {"id": 2, "customer": 2, "qty": 7})
    eu = reader("eu")
    sub = engine.placement.subscribe("by_region_1s", access=eu)
    assert len(joins) == 3
    assert sorted(joins.holders.values()) == [1, 1, 1]  # a subscription, two copies
    copy = engine.topics.derived[sub.topic]
    assert [r.data for r in copy.topic.records.values()] == [{"region": "eu", "qty": 5}]
    view = engine.placement.subscribe("by_region", access=eu)  # the copy of by_region is shared
    assert len(joins) == 3
    assert engine.topics.derived[view.topic] is engine.topics.derived[joins.follows[sub.topic]]
    engine.placement.unsubscribe(sub)
    assert len(joins) == 2  # by_region's copy stays: a subscription holds it
    engine.placement.unsubscribe(view)
    assert len(joins) == 0
    assert not joins.follows
    assert not engine.topics.derived["by_region_1s"].copies  # type: ignore[attr-defined]
    assert sorted(engine.topics.derived) == ["by_region", "by_region_1s", "lines"]
    assert all(not d.copies for d in engine.topics.conflated())
    engine.close()


def test_a_replica_refreshes_a_conflated_copy_at_its_primarys_instants(tmp_path: Path) -> None:
    """A reader under a row filter follows the conflated copy on the primary and on a replica:
    the replica, told of the shared topic's refreshes, refreshes the copy with it, so both
    readers get the same changes with the same bookmarks."""
    clock = ManualClock()
    primary = open_engine(tmp_path / "p", TOPICS, clock=clock)
    replica = open_engine(tmp_path / "r", TOPICS, clock=ManualClock(now=clock.now + 5 * S))

    def refuse() -> None:
        raise NotPrimary("a replica", primary="elsewhere")

    async def never(bookmark: int) -> None:
        raise AssertionError("a replica acknowledges nothing")

    replica.guard_writes(refuse, never)
    refreshes: list[tuple[str, int, int]] = []
    primary.writer.refreshed = lambda *refresh: refreshes.append(refresh)
    options = SubscriptionOptions(oof=True)
    subs = [e.placement.subscribe("by_region_1s", options=options, access=reader("eu")) for e in (primary, replica)]
    steps: list[tuple[float, str, dict[str, Any] | None]] = [
        (0.0, "customers", {"id": 1, "region": "eu"}),
        (0.2, "orders", {"id": 1, "customer": 1, "qty": 5}),
        (0.4, "orders", {"id": 2, "customer": 2, "qty": 7}),  # customer 2 unknown yet
        (1.0, "", None),
        (1.2, "customers", {"id": 2, "region": "eu"}),  # order 2 joins in eu
        (1.5, "customers", {"id": 3, "region": "us"}),  # hidden from eu, seen by the shared topic
        (2.0, "", None),
        (2.5, "customers", {"id": 1, "region": "us"}),  # order 1 leaves eu
        (3.0, "", None),
    ]
    for at, topic, doc in steps:
        clock.at(at)
        if doc is None:
            primary.flush_conflated()
        else:
            publish(primary, topic, doc)
    assert len(refreshes) == 3
    entries = list(primary.store.iter_journal(0))
    applied = 0
    for topic, bookmark, at in refreshes:
        replica.writer.apply_replicated(entries[applied:bookmark])
        applied = bookmark
        replica.flush_conflated()  # nothing of its own
        replica.refresh_conflated(topic, at)
    got = [[(e.kind, e.record.data, e.record.topic, e.record.bookmark) for e in s.drain()] for s in subs]
    assert got[0] == got[1]
    assert [(kind, data) for kind, data, _, _ in got[0]] == [
        ("publish", {"region": "eu", "qty": 5}),
        ("publish", {"region": "eu", "qty": 12}),
        ("publish", {"region": "eu", "qty": 7}),
    ]
    assert {topic for _, _, topic, _ in got[0]} == {"by_region_1s"}  # the shared topic's name, not the copy's
    replica.close()
    primary.close()
