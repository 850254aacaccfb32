#!/usr/bin/env python3
"""Subscription benchmarks against a real ``sowd`` process (not part of the test suite).

- latency: 10 subscribers, one publisher process at 2,000 msg/s (one message per request);
  publish -> receive, p50 / p99, from a monotonic timestamp the publisher puts in each message;
- fan-out: 100 subscribers with different filters each matching ~10 % of the orders, one
  publisher as fast as it can (100 per request): record deliveries per second, and the publish
  rate held;
- snapshot: sow_and_subscribe of a 20,000-record topic until group_end.

Usage: ``python tools/bench/bench_subscriptions.py [--orders 200000] [--rounds 5] [--seconds 10]
[--snapshot 20000]`` (``make bench-subscriptions``; the test of the benchmarks runs it tiny).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc

from sowdb_api.v1 import sow_pb2 as pb
from sowdb_client import AsyncClient, Client

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_server import _orders, _rss_mb, _start  # a sibling script, not a package

# A forked child would inherit this process's live gRPC channels, which gRPC does not support.
_SPAWN = multiprocessing.get_context("spawn")
SLOW_ROUNDS = 5


def paced_messages(rate: float, seconds: float) -> Iterator[bytes]:
    """Orders at ``rate`` a second for ``seconds``, each stamped with the time it was made
    (``/t``, monotonic ns) for the subscribers to measure its latency by."""
    start = time.perf_counter()
    for i in range(int(rate * seconds)):
        delay = start + i / rate - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        yield json.dumps({"orderId": i % 1000, "t": time.monotonic_ns(), "price": 100 + i % 97}).encode()


def _publish_paced(target: str, rate: float, seconds: float) -> None:
    with Client(target) as c:
        c.publish("orders", paced_messages(rate, seconds), batch_size=1)


def _publish_fast(target: str, orders: list[bytes], out: Any) -> None:
    with Client(target) as c:
        start = time.perf_counter()
        c.publish("orders", orders, batch_size=100)
        out.put(len(orders) / (time.perf_counter() - start))


def _count_records(data: bytes) -> int:
    return len(pb.SubscribeResponse.FromString(data).publish.records)


async def _subscriber(target: str, topic: str, flt: str, sink: Any, ready: asyncio.Event, stop: asyncio.Event) -> None:
    async with grpc.aio.insecure_channel(target) as channel:
        call = channel.unary_stream("/sowdb.v1.SowService/Subscribe", response_deserializer=lambda b: b)(
            pb.SubscribeRequest(topic=topic, filter=flt).SerializeToString()
        )
        await call.read()  # subscribed
        ready.set()
        while not stop.is_set():
            data = await call.read()
            if data is grpc.aio.EOF:
                return
            sink(data)
        call.cancel()


async def latency(target: str, seconds: float = 10) -> tuple[float, float]:
    """Publish -> receive latency (p50, p99 in ms), printed as well."""
    lat: list[float] = []

    def sink(data: bytes) -> None:
        now = time.monotonic_ns()
        for r in pb.SubscribeResponse.FromString(data).publish.records:
            lat.append((now - json.loads(r.data)["t"]) / 1e6)

    stop = asyncio.Event()
    readies = [asyncio.Event() for _ in range(10)]
    tasks = [asyncio.create_task(_subscriber(target, "orders", "", sink, r, stop)) for r in readies]
    await asyncio.gather(*(r.wait() for r in readies))
    proc = _SPAWN.Process(target=_publish_paced, args=(target, 2000, seconds))
    proc.start()
    while proc.is_alive():
        await asyncio.sleep(0.1)
    await asyncio.sleep(0.5)
    stop.set()
    for t in tasks:
        t.cancel()
    lat = lat[len(lat) // 10 :]  # skip the first second (connection warm-up)
    q = statistics.quantiles(lat, n=100)
    print(f"latency      10 subscribers, 2,000 msg/s: p50 {q[49]:.2f} ms, p99 {q[98]:.2f} ms ({len(lat):,} deliveries)")
    return q[49], q[98]


def _fanout_filter(i: int) -> str:
    """Different text per subscriber (no shared compiled filter), each matching 10 % of orders."""
    return f"/qty % 10 = {i % 10} AND /venue <> 'V{i}x'"


async def fanout(target: str, n: int) -> float:
    """Record deliveries a second to 100 subscribers (printed as well)."""
    orders = _orders(n)
    count = [0]

    def sink(data: bytes) -> None:
        count[0] += _count_records(data)

    stop = asyncio.Event()
    readies = [asyncio.Event() for _ in range(100)]
    tasks = [
        asyncio.create_task(_subscriber(target, "orders", _fanout_filter(i), sink, r, stop))
        for i, r in enumerate(readies)
    ]
    await asyncio.gather(*(r.wait() for r in readies))
    expected = n * 10  # every order matches the 10 subscribers of its /qty % 10
    queue: Any = _SPAWN.Queue()
    start = time.perf_counter()
    proc = _SPAWN.Process(target=_publish_fast, args=(target, orders, queue))
    proc.start()
    while count[0] < expected and time.perf_counter() - start < 120:
        await asyncio.sleep(0.05)
    took = time.perf_counter() - start
    publish_rate = queue.get(timeout=60)
    proc.join()
    stop.set()
    for t in tasks:
        t.cancel()
    print(
        f"fan-out      100 subscribers x ~10 %: {count[0] / took:,.0f} record deliveries/s "
        f"({count[0]:,} in {took:.2f} s); publish rate held {publish_rate:,.0f} msg/s"
    )
    return count[0] / took


async def snapshot(target: str, records: int = 20_000) -> None:
    with Client(target) as c:
        c.publish("quotes", [{"symbol": f"S{i}", "px": i} for i in range(records)])
    for batch in (100, 10):
        times = []
        for _ in range(5):
            async with AsyncClient(target) as c:
                start = time.perf_counter()
                stream = c.sow_and_subscribe("quotes", batch_size=batch)
                n = 0
                async for e in stream:
                    n += len(e.records)
                    if e.kind == "group_end":
                        break
                times.append(time.perf_counter() - start)
                stream.cancel()
        print(
            f"snapshot     sow_and_subscribe of {records:,} records, batch_size {batch}: "
            f"{statistics.median(times):.3f} s to group_end ({n:,} records)"
        )


async def slow_consumer(target: str, pid: int, stalled: bool, n: int = 200_000) -> tuple[float, float]:
    """Publish rate with 10 reading subscribers, and with one more that never reads (SL-1)."""
    orders = _orders(n)
    count = [0]

    def sink(data: bytes) -> None:
        count[0] += _count_records(data)

    stop = asyncio.Event()
    readies = [asyncio.Event() for _ in range(10)]
    tasks = [asyncio.create_task(_subscriber(target, "orders", "/qty < 100", sink, r, stop)) for r in readies]
    await asyncio.gather(*(r.wait() for r in readies))
    channel = None
    if stalled:
        channel = grpc.aio.insecure_channel(target, options=[("grpc.http2.bdp_probe", 0)])
        call = channel.unary_stream("/sowdb.v1.SowService/Subscribe", response_deserializer=lambda b: b)(
            pb.SubscribeRequest(topic="orders").SerializeToString()
        )
        await call.read()
    queue: Any = _SPAWN.Queue()
    proc = _SPAWN.Process(target=_publish_fast, args=(target, orders, queue))
    proc.start()
    rate = await asyncio.get_running_loop().run_in_executor(None, queue.get, True, 120)
    proc.join()
    stop.set()
    for t in tasks:
        t.cancel()
    if channel is not None:
        await channel.close()
    return float(rate), _rss_mb(pid)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--orders", type=int, default=200_000, help="published by slow consumer and fan-out")
    parser.add_argument("--rounds", type=int, default=SLOW_ROUNDS, help="alternating slow-consumer rounds")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of the latency measurement")
    parser.add_argument("--snapshot", type=int, default=20_000, help="records of the snapshot's topic")
    args = parser.parse_args()
    # Run to run, the publish rate on this shared machine moves by more than the effect being
    # measured, so the two configurations alternate for SLOW_ROUNDS rounds and medians compare.
    runs: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    for _ in range(args.rounds):
        for stalled in (False, True):
            with tempfile.TemporaryDirectory(prefix="sowdb-bench-") as data_dir:
                proc, target = _start(data_dir)
                try:
                    runs[stalled].append(asyncio.run(slow_consumer(target, proc.pid, stalled, args.orders)))
                finally:
                    proc.terminate()
                    proc.wait(timeout=30)
    base = statistics.median(r for r, _ in runs[False])
    slow = statistics.median(r for r, _ in runs[True])
    rss0, rss1 = max(m for _, m in runs[False]), max(m for _, m in runs[True])
    print(
        f"slow consumer publish {args.orders:,} with 10 subscribers: {base:,.0f} msg/s; plus one stalled "
        f"subscriber: {slow:,.0f} msg/s ({(slow / base - 1) * 100:+.1f} %, medians of {args.rounds} alternating "
        "rounds); "
        f"server RSS {rss0:.0f} MB vs {rss1:.0f} MB"
    )
    for name in ("latency", "fanout", "snapshot"):
        with tempfile.TemporaryDirectory(prefix="sowdb-bench-") as data_dir:
            proc, target = _start(data_dir)
            try:
                if name == "fanout":
                    asyncio.run(fanout(target, args.orders))
                elif name == "latency":
                    asyncio.run(latency(target, args.seconds))
                else:
                    asyncio.run(snapshot(target, args.snapshot))
            finally:
                proc.terminate()
                proc.wait(timeout=30)


if __name__ == "__main__":
    main()
