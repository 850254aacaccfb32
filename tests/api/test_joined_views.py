"""Joined views (V-2) through the real server and the SDK: queries, sow_and_subscribe with oof,
delta, pages, a conflated topic over a joined view, ListTopics and Stats. The upkeep itself
(both join kinds, restart, replicas, the property test): ``tests/engine/state/test_joins.py``."""

from __future__ import annotations

import ast
import asyncio
import base64
import json
import re
import tomllib
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from sowdb.config import ServerConfig, config_from_dict
from sowdb_api.v1 import sow_pb2
from sowdb_client import FailedPreconditionError, PublishError
from tests.console.wire import frames, post, read_frames
from tests.doc_pages import blocks
from tests.process.test_docs_pages import run_python
from tests.support import Running, running, sow, take

SOW = "/sowdb.v1.SowService/Sow"
LIST_TOPICS = "/sowdb.v1.SowService/ListTopics"
TOPICS: dict[str, Any] = {
    "topic": [
        {"name": "orders", "key": ["/id"]},
        {"name": "customers", "key": ["/id"]},
        {"name": "instruments", "key": ["/symbol"]},
    ],
    "view": [
        {
            "name": "by_customer",
            "underlying": "orders",
            "join": ["[orders]./customer_id = [customers]./id", "[instruments]./symbol = [orders]./symbol"],
            "grouping": ["[customers]./id"],
            "projection": [
                "[customers]./id AS /customer",
                "[customers]./name AS /name",
                "[customers]./tier AS /tier",
                "SUM([orders]./qty * [instruments]./price) AS /notional",
                "COUNT([orders]./id) AS /orders",
            ],
        }
    ],
    "conflated_topic": [{"name": "by_customer_100ms", "underlying": "by_customer", "interval": "100ms"}],
}


@pytest.fixture
async def joined(tmp_path: Path) -> AsyncIterator[Running]:
    config = config_from_dict(TOPICS, source="<test>")
    config = replace(config, server=ServerConfig(listen="127.0.0.1:0", data_dir=str(tmp_path), heartbeat_s=0.2))
    async with running(config) as r:
        c = r.client
        await c.publish(
            "customers", [{"id": 1, "name": "Ann", "tier": "gold"}, {"id": 2, "name": "Bob", "tier": "gold"}]
        )
        await c.publish("instruments", [{"symbol": "IBM", "price": 10}, {"symbol": "MSFT", "price": 20}])
        await c.publish(
            "orders",
            [
                {"id": 1, "customer_id": 1, "symbol": "IBM", "qty": 3},
                {"id": 2, "customer_id": 2, "symbol": "MSFT", "qty": 1},
            ],
        )
        yield r


async def next_records(stream: Any, n: int) -> list[tuple[str, str, dict[str, Any]]]:
    """The next ``n`` records the stream delivers: (kind, oof reason, document)."""
    got: list[tuple[str, str, dict[str, Any]]] = []
    while len(got) < n:
        got += [(e.kind, e.reason, r.json()) for e in await take(stream, 1) for r in e.records]
    return got


async def test_a_joined_view_is_queried_like_any_view(joined: Running) -> None:
    c = joined.client
    got = [r.json() for r in await c.sow("by_customer", filter="/notional > 25", order_by="/customer").records()]
    assert got == [{"customer": 1, "name": "Ann", "tier": "gold", "notional": 30, "orders": 1}]
    topics = {t.name: t for t in await c.list_topics()}
    assert (topics["by_customer"].underlying, topics["by_customer"].record_count) == ("orders", 2)
    stats = {t.name: t for t in (await c.stats()).topics}
    assert (stats["by_customer"].kind, stats["by_customer"].records) == (sow_pb2.TOPIC_KIND_VIEW, 2)
    await c.publish("instruments", [{"symbol": "IBM", "price": 11}])
    assert (await c.stats("by_customer")).topics[0].publishes == 3  # two rows made, one repriced
    with pytest.raises(PublishError, match="read-only"):  # K-4
        await c.publish("by_customer", [{"customer": 1}])
    with pytest.raises(FailedPreconditionError, match="read-only"):
        await c.sow_delete("by_customer", filter="/customer = 1")


async def test_sow_and_subscribe_follows_both_sides_with_oof(joined: Running) -> None:
    """O-1 on a joined view: a customer leaving the subscriber's filter by a change on the
    customers side is an oof ``match``; one whose instrument goes (inner join) an oof
    ``deleted``; a price change on the instruments side reprices the row live."""
    c = joined.client
    stream = c.sow_and_subscribe("by_customer", filter="/tier = 'gold'", order_by="/customer", oof=True)
    first = await take(stream, 4)
    assert [r.json()["customer"] for r in first[2].records] == [1, 2]
    await c.publish("instruments", [{"symbol": "MSFT", "price": 25}])
    assert await next_records(stream, 1) == [
        ("publish", "", {"customer": 2, "name": "Bob", "tier": "gold", "notional": 25, "orders": 1})
    ]
    await c.publish("customers", [{"id": 1, "name": "Ann", "tier": "silver"}])
    ((kind, reason, doc),) = await next_records(stream, 1)
    assert (kind, reason, doc["customer"]) == ("oof", "match", 1)
    await c.sow_delete("instruments", filter="/symbol = 'MSFT'")
    ((kind, reason, doc),) = await next_records(stream, 1)
    assert (kind, reason, doc["customer"]) == ("oof", "deleted", 2)
    await c.publish("orders", [{"id": 3, "customer_id": 1, "symbol": "IBM", "qty": 1}])
    await c.publish("customers", [{"id": 1, "name": "Ann", "tier": "gold"}])  # back in the filter
    assert await next_records(stream, 1) == [
        ("publish", "", {"customer": 1, "name": "Ann", "tier": "gold", "notional": 40, "orders": 2})
    ]
    stream.cancel()


async def test_delta_and_pages_on_a_joined_view(joined: Running) -> None:
    """D-2: a delta subscriber gets only what changed of a row; P-1: a page ordered by notional
    follows rows that a change on the other side moves into and out of it."""
    c = joined.client
    delta = c.sow_and_subscribe("by_customer", delta=True)
    page = c.sow_and_subscribe("by_customer", top_n=1, skip_n=0, order_by="/notional DESC", oof=True)
    await take(delta, 4)
    first = await take(page, 4)
    assert [r.json()["customer"] for r in first[2].records] == [1]
    await c.publish("instruments", [{"symbol": "MSFT", "price": 50}])  # Bob's 50 passes Ann's 30
    ((_, _, changed),) = await next_records(delta, 1)
    assert changed == {"notional": 50}
    moved = sorted((kind, doc["customer"]) for kind, _, doc in await next_records(page, 2))
    assert moved == [("oof", 1), ("publish", 2)]
    delta.cancel()
    page.cancel()


async def test_a_conflated_topic_follows_a_joined_view(joined: Running) -> None:
    c = joined.client
    await c.publish("customers", [{"id": 2, "name": "Bob", "tier": "platinum"}])
    for _ in range(100):
        copy = {r.sow_key: r.json() for r in await c.sow("by_customer_100ms").records()}
        if copy.get("[2]", {}).get("tier") == "platinum":
            break
        await asyncio.sleep(0.05)
    assert copy == {r.sow_key: r.json() for r in await c.sow("by_customer").records()}


async def test_the_views_pages_examples_run_as_written(tmp_path: Path) -> None:
    """docs/views.md, "Joined views": its config is one sowd accepts, and its Python example,
    run against a server on that config, prints what the comment under each print says."""
    (toml,) = blocks("views.md", "Joined views", lang="toml")
    (example,) = blocks("views.md", "Joined views", lang="python")
    config = config_from_dict(tomllib.loads(toml), source="<docs/views.md>")
    config = replace(config, server=ServerConfig(listen="127.0.0.1:0", data_dir=str(tmp_path)))
    async with running(config) as r:
        run = await asyncio.to_thread(run_python, example, r.target)
    assert run.returncode == 0, run.stderr
    said = [line.strip()[2:] for line in example.splitlines() if line.strip().startswith("# [")]
    expected = [ast.literal_eval(s.split("]:")[0] + "]" if "]:" in s else s) for s in said]
    assert [ast.literal_eval(line) for line in run.stdout.splitlines()] == expected
    assert len(expected) == 3


async def test_the_consoles_gateway_serves_a_joined_view(tmp_path: Path) -> None:
    """The console reads through its gateway (Connect JSON here): a joined view is listed with its
    first topic and queried as on the gRPC port."""
    config = config_from_dict(TOPICS, source="<test>")
    server = ServerConfig(listen="127.0.0.1:0", http_listen="127.0.0.1:0", data_dir=str(tmp_path))
    async with running(replace(config, server=server)) as r:
        await r.client.publish("customers", [{"id": 1, "name": "Ann", "tier": "gold"}])
        await r.client.publish("instruments", [{"symbol": "IBM", "price": 10}])
        await r.client.publish("orders", [{"id": 1, "customer_id": 1, "symbol": "IBM", "qty": 3}])
        body = frames({"topic": "by_customer"})
        status, _, answer = await asyncio.to_thread(post, r.console_url, SOW, body, "application/connect+json", "")
        events, end = read_frames(answer)
        assert (status, end) == (200, {})
        (record,) = events[1]["records"]["records"]
        (same,) = await r.client.sow("by_customer").records()
        assert json.loads(base64.b64decode(record["data"])) == same.json() == {
            "customer": 1, "name": "Ann", "tier": "gold", "notional": 30, "orders": 1,
        }  # fmt: skip
        status, _, listed = await asyncio.to_thread(post, r.console_url, LIST_TOPICS, b"{}", "application/json", "")
        (view,) = [t for t in json.loads(listed)["topics"] if t["name"] == "by_customer"]
        assert (status, view["underlying"], view["recordCount"]) == (200, "orders", "1")


async def test_sow_stats_shows_a_joined_view(joined: Running) -> None:
    """``sow stats`` (the CLI, a process) on a joined view: a view's figures, which a change on
    the other side of the join moves too, in JSON and in the table ``-topic`` prints."""
    await joined.client.publish("instruments", [{"symbol": "IBM", "price": 11}])  # reprices Ann's row
    figures = await asyncio.to_thread(
        sow, "-server", joined.target, "stats", "-topic", "by_customer", "-format", "json"
    )
    assert figures.returncode == 0, figures.stderr
    (view,) = json.loads(figures.stdout)["topics"]
    assert (view["name"], view["kind"], view["records"], view["publishes"]) == ("by_customer", "view", 2, 3)
    table = await asyncio.to_thread(sow, "-server", joined.target, "stats", "-topic", "by_customer")
    assert table.returncode == 0, table.stderr
    assert re.search(r"│ by_customer │ view │ +2 │ .* │ +3 │", table.stdout), table.stdout
