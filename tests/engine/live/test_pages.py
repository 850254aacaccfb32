"""Paginated subscriptions (P-1) on the engine: a random property test (the page held by the
subscriber always equals a fresh sorted query's window), shared result sets. Through the real
server: ``tests/api/test_pages.py``."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import orjson
import pytest

from sowdb.config import config_from_dict
from sowdb.engine import Engine, InMessage, QueryOptions, RecordBatch
from sowdb.engine.live.options import SubscriptionOptions
from sowdb.errors import InvalidArgument
from sowdb.storage import Store


def open_engine(tmp_path: Path) -> Engine:
    cfg = config_from_dict(
        {"topic": [{"name": "t", "key": ["/id"]}], "server": {"data_dir": str(tmp_path)}}, source="<tests>"
    )
    return Engine.open(cfg, Store(tmp_path))


async def window(engine: Engine, **kw: Any) -> dict[str, Any]:
    """The page a fresh query gives (with no order_by: SowKey order, which a query leaves open)."""
    if not kw["order_by"]:
        everything = await window(engine, filter=kw["filter"], order_by="/id")
        keys = sorted(everything)[kw["skip_n"] : kw["skip_n"] + kw["top_n"]]
        return {k: everything[k] for k in keys}
    out = {}
    async for event in engine.sow(QueryOptions(topic="t", batch_size=1000, **kw)):
        if isinstance(event, RecordBatch):
            out.update({r.sow_key: orjson.loads(r.raw) for r in event.records})
    return out


async def test_pages_stay_equal_to_the_window_of_a_fresh_query(tmp_path: Path) -> None:
    engine = open_engine(tmp_path)
    rnd = random.Random(11)
    pages: list[dict[str, Any]] = [
        {"filter": "", "order_by": "/price DESC, /id", "top_n": 5, "skip_n": 0},
        {"filter": "/side = 'B'", "order_by": "/price, /id DESC", "top_n": 4, "skip_n": 3},
        {"filter": "", "order_by": "", "top_n": 3, "skip_n": 2},  # SowKey order
        {"filter": "", "order_by": "/price DESC, /id", "top_n": 5, "skip_n": 0},  # shares the first set
    ]
    subs = []
    for p in pages:
        sub, events = engine.placement.sow_and_subscribe(
            QueryOptions(topic="t", **p), options=SubscriptionOptions(oof=True)
        )
        held: dict[str, Any] = {}
        async for event in events:
            if isinstance(event, RecordBatch):
                held.update({r.sow_key: orjson.loads(r.raw) for r in event.records})
        sub.release()
        subs.append((sub, held, p))
    assert len(engine.pages.result_sets) == 3
    # in the live registry (added, removed, reauthorized, counted) but never dispatched to: a
    # page's changes come through its result set
    assert len(engine.hub.subs) == 4
    assert engine.hub.stats().placement == {"indexed": 0, "scanned": 0}
    for _ in range(300):
        roll = rnd.random()
        if roll < 0.2:
            engine.sow_delete("t", filter=f"/id % 13 = {rnd.randrange(13)}")
        else:
            docs = [
                {"id": rnd.randrange(40), "price": rnd.randrange(50), "side": rnd.choice("BS")}
                for _ in range(rnd.randint(1, 4))
            ]
            engine.publish("t", [InMessage(orjson.dumps(d)) for d in docs])
        for sub, held, p in subs:
            for e in sub.drain():
                if e.kind == "publish":
                    held[e.record.sow_key] = orjson.loads(e.record.raw)
                else:
                    assert e.record.sow_key in held, "an oof for a record the subscriber does not hold"
                    del held[e.record.sow_key]
            assert held == await window(engine, **p), p
    for sub, _, _ in subs:
        engine.placement.unsubscribe(sub)
    assert engine.pages.result_sets == {}
    assert not engine.hub.subs
    assert not engine.pages.by_topic
    with pytest.raises(InvalidArgument):
        engine.placement.sow_and_subscribe(
            QueryOptions(topic="t", top_n=1, skip_n=0, grouping=["/a"], projection=["/a"])
        )
    engine.close()


def test_a_refused_page_leaves_no_result_set_behind(tmp_path: Path) -> None:
    engine = open_engine(tmp_path)
    engine.placement.sow_and_subscribe(QueryOptions(topic="t", top_n=2, skip_n=0), sub_id="mine")
    with pytest.raises(InvalidArgument, match="already in use"):
        engine.placement.sow_and_subscribe(QueryOptions(topic="t", filter="/a = 1", top_n=2, skip_n=0), sub_id="mine")
    assert list(engine.pages.result_sets) == [("t", "", "", ())]
    engine.close()
