"""EN-1 and EN-2 through a real server: a topic's ``preprocessing`` makes the key, its
``enrichment`` reads the previous version, and what subscribers, queries, history, views, the
data service, a restart and a rebuild see is the rewritten record. An expression that fails on a
message leaves its field absent (NULL) at every entry point; publish entitlements judge the
message as received."""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import grpc
import pytest

from sowdb.config import Config, ConfigError, ServerConfig, config_from_dict, demo_config
from sowdb_api.v1 import data_pb2 as dpb
from sowdb_api.v1 import data_pb2_grpc
from sowdb_api.v1 import sow_pb2 as pb
from sowdb_client import AsyncClient, PublishError
from tests.doc_pages import blocks, section
from tests.support import TOKENS, running, secured_config, serving, take

PRE = ["CONCAT(/customer_id, '-', /order_id) AS /order_key"]
ENRICH = ["IF(/qty < 0, /qty OF PREVIOUS, /qty) AS /qty", "/qty * /price AS /notional"]


def topics(rule: str = "v1") -> dict[str, Any]:
    """``orders`` keyed by a preprocessed field and enriched; ``ticks`` transient (rebuilt from
    the journal at a start); ``rule`` is a constant the enrichment stamps on every record, so a
    restart with another one shows whether stored records are evaluated again."""
    stamp = f"'{rule}' AS /rule"
    return {
        "topic": [
            {
                "name": "orders",
                "key": ["/order_key"],
                "history": {"window": "1d"},
                "preprocessing": PRE,
                "enrichment": [*ENRICH, stamp],
            },
            {"name": "ticks", "key": ["/id"], "durability": "transient", "enrichment": ["/px * 2 AS /px2", stamp]},
        ],
        "view": [
            {
                "name": "by_customer",
                "underlying": "orders",
                "grouping": ["/customer_id"],
                "projection": ["/customer_id AS /customer_id", "SUM(/notional) AS /notional"],
            }
        ],
    }


def config(data_dir: Path, rule: str = "v1") -> Config:
    cfg = config_from_dict(topics(rule), source="<tests>")
    return replace(cfg, server=ServerConfig(listen="127.0.0.1:0", data_dir=str(data_dir), heartbeat_s=0.2))


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[AsyncClient]:
    async with running(config(tmp_path / "data")) as r:
        yield r.client


async def rows(c: AsyncClient, topic: str, **options: Any) -> dict[str, Any]:
    return {r.sow_key: r.json() for r in await c.sow(topic, batch_size=1000, **options).records()}


def order(order_id: int, qty: Any, price: Any = 2, customer: str = "c1") -> dict[str, Any]:
    return {"customer_id": customer, "order_id": order_id, "qty": qty, "price": price}


async def test_a_preprocessed_field_is_the_key_and_enrichment_reads_the_previous_version(client: AsyncClient) -> None:
    await client.publish("orders", [order(1, 5)])
    await client.publish("orders", [order(1, -1, price=3)])  # a correction: keep the previous quantity
    await client.publish("orders", [order(2, -4)])  # no previous version: /qty OF PREVIOUS is NULL
    got = await rows(client, "orders")
    assert got == {
        '"c1-1"': {**order(1, 5, price=3), "order_key": "c1-1", "notional": 15, "rule": "v1"},
        '"c1-2"': {"customer_id": "c1", "order_id": 2, "price": 2, "order_key": "c1-2", "rule": "v1"},
    }
    await client.publish("orders", [{**order(2, 1), "order_key": "forged"}])  # preprocessing sets the key
    assert (await rows(client, "orders"))['"c1-2"']["qty"] == 1
    assert await client.sow_delete("orders", data={"customer_id": "c1", "order_id": 2}) == 1  # its key: EN-1's
    assert list(await rows(client, "orders")) == ['"c1-1"']


async def test_two_messages_of_one_request_chain_and_a_delta_merges_before_it_is_enriched(client: AsyncClient) -> None:
    await client.publish("orders", [order(1, 5), order(1, -1, price=10)])
    assert (await rows(client, "orders"))['"c1-1"']["notional"] == 50  # the first message is the previous
    await client.publish("orders", [{"customer_id": "c1", "order_id": 1, "qty": -7}], delta=True)
    assert (await rows(client, "orders"))['"c1-1"'] == {**order(1, 5, price=10), "order_key": "c1-1"} | {
        "notional": 50,
        "rule": "v1",
    }
    await client.publish("orders", [{"customer_id": "c1", "order_id": 1, "price": 1}], delta=True)
    assert (await rows(client, "orders"))['"c1-1"']["notional"] == 5  # merged price, enriched after


async def test_subscribers_history_views_and_the_journal_see_the_enriched_record(tmp_path: Path) -> None:
    async with running(config(tmp_path / "data")) as r:
        c = r.client
        stream = c.subscribe("orders")
        await take(stream, 1)
        ack = await c.publish("orders", [order(1, 5)])
        await c.publish("orders", [order(1, -1, price=4)])
        events = await take(stream, 2)
        assert [e.records[0].json()["notional"] for e in events] == [10, 20]
        stream.cancel()
        past = await rows(c, "orders", bookmark=str(ack.last_bookmark))
        assert past['"c1-1"']["notional"] == 10
        assert list((await rows(c, "by_customer")).values()) == [{"customer_id": "c1", "notional": 20}]
        async with grpc.aio.insecure_channel(r.target) as ch:
            stub = data_pb2_grpc.DataServiceStub(ch)
            entries: list[Any] = []
            async for resp in stub.ReadJournal(dpb.ReadJournalRequest(topic="orders")):
                entries.extend(json.loads(d) for d in resp.entries.data)
        assert [e["notional"] for e in entries] == [10, 20]


async def stage_and_commit(target: str, topic: str, docs: list[Any], stage_id: str = "s") -> None:
    """A Spark job's write: one stage of ``docs``, committed (the data service's write path)."""
    async with grpc.aio.insecure_channel(target) as ch:
        stub = data_pb2_grpc.DataServiceStub(ch)

        async def requests() -> AsyncIterator[dpb.StageWriteRequest]:
            msgs = [pb.PublishMessage(data=json.dumps(d).encode()) for d in docs]
            yield dpb.StageWriteRequest(stage_id=stage_id, topic=topic, messages=msgs, complete=True)

        await stub.StageWrite(requests())
        await stub.CommitStages(dpb.CommitStagesRequest(topic=topic, stage_ids=[stage_id]))


# What each message of a failing expression stores: the field the expression sets is absent
# (NULL), the rest of the record as published; nothing is refused.
FAILING: list[tuple[dict[str, Any], dict[str, Any]]] = [
    (order(1, 3, price="abc"), {"notional": None}),  # a string that is not a number
    (order(2, 3, price=None), {"notional": None}),  # a JSON null
    (order(3, [1, 2], price=2), {"notional": 2}),  # an array is its first element as an operand
    (order(4, 3, price={"a": 1}), {"notional": None}),  # an object
    (order(5, 1e308, price=10), {"notional": None}),  # an overflow to infinity (JSON cannot hold it)
    (order(6, "3", price="2"), {"notional": 6}),  # strings that are numbers convert
]


def expected(message: dict[str, Any], change: dict[str, Any]) -> dict[str, Any]:
    out = {**message, "order_key": f"{message['customer_id']}-{message['order_id']}", **change, "rule": "v1"}
    return {k: v for k, v in out.items() if not (k in change and v is None)}


@pytest.mark.parametrize("entry", ["publish", "delta", "staged"])
async def test_an_expression_that_fails_leaves_its_field_absent_at_every_entry_point(
    tmp_path: Path, entry: str
) -> None:
    async with running(config(tmp_path / "data")) as r:
        messages = [m for m, _ in FAILING]
        if entry == "staged":
            await stage_and_commit(r.target, "orders", messages)
        else:
            await r.client.publish("orders", messages, delta=entry == "delta")
        got = await rows(r.client, "orders")
        for m, change in FAILING:
            assert got[json.dumps(f"{m['customer_id']}-{m['order_id']}")] == expected(m, change), (entry, m)


async def test_config_refuses_bad_rewrites_with_a_clear_message() -> None:
    def refused(topic: dict[str, Any]) -> str:
        with pytest.raises(ConfigError) as exc:
            config_from_dict({"topic": [{"name": "t", "key": ["/k"], **topic}]}, source="sowd.toml")
        return str(exc.value)

    assert refused({"enrichment": ["NOPE(/a) AS /b"]}) == (
        "sowd.toml: [[topic]] #1 \"t\": enrichment[0]: unknown function NOPE at column 1 near 'NOPE'"
    )
    assert "needs AS /field" in refused({"enrichment": ["/a + 1"]})
    assert "OF PREVIOUS reads a record's previous version" in refused({"preprocessing": ["/a OF PREVIOUS AS /b"]})
    assert "sets a key field" in refused({"enrichment": ["/a AS /k"]})
    assert "UNIX_TIMESTAMP() is not allowed" in refused({"preprocessing": ["UNIX_TIMESTAMP() AS /k"]})
    assert "enrichment[1]: aggregate SUM" in refused({"enrichment": ["/a AS /b", "SUM(/a) AS /c"]})
    assert "expected a list of strings" in refused({"enrichment": "/a AS /b"})


async def test_a_restart_and_a_rebuild_keep_the_enriched_records_and_never_evaluate_them_again(tmp_path: Path) -> None:
    data = tmp_path / "data"
    async with running(config(data, rule="v1")) as r:
        await r.client.publish("orders", [order(1, 5)])
        await r.client.publish("ticks", [{"id": 1, "px": 3}])
    async with running(config(data, rule="v2")) as r:  # the same data, another enrichment
        assert (await rows(r.client, "orders"))['"c1-1"']["rule"] == "v1"
        assert (await rows(r.client, "ticks")) == {"1": {"id": 1, "px": 3, "px2": 6, "rule": "v1"}}  # rebuilt
        await r.client.publish("ticks", [{"id": 1, "px": 4}])
        assert (await rows(r.client, "ticks")) == {"1": {"id": 1, "px": 4, "px2": 8, "rule": "v2"}}


ROLES: list[dict[str, Any]] = [
    {"name": "fx", "read": ["desk_orders"], "write": ["desk_orders"], "filter": "/desk = 'FX'"},
    {"name": "admin", "read": [".*"], "write": [".*"], "admin": True},
]
SECURED_TOPICS: dict[str, Any] = {
    "topic": [
        {
            "name": "desk_orders",
            "key": ["/id"],
            "preprocessing": ["COALESCE(/desk, 'FX') AS /desk"],  # a message without a desk is FX's
            "enrichment": ["/px * 2 AS /px2"],
        }
    ]
}


async def test_publish_entitlements_judge_the_message_as_received(tmp_path: Path) -> None:
    cfg = secured_config(tmp_path, roles=ROLES, users={"trader": ["fx"], "root": ["admin"]}, topics=SECURED_TOPICS)
    async with serving(cfg) as server:
        async with AsyncClient(f"127.0.0.1:{server.port}", token=TOKENS["trader"]) as trader:
            await trader.publish("desk_orders", [{"id": 1, "desk": "FX", "px": 1}])
            with pytest.raises(PublishError, match="may not write this record"):
                await trader.publish("desk_orders", [{"id": 2, "px": 1}])  # FX only once preprocessed
            await trader.publish("desk_orders", [{"id": 1, "px": 5}], delta=True)  # merged as received: FX
            assert await rows(trader, "desk_orders") == {"1": {"id": 1, "desk": "FX", "px": 5, "px2": 10}}
        async with AsyncClient(f"127.0.0.1:{server.port}", token=TOKENS["root"]) as root:
            await root.publish("desk_orders", [{"id": 2, "px": 1}])
            assert (await rows(root, "desk_orders"))["2"] == {"id": 2, "px": 1, "desk": "FX", "px2": 2}


DOC = ("semantics.md", "Preprocessing and enrichment")


async def test_the_pages_examples_store_what_the_page_says(tmp_path: Path) -> None:
    """docs/semantics.md: its topic, and each row of its table published in order and read back."""
    (toml,) = blocks(*DOC, lang="toml")
    rows = re.findall(r"^\| (delta )?`(\{.*\})` \| `(\{.*\})` \|$", section(*DOC), flags=re.MULTILINE)
    assert len(rows) == 5
    cfg = config_from_dict(tomllib.loads(toml), source="<docs>")
    cfg = replace(cfg, server=ServerConfig(listen="127.0.0.1:0", data_dir=str(tmp_path / "data")))
    async with running(cfg) as r:
        for delta, published, stored in rows:
            await r.client.publish("positions", [json.loads(published)], delta=bool(delta))
            want = json.loads(stored)
            got = {x.sow_key: x.json() for x in await r.client.sow("positions").records()}
            assert got[json.dumps(want["position_key"])] == want, published


def test_the_demo_config_has_the_pages_topic() -> None:
    (toml,) = blocks(*DOC, lang="toml")
    (topic,) = config_from_dict(tomllib.loads(toml), source="<docs>").topics
    assert topic in demo_config().topics


async def test_metadata_functions_read_the_version_being_written(tmp_path: Path) -> None:
    """Enrichment's SOW_KEY(), BOOKMARK() and LAST_UPDATED() are the new version's; in
    preprocessing, before there is one, only TOPIC_NAME() has a value."""
    raw = {
        "topic": [
            {
                "name": "meta",
                "key": ["/id"],
                "preprocessing": ["TOPIC_NAME() AS /pre_topic", "SOW_KEY() AS /pre_key"],
                "enrichment": ["SOW_KEY() AS /key", "BOOKMARK() AS /bm", "LAST_UPDATED() AS /at"],
            }
        ]
    }
    cfg = replace(
        config_from_dict(raw, source="<tests>"),
        server=ServerConfig(listen="127.0.0.1:0", data_dir=str(tmp_path / "data")),
    )
    async with running(cfg) as r:
        await r.client.publish("meta", [{"id": 1}, {"id": 2}])
        one, two = sorted(await r.client.sow("meta").records(), key=lambda x: x.sow_key)
    assert one.json() == {"id": 1, "pre_topic": "meta", "key": "1", "bm": one.bookmark, "at": one.json()["at"]}
    assert two.json()["bm"] == two.bookmark == one.bookmark + 1
    assert abs(one.json()["at"] - one.timestamp.timestamp() * 1_000_000) < 2  # µs, as the record's timestamp
