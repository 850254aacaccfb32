"""A replica's time is the journal's (SPEC §13, HA-2): its history trims (H-1) and journal
retention run by the timestamps it applied and the primary's clock as shipped in its frames,
never by the replica's own clock.

Two nodes run in this process over a real etcd, so the test holds the primary's clock: it is a
:class:`ManualClock` set years behind the replica's own (the system clock), which therefore
would trim every entry at once. Each trim is run by the test on both nodes once the replica has
the primary's time; the two stores then hold the same journal and the same history at every
step. Without the journal's time the replica trims everything at the first step. A conflated
topic refreshes on the replica at the primary's instants, after the same bookmarks.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from sowdb.cluster.node import Node
from sowdb.config import Config, config_from_dict
from sowdb.engine import Engine, InMessage, SubscriptionOptions
from sowdb.server import SowServer
from tests.cluster.conftest import EtcdServer
from tests.cluster.support import TTL
from tests.support import ManualClock, serving


def node_config(tmp_path: Path, etcd: EtcdServer, node: str) -> Config:
    return config_from_dict(
        {
            "topic": [{"name": "book", "key": ["/id"], "history": {"window": "100s"}}],
            "conflated_topic": [{"name": "book_1s", "underlying": "book", "interval": "1s"}],
            "server": {"data_dir": str(tmp_path / node), "listen": "127.0.0.1:0", "journal_max_age": "60s"},
            "cluster": {
                "name": "t",
                "node": node,
                "advertise": "127.0.0.1:0",
                **etcd.table(),
                "ack": "async",
                "lease_ttl": f"{TTL}s",
            },
        },
        source="<tests>",
    )


async def until(condition: Callable[[], object], within: float = 20.0) -> None:
    give_up = time.monotonic() + within
    while not condition():
        assert time.monotonic() < give_up, f"not reached within {within}s"
        await asyncio.sleep(0.05)


def stored(engine: Engine) -> tuple[int, list[Any], list[Any]]:
    """What trims change: the last trimmed bookmark, the journal and the history kept."""
    store = engine.store
    return store.journal_trimmed(), list(store.iter_journal(0)), list(store.iter_history())


def parts(server: SowServer) -> tuple[Node, Engine]:
    """A started server's node and engine."""
    assert server.node is not None, "not a started node"
    assert server.engine is not None
    return server.node, server.engine


async def test_a_replica_trims_history_and_journal_by_the_primarys_time(tmp_path: Path, etcd: EtcdServer) -> None:
    clock = ManualClock()  # 2023: years behind the replica's own clock
    async with serving(node_config(tmp_path, etcd, "n1"), clock=clock) as primary:
        first, written = parts(primary)
        await until(first.election.may_acknowledge)
        async with serving(node_config(tmp_path, etcd, "n2")) as replica:  # stops before the primary
            follower, applied = parts(replica)
            subs = [
                e.placement.subscribe("book_1s", filter="", options=SubscriptionOptions()) for e in (written, applied)
            ]
            for done, t in enumerate((0, 10, 20)):
                clock.at(t)  # the conflated topic refreshes (after the publish before, if any)
                await until(lambda: first.refreshed == done)  # noqa: B023 (called within the iteration)
                written.publish("book", [InMessage(orjson.dumps({"id": 1, "v": t}))])

            async def trimmed_alike(at: float) -> tuple[int, list[Any], list[Any]]:
                """Set the primary's clock to ``at``, wait until the replica has its time (a tick
                brings it), trim both, and return what both then hold alike."""
                clock.at(at)
                await until(lambda: applied.clock() == clock.now)
                assert applied.last_seq == 3
                for engine in (written, applied):
                    engine.trim()
                held = stored(written)
                assert stored(applied) == held
                return held

            trimmed, entries, history = await trimmed_alike(20)
            assert (trimmed, len(entries), len(history)) == (0, 3, 3)  # the replica's own clock: all gone
            trimmed, entries, history = await trimmed_alike(75)  # entries before 15 s leave the journal
            assert (trimmed, [e.seq for e in entries], len(history)) == (2, [3], 3)
            trimmed, entries, history = await trimmed_alike(130)  # versions before 30 s leave history
            assert (trimmed, entries, [h.seq for h in history]) == (3, [], [3])
            assert (first.clock.following, follower.clock.following) == (False, True)
            # the conflated topic refreshed on the replica where it did on the primary (not by its
            # own clock, which is past every interval): once after each publish
            refreshed = [[(c.record.bookmark, orjson.loads(c.record.raw)["v"]) for c in sub.drain()] for sub in subs]
            assert refreshed[0] == [(1, 0), (2, 10), (3, 20)]
            assert refreshed[1] == refreshed[0]
