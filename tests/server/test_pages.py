"""Paginated subscriptions (P-1): the seed's example through the real server, a random
property test on the engine (the page held by the subscriber always equals a fresh sorted
query's window), shared result sets and replacement (R-1)."""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path
from typing import Any

import orjson
import pytest

from sowdb.config import config_from_dict
from sowdb.engine import Engine, InMessage, QueryOptions, RecordBatch
from sowdb.engine.subscription import SubscriptionOptions
from sowdb.errors import InvalidArgument
from sowdb.storage import Store
from sowdb_client import InvalidArgumentError
from tests.support import Running, take
from tests.support import sow as run_cli


async def test_seed_example_entering_record_pushes_the_last_one_out(sowd: Running) -> None:
    c = sowd.client
    await c.publish("markers", [{"id": i} for i in (1, 2, 5, 7, 8, 9)])
    stream = c.sow_and_subscribe("markers", top_n=2, skip_n=1, order_by="/id", oof=True)
    first = await take(stream, 4)
    assert [r.json()["id"] for r in first[2].records] == [2, 5]
    assert first[3].group_end is not None and first[3].group_end.records_matched == 6

    await c.publish("markers", [{"id": 4}])
    got = []
    while len(got) < 2:
        got += [(e.kind, e.reason, r.json()["id"]) for e in await take(stream, 1) for r in e.records]
    assert sorted(got) == [("oof", "match", 5), ("publish", "", 4)]

    await c.sow_delete("markers", sow_keys=["2"])  # 4 moves up, 5 comes back
    got = []
    while len(got) < 2:
        got += [(e.kind, e.reason, r.json()["id"]) for e in await take(stream, 1) for r in e.records]
    assert sorted(got) == [("oof", "deleted", 2), ("publish", "", 5)]
    await c.publish("markers", [{"id": 20}])  # beyond the window: nothing
    await c.publish("markers", [{"id": 5, "note": "changed"}])  # a change inside it: delivered
    (e,) = await take(stream, 1)
    assert (e.kind, e.records[0].json()) == ("publish", {"id": 5, "note": "changed"})
    stream.cancel()


async def test_page_replacement_needs_the_page_again(sowd: Running) -> None:
    c = sowd.client
    await c.publish("markers", [{"id": i} for i in range(10)])
    stream = c.sow_and_subscribe("markers", top_n=3, skip_n=0, order_by="/id", oof=True)
    events = await take(stream, 4)
    sub_id = events[0].sub_id
    with pytest.raises(InvalidArgumentError) as err:
        await c.replace_subscription(sub_id, filter="/id > 4", oof=True)
    assert err.value.field == "top_n"
    await c.replace_subscription(sub_id, filter="/id > 4", oof=True, top_n=3, skip_n=0, order_by="/id DESC")
    got = []
    while len(got) < 6:
        got += [(e.kind, r.json()["id"]) for e in await take(stream, 1) for r in e.records]
    assert sorted(got) == [("oof", 0), ("oof", 1), ("oof", 2), ("publish", 7), ("publish", 8), ("publish", 9)]
    plain = c.sow_and_subscribe("markers")
    plain_id = (await take(plain, 1))[0].sub_id
    await take(plain, 3)
    with pytest.raises(InvalidArgumentError):
        await c.replace_subscription(plain_id, top_n=3)
    stream.cancel()
    plain.cancel()


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
    pages = [
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
        async for e in events:
            if isinstance(e, RecordBatch):
                held.update({r.sow_key: orjson.loads(r.raw) for r in e.records})
        sub.release()
        subs.append((sub, held, p))
    assert len(engine.pages.result_sets) == 3
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
    assert engine.pages.result_sets == {} and not engine.pages.by_topic
    with pytest.raises(InvalidArgument):
        engine.placement.sow_and_subscribe(
            QueryOptions(topic="t", top_n=1, skip_n=0, grouping=["/a"], projection=["/a"])
        )
    engine.close()


def test_cli_page_and_groups(sowd_process: Any) -> None:
    s = ("-server", sowd_process.target)

    def sow(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        return run_cli(*args, *s, stdin=stdin)

    orders = "\n".join(json.dumps({"orderId": i, "symbol": f"S{i % 2}", "qty": i}) for i in (1, 2, 5, 7))
    assert sow("publish", "-topic", "orders", stdin=orders).returncode == 0
    page = sow("sow_and_subscribe", "-topic", "orders", "-topn", "2", "-skipn", "1", "-orderby", "/orderId",
               "-count", "2")  # fmt: skip
    assert page.returncode == 0, page.stderr
    assert [json.loads(line)["orderId"] for line in page.stdout.splitlines()] == [2, 5]
    groups = sow("sow_and_subscribe", "-topic", "orders", "-grouping", "/symbol", "-projection", "/symbol",
                 "-projection", "SUM(/qty) AS /qty", "-orderby", "/symbol", "-count", "2")  # fmt: skip
    assert groups.returncode == 0, groups.stderr
    assert [json.loads(line) for line in groups.stdout.splitlines()] == [
        {"symbol": "S0", "qty": 2},
        {"symbol": "S1", "qty": 13},
    ]


def test_a_refused_page_leaves_no_result_set_behind(tmp_path: Path) -> None:
    engine = open_engine(tmp_path)
    engine.placement.sow_and_subscribe(QueryOptions(topic="t", top_n=2, skip_n=0), sub_id="mine")
    with pytest.raises(InvalidArgument, match="already in use"):
        engine.placement.sow_and_subscribe(QueryOptions(topic="t", filter="/a = 1", top_n=2, skip_n=0), sub_id="mine")
    assert list(engine.pages.result_sets) == [("t", "", "", ())]
    engine.close()
