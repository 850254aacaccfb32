"""The operators' figures (SPEC §12) through a real server: the Prometheus metrics scraped over
HTTP while clients publish, delete and make refused calls, checked against what was done; the
Stats RPC's topics, subscriptions and server figures; ``metrics_listen`` in the config."""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import random
import socket
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from sowdb.config import ConfigError, config_from_dict
from sowdb.server import SowServer
from sowdb_api.v1 import sow_pb2
from sowdb_client import (
    AsyncClient,
    FailedPreconditionError,
    InvalidArgumentError,
    Message,
    PublishError,
    SowdbError,
)
from tests.support import Running, make_config, serving, take

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(port: int) -> Samples:
    """``/metrics``, parsed by prometheus_client's own parser: value by (sample name, labels)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as resp:
        text = resp.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


@pytest.fixture
async def metered(tmp_path: Path) -> AsyncIterator[SowServer]:
    async with serving(make_config(tmp_path / "data", metrics_listen="127.0.0.1:0", heartbeat_s=0.2)) as server:
        yield server


async def test_the_metrics_count_what_was_done_under_load(metered: SowServer) -> None:
    assert metered.metrics is not None
    port = metered.metrics.port
    rng = random.Random(7)
    published: list[bytes] = []
    deleted = refused_queries = refused_publishes = publish_calls = 0
    scrapes: list[Samples] = []
    done = asyncio.Event()

    async with AsyncClient(f"127.0.0.1:{metered.port}") as c:
        sub = c.subscribe("orders")
        await take(sub, 1)

        async def publisher(n: int) -> None:
            nonlocal publish_calls
            for _ in range(25):
                batch = [
                    json.dumps({"orderId": rng.randrange(300), "symbol": f"S{n}", "pad": "x" * rng.randrange(40)})
                    for _ in range(20)
                ]
                await c.publish("orders", [b.encode() for b in batch], batch_size=7)
                published.extend(b.encode() for b in batch)
                publish_calls += 1

        async def deleter() -> None:
            nonlocal deleted
            for _ in range(20):
                deleted += await c.sow_delete("orders", sow_keys=[str(rng.randrange(300)) for _ in range(5)])
                await asyncio.sleep(0)

        async def refuser() -> None:
            nonlocal refused_queries, refused_publishes, publish_calls
            for i in range(15):
                with pytest.raises(FailedPreconditionError):
                    await c.sow("no-such-topic").records()
                refused_queries += 1
                if i % 3 == 0:
                    with pytest.raises(PublishError):
                        await c.publish("orders", [b'{"orderId": "ok"}', b'{"orderId": '])
                    refused_publishes += 1
                    publish_calls += 1

        async def scraper() -> None:
            while not done.is_set():
                scrapes.append(await asyncio.to_thread(scrape, port))
                await asyncio.sleep(0.01)

        watching = asyncio.create_task(scraper())
        await asyncio.gather(*(publisher(n) for n in range(4)), deleter(), refuser())
        done.set()
        await watching
        final = await asyncio.to_thread(scrape, port)
        records = await c.sow("orders").records()
        stats = await c.stats("orders")
        sub.cancel()

    orders = (("topic", "orders"),)
    assert len(scrapes) >= 2, "no scrape happened while the clients worked"
    seen = [*scrapes, final]
    for earlier, later in itertools.pairwise(seen):  # counters never go back
        key = ("sowdb_topic_publishes_total", orders)
        assert earlier[key] <= later[key]
    assert final[("sowdb_topic_publishes_total", orders)] == len(published)
    assert final[("sowdb_topic_published_bytes_total", orders)] == sum(map(len, published))
    assert final[("sowdb_topic_deletes_total", orders)] == deleted > 0
    assert final[("sowdb_topic_records", (("kind", "sow"), *orders))] == len(records)
    assert final[("sowdb_topic_stored_bytes", orders)] == sum(len(r.data) for r in records)
    assert final[("sowdb_topic_subscriptions", orders)] == 1
    assert final[("sowdb_subscriptions", ())] == 1
    errors = "sowdb_rpc_errors_total"
    assert final[(errors, (("code", "FAILED_PRECONDITION"), ("rpc", "SowService/Sow")))] == refused_queries
    assert final[(errors, (("code", "INVALID_ARGUMENT"), ("rpc", "SowService/Publish")))] == refused_publishes
    assert final[("sowdb_rpc_calls_total", (("rpc", "SowService/Publish"),))] == publish_calls
    assert final[("sowdb_rpc_calls_total", (("rpc", "SowService/SowDelete"),))] == 20
    assert final[("sowdb_rpc_calls_total", (("rpc", "SowService/Sow"),))] == refused_queries
    assert final[("sowdb_rpc_duration_seconds_count", (("rpc", "SowService/Sow"),))] == refused_queries
    last = len(published) + deleted
    assert final[("sowdb_journal_last_bookmark", ())] == last
    assert final[("sowdb_journal_entries", ())] == last
    assert final[("sowdb_journal_oldest_bookmark", ())] == 1
    assert final[("sowdb_journal_bytes", ())] > 0
    assert final[("sowdb_disk_bytes", ())] > 0
    assert final[("process_cpu_seconds_total", ())] > 0
    assert final[("process_resident_memory_bytes", ())] > 0
    # the Stats RPC reads the same figures
    (topic,) = stats.topics
    assert (topic.publishes, topic.deletes, topic.records) == (len(published), deleted, len(records))
    assert stats.bookmark == last


async def test_stats_of_topics_views_expirations_and_subscriptions(metered: SowServer) -> None:
    async with AsyncClient(f"127.0.0.1:{metered.port}") as c:
        await c.publish("orders", [{"orderId": i, "symbol": "A" if i % 2 else "B"} for i in range(10)])
        await c.publish("orders", [Message({"orderId": 99, "symbol": "C"}, expiration=0.1)])
        await c.publish("ticks", [{"px": i} for i in range(5)])  # no SOW: journaled only (K-5)
        follower = c.subscribe("orders", filter="/symbol = 'A'")
        pattern = c.subscribe("^mark")
        await take(follower, 1)
        await take(pattern, 1)
        await c.publish("orders", [{"orderId": i, "symbol": "A", "v": 1} for i in range(3)])
        assert len((await take(follower, 1))[0].records) == 3
        for _ in range(200):  # the upkeep expires it within 50 ms of its time
            if (await c.stats("orders")).topics[0].expirations:
                break
            await asyncio.sleep(0.05)

        every = await c.stats()
        by_name = {t.name: t for t in every.topics}
        assert sorted(by_name) == sorted(t.name for t in await c.list_topics())
        orders, view = by_name["orders"], by_name["orders_by_symbol"]
        assert (orders.records, orders.publishes, orders.expirations, orders.subscriptions) == (10, 14, 1, 1)
        assert (orders.kind, view.kind) == (sow_pb2.TOPIC_KIND_SOW, sow_pb2.TOPIC_KIND_VIEW)
        # groups A and B at first, C with its order, A and B when two orders moved; C's group went
        # when its order expired: a delete of the view's record (its subscribers get oof deleted)
        assert (view.records, view.publishes, view.deletes, view.expirations) == (2, 2 + 1 + 2, 1, 0)
        assert by_name["markers"].subscriptions == 1  # through the regex
        server = every.server
        assert (server.unconfigured_publishes, server.subscriptions) == (5, 2)
        assert server.journal.last_bookmark == every.bookmark == 10 + 1 + 5 + 3 + 1
        assert min(server.uptime.ToNanoseconds(), server.resident_bytes, server.disk_bytes) > 0
        sub = next(s for s in every.subscriptions if s.topic == "orders")
        assert (sub.filter, sub.sent_events, sub.catching_up, sub.user) == ("/symbol = 'A'", 3, False, "")
        assert sub.peer.startswith("ipv4:127.0.0.1:")
        assert sub.max_queued_events == 100_000

        narrowed = await c.stats("^orders")
        assert [t.name for t in narrowed.topics] == ["orders", "orders_by_symbol", "orders_noindex"]
        assert [s.topic for s in narrowed.subscriptions] == ["orders"]  # not the one on ^mark
        assert not (await c.stats("orders", topics_only=True)).HasField("server")
        with pytest.raises(FailedPreconditionError):
            await c.stats("nope")
        with pytest.raises(InvalidArgumentError):
            await c.stats("(unclosed")
        follower.cancel()
        pattern.cancel()


@pytest.mark.parametrize("value", ["nowhere", "127.0.0.1:99999", "127.0.0.1:", 9107])
def test_an_invalid_metrics_listen_is_a_config_error_naming_the_entry(value: object) -> None:
    with pytest.raises(ConfigError) as err:
        config_from_dict({"server": {"metrics_listen": value}}, source="sowd.toml")
    assert str(err.value).startswith("sowd.toml: [server]: metrics_listen:"), err.value


async def test_a_metrics_port_in_use_stops_the_start_in_one_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        # serving() stops nothing when the start fails: the server lets go of what it took itself
        with pytest.raises(OSError, match=f"cannot serve metrics on 127.0.0.1:{port}"):
            async with serving(make_config(tmp_path / "data", metrics_listen=f"127.0.0.1:{port}")):
                pass
    async with serving(make_config(tmp_path / "data")):  # nothing was left open: the store opens again
        pass


async def test_an_internal_error_is_logged_once_with_its_traceback_and_counted(
    sowd: Running, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(sowd.engine, "list_topics", broken)
    with caplog.at_level(logging.INFO, logger="sowdb.api"), pytest.raises(SowdbError) as err:
        await sowd.client.list_topics()
    assert err.value.code.name == "INTERNAL"
    (logged,) = [r for r in caplog.records if getattr(r, "event", "") == "refused"]
    assert (logged.levelname, logged.rpc, logged.code) == ("ERROR", "SowService/ListTopics", "INTERNAL")  # type: ignore[attr-defined]
    assert logged.exc_info is not None
    assert "RuntimeError: a bug" in caplog.text
    rpcs = {r.rpc: dict(r.errors) for r in (await sowd.client.stats()).server.rpcs}
    assert rpcs["SowService/ListTopics"] == {"INTERNAL": 1}
