"""``[server] record_store = "arena"`` through a real server (issue 39): publishes, updates and
deletes, then every kind of query (a key, the hash index, a range, a scan, an order and a
page) answers as a model of the same messages says, a ``sow_and_subscribe`` under concurrent
publishes mirrors the state, and all of it again after a restart on the same data directory.
The engine's own tests run over both stores (``tests/engine/conftest.py``); this one checks the
server wires the setting through."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from sowdb.config import Config
from sowdb.engine.state import ArenaTopic
from sowdb_client import AsyncClient, Mirror
from tests.support import make_config, running


def _order(i: int, price: int) -> dict[str, Any]:
    return {"orderId": i, "symbol": f"SYM{i % 7}", "price": price, "side": "B" if i % 2 else "S"}


async def _answers(c: AsyncClient) -> dict[str, Any]:
    async def rows(**kw: Any) -> list[dict[str, Any]]:
        return [r.json() for r in await c.sow("orders", **kw).records()]

    def keyed(found: list[dict[str, Any]]) -> list[int]:
        return sorted(d["orderId"] for d in found)

    return {
        "all": keyed(await rows()),
        "key": await rows(filter="/orderId = 17"),
        "index": keyed(await rows(filter="/symbol = 'SYM3'")),
        "range": keyed(await rows(filter="/price > 150 AND /side = 'B'")),
        "scan": keyed(await rows(filter="/price % 10 = 3")),
        "page": [d["orderId"] for d in await rows(order_by="/price DESC, /orderId", top_n=5, skip_n=2)],
    }


def _expected(model: dict[int, dict[str, Any]]) -> dict[str, Any]:
    values = list(model.values())
    ordered = sorted(values, key=lambda d: (-d["price"], d["orderId"]))
    return {
        "all": sorted(model),
        "key": [model[17]] if 17 in model else [],
        "index": sorted(i for i, d in model.items() if d["symbol"] == "SYM3"),
        "range": sorted(i for i, d in model.items() if d["price"] > 150 and d["side"] == "B"),
        "scan": sorted(i for i, d in model.items() if d["price"] % 10 == 3),
        "page": [d["orderId"] for d in ordered[2:7]],
    }


async def test_a_server_on_the_arena_answers_as_the_messages_say_before_and_after_a_restart(tmp_path: Path) -> None:
    config: Config = make_config(tmp_path / "data", record_store="arena")
    assert config.server.record_store == "arena"
    model: dict[int, dict[str, Any]] = {}
    async with running(config) as r:
        assert r.server.engine is not None
        assert isinstance(r.server.engine.topics.sow["orders"], ArenaTopic)
        c = r.client
        first = [_order(i, 100 + i % 97) for i in range(3000)]
        await c.publish("orders", first)
        model.update({d["orderId"]: d for d in first})
        updates = [_order(i, 50 + i % 151) for i in range(0, 3000, 3)]
        await c.publish("orders", updates)
        model.update({d["orderId"]: d for d in updates})
        gone = [str(i) for i in range(0, 3000, 29)]
        await c.sow_delete("orders", sow_keys=gone)
        for key in gone:
            model.pop(int(key))
        assert await _answers(c) == _expected(model)

        mirror = Mirror()
        stream = c.sow_and_subscribe("orders", filter="/side = 'B'", batch_size=250)

        async def follow() -> None:
            async for event in stream:
                mirror.apply(event)

        following = asyncio.create_task(follow())
        more = [_order(i, 200 + i % 13) for i in range(2900, 3300)]
        await asyncio.gather(*(c.publish("orders", more[j : j + 40]) for j in range(0, len(more), 40)))
        model.update({d["orderId"]: d for d in more})
        want = {("orders", str(i)): d for i, d in model.items() if d["side"] == "B"}
        for _ in range(200):
            if {k: v.json() for k, v in mirror.records.items()} == want:
                break
            await asyncio.sleep(0.05)
        assert {k: v.json() for k, v in mirror.records.items()} == want
        stream.cancel()
        following.cancel()
    async with running(config) as r:
        assert await _answers(r.client) == _expected(model)
