"""The delivery gate of a ``sync`` primary (:mod:`sowdb.engine.live.gate`): subscribers are shown
only what the replicas hold, every kind of subscription placed while changes are held gets each
change once, and an open gate is the lone server's behaviour. Through a real cluster:
``tests/cluster/test_clients.py`` (a subscriber across a kill -9 of the primary)."""

from __future__ import annotations

from pathlib import Path

import orjson

from sowdb.config import config_from_dict
from sowdb.engine import Engine, InMessage, QueryOptions
from sowdb.engine.events import Subscribed
from sowdb.engine.live.subscription import Subscription
from sowdb.storage import Store


def _engine(tmp_path: Path) -> Engine:
    topics = {"topic": [{"name": "orders", "key": ["/id"], "history": {"window": "1d"}}]}
    cfg = config_from_dict({**topics, "server": {"data_dir": str(tmp_path)}}, source="<tests>")
    return Engine.open(cfg, Store(tmp_path))


def _publish(engine: Engine, *ids: int) -> None:
    engine.publish("orders", [InMessage(orjson.dumps({"id": i})) for i in ids])


def _shown(sub: Subscription) -> list[int]:
    return [e.record.bookmark for e in sub.drain()]


async def test_a_shut_gate_shows_subscribers_only_what_the_replicas_hold(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    _publish(engine, 1, 2)  # bookmarks 1 and 2
    engine.deliver_upto(2)  # a sync primary whose replicas hold bookmark 2
    before = engine.placement.subscribe("orders")
    _publish(engine, 3)  # bookmark 3: written here, not yet on a replica
    assert _shown(before) == []

    plain = engine.subscribe("orders")  # placed at what may be shown, so a resume misses nothing
    first = await anext(plain.events())
    assert isinstance(first, Subscribed)
    assert first.bookmark == 2
    replay = engine.placement.subscribe("orders", bookmark="0")
    assert replay.replay_from is not None
    assert replay.replay_from[1] == 2  # the journal up to the committed point only
    query, _ = engine.placement.sow_and_subscribe(QueryOptions(topic="orders"))  # its query reads bookmark 3

    engine.deliver_upto(3)  # the replicas report holding bookmark 3
    replay.release()
    query.release()
    assert _shown(before) == [3]
    assert _shown(plain.sub) == [3]
    assert _shown(replay) == [3]
    assert _shown(query) == []  # not twice: the query had it

    _publish(engine, 4)
    assert _shown(before) == []
    engine.deliver_upto(None)  # acknowledging alone (or a replica): everything is shown
    assert _shown(before) == [4]
    _publish(engine, 5)
    assert _shown(before) == [5]
    assert _shown(plain.sub) == [4, 5]
    plain.close()
    engine.close()


def test_an_open_gate_holds_nothing(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    sub = engine.placement.subscribe("orders")
    _publish(engine, 1)
    assert _shown(sub) == [1]
    assert not engine.hub.gate.held
    engine.close()
