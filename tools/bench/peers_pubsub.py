"""Redis and NATS beside sowdb in the peer benchmark (``peers.py``): publish rate and publish ->
subscriber latency, each measured only where the server is installed (``redis-server``,
``nats-server`` on PATH), each server started here on a free port in a temporary directory.

- Redis 7: a record is ``SET key json`` + ``PUBLISH orders json`` (state and notification, what a
  SOW does in one publish), pipelined 100 at a time; latency through pub/sub.
- NATS (JetStream key-value, the NATS way to keep state): ``kv.put``, 100 in flight; latency
  through ``kv.watch`` of a bucket of its own.
- sowdb: publish 100 per request; latency as ``bench_subscriptions.py`` measures it.

Latency is 10 subscribers and one publisher process at 2,000 msg/s for 10 s, the first second
dropped, from a monotonic timestamp the publisher puts in each message.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

from bench_server import _orders, _start
from bench_subscriptions import latency as sowdb_latency
from peers_pg import free_port

from sowdb_client import Client

_SPAWN = multiprocessing.get_context("spawn")
RATE, SECONDS, SUBSCRIBERS = 2000, 10.0, 10
MAX_PUBLISH = 200_000
"""Messages the publish rate is measured over (a NATS KV put at a time would take minutes for 1M)."""


def _paced(rate: float, seconds: float) -> Iterator[tuple[int, bytes]]:
    start = time.perf_counter()
    for i in range(int(rate * seconds)):
        delay = start + i / rate - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        yield i, json.dumps({"orderId": i % 1000, "t": time.monotonic_ns(), "price": 100 + i % 97}).encode()


def _redis_publisher(port: int) -> None:
    import redis

    r = redis.Redis(port=port)
    for i, msg in _paced(RATE, SECONDS):
        pipe = r.pipeline(transaction=False)
        pipe.set(f"orders:{i % 1000}", msg)
        pipe.publish("orders", msg)
        pipe.execute()


def _nats_publisher(port: int) -> None:
    async def go() -> None:
        import nats

        nc = await nats.connect(f"nats://127.0.0.1:{port}")
        kv = await nc.jetstream().key_value("ticks")
        for i, msg in _paced(RATE, SECONDS):
            await kv.put(str(i % 1000), msg)
        await nc.close()

    asyncio.run(go())


def _quantiles(lat: list[float]) -> tuple[float, float]:
    lat = lat[len(lat) // 10 :]  # skip the first second (connection warm-up)
    q = statistics.quantiles(lat, n=100)
    return q[49], q[98]


async def _measure(
    subscribe: Callable[[Callable[[bytes], None]], Awaitable[Any]], publisher: Any, port: int
) -> tuple[float, float]:
    lat: list[float] = []

    def sink(data: bytes) -> None:
        sent = json.loads(data).get("t")
        if sent is not None:  # not a watch's initial values (the records of the publish run)
            lat.append((time.monotonic_ns() - sent) / 1e6)

    handles = [await subscribe(sink) for _ in range(SUBSCRIBERS)]
    proc = _SPAWN.Process(target=publisher, args=(port,))
    proc.start()
    while proc.is_alive():
        await asyncio.sleep(0.1)
    await asyncio.sleep(0.5)
    for task in handles:
        task.cancel()
    return _quantiles(lat)


@contextmanager
def _server(argv: list[str]) -> Iterator[None]:
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)
    try:
        yield
    finally:
        proc.terminate()
        proc.wait(timeout=30)


async def _redis(orders: list[bytes], port: int) -> tuple[float, tuple[float, float]]:
    import redis.asyncio as aredis

    r = aredis.Redis(port=port)
    keys = [f"orders:{i}" for i in range(len(orders))]  # make_orders: orderId i is the i-th order
    start = time.perf_counter()
    for i in range(0, len(orders), 100):
        pipe = r.pipeline(transaction=False)
        for key, raw in zip(keys[i : i + 100], orders[i : i + 100], strict=True):
            pipe.set(key, raw)
            pipe.publish("orders", raw)
        await pipe.execute()
    rate = len(orders) / (time.perf_counter() - start)

    async def subscribe(sink: Callable[[bytes], None]) -> Any:
        conn = aredis.Redis(port=port)
        ps = conn.pubsub()
        await ps.subscribe("orders")

        async def read() -> None:
            async for m in ps.listen():
                if m["type"] == "message":
                    sink(m["data"])

        return asyncio.create_task(read())

    result = await _measure(subscribe, _redis_publisher, port)
    await r.aclose()
    return rate, result


async def _nats(orders: list[bytes], port: int) -> tuple[float, tuple[float, float]]:
    import nats

    nc = await nats.connect(f"nats://127.0.0.1:{port}")
    kv = await nc.jetstream().create_key_value(bucket="orders", history=1)
    start = time.perf_counter()
    for i in range(0, len(orders), 100):
        chunk = orders[i : i + 100]
        await asyncio.gather(*(kv.put(str(i + j), raw) for j, raw in enumerate(chunk)))
    rate = len(orders) / (time.perf_counter() - start)

    # The watchers follow a bucket of their own: on "orders" each would first get every record.
    ticks = await nc.jetstream().create_key_value(bucket="ticks", history=1)

    async def subscribe(sink: Callable[[bytes], None]) -> Any:
        watcher = await ticks.watch(">", include_history=False)

        async def read() -> None:
            async for entry in watcher:
                if entry is not None and entry.value:
                    sink(entry.value)

        return asyncio.create_task(read())

    result = await _measure(subscribe, _nats_publisher, port)
    await nc.close()
    return rate, result


def _sowdb(orders: list[bytes]) -> tuple[float, tuple[float, float]]:
    with tempfile.TemporaryDirectory(prefix="sowdb-peers-") as tmp:
        proc, target = _start(tmp)
        try:
            with Client(target) as c:
                start = time.perf_counter()
                c.publish("orders", orders, batch_size=100)
                rate = len(orders) / (time.perf_counter() - start)
            return rate, asyncio.run(sowdb_latency(target))
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def pubsub_rows(records: int) -> list[str]:
    """The Markdown lines of the publish / latency table (sowdb beside each installed peer)."""
    orders = _orders(min(records, MAX_PUBLISH))
    peers: list[tuple[str, Callable[[int], tuple[float, tuple[float, float]]], list[str]]] = []
    tmp = tempfile.mkdtemp(prefix="sowdb-peers-pubsub-")
    if shutil.which("redis-server"):
        peers.append(
            ("Redis", lambda p: asyncio.run(_redis(orders, p)), ["redis-server", "--save", "", "--appendonly", "no"])
        )
    if shutil.which("nats-server"):
        peers.append(("NATS KV", lambda p: asyncio.run(_nats(orders, p)), ["nats-server", "-js", "-sd", tmp]))
    if not peers:
        return ["", "(no redis-server or nats-server on PATH: no publish / latency peers)"]
    mine = _sowdb(orders)
    lines = [
        "",
        f"publish {len(orders):,} records, 100 per request / pipeline; latency 10 subscribers at {RATE:,} msg/s",
        "",
        "| workload | sowdb | peer | ratio |",
        "|---|---|---|---|",
    ]
    for name, measure, argv in peers:
        port = free_port()
        with _server([*argv, "--port", str(port)] if name == "Redis" else [*argv, "-p", str(port)]):
            rate, (p50, p99) = measure(port)
        lines.append(f"| publish, {name} | {mine[0]:,.0f}/s | {rate:,.0f}/s | {mine[0] / rate:.2f}x |")
        lines.append(
            f"| latency p50 / p99, {name} | {mine[1][0]:.2f} / {mine[1][1]:.2f} ms | {p50:.2f} / {p99:.2f} ms | "
            f"{mine[1][1] / p99:.2f} (p99) |"
        )
    shutil.rmtree(tmp, ignore_errors=True)
    return lines
