#!/usr/bin/env python3
"""Subscription benchmarks against a real ``sowd`` process (not part of the test suite).

- latency: 10 subscribers, one publisher process at 2,000 msg/s (one message per request);
  publish -> receive, p50 / p99, from a monotonic timestamp the publisher puts in each message;
- fan-out: 100 subscribers with different filters each matching ~10 % of the orders, one
  publisher as fast as it can (100 per request): record deliveries per second, and the publish
  rate held; the subscribers are raw HTTP/2 streams that only count (``h2drain.py``), so the
  server's deliveries are measured rather than a client's Python;
- symbols: the publish rate with 10 subscriptions on ``/symbol`` values that occur, and with
  those 10 plus 990 on values that never do, alternating rounds: what subscriptions that cannot
  match cost a publish (the hub files them by their equality term);
- snapshot: sow_and_subscribe of a 20,000-record topic until group_end.

Every subscriber opens a connection of its own (``grpc.use_local_subchannel_pool``), as
separate clients do: channels of one process with the same target otherwise share one TCP
connection.

``--store both`` runs each part (slow: its 10 reading subscribers only) on each record store,
alternating for ``--rounds`` rounds, and prints the medians and arena/objects, the rates per
server CPU-second as well.

Usage: ``python tools/bench/bench_subscriptions.py [--orders 200000] [--rounds 5] [--seconds 10]
[--snapshot 20000] [--parts slow,latency,fanout,symbols,snapshot] [--store arena|objects|both]``
(``make bench-subscriptions``; the test of the benchmarks runs it tiny).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
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

from sowdb.config.model import DEFAULT_RECORD_STORE
from sowdb_api.v1 import sow_pb2 as pb
from sowdb_client import AsyncClient, Client

sys.path.insert(0, str(Path(__file__).resolve().parent))
from alternating import Figures, add_store_option, alternate, print_medians, stores  # sibling scripts
from bench_server import _cpu_seconds, _orders, _rss_mb, _start
from h2drain import drain_in_child

# A forked child would inherit this process's live gRPC channels, which gRPC does not support.
_SPAWN = multiprocessing.get_context("spawn")
SLOW_ROUNDS = 5
OWN_CONNECTION = [("grpc.use_local_subchannel_pool", 1)]
"""A subscriber's channel option: a TCP connection of its own, as a separate client has."""
SUBSCRIBE = "/sowdb.v1.SowService/Subscribe"
MARKER = b'"orderId":'
"""What every order's JSON holds once: the raw subscribers count deliveries by it."""


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
    async with grpc.aio.insecure_channel(target, options=OWN_CONNECTION) as channel:
        call = channel.unary_stream(SUBSCRIBE, response_deserializer=lambda b: b)(
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


class RawSubscribers:
    """Raw HTTP/2 subscribers (one connection each) in a child process that only counts the
    records they receive (``h2drain.py``): cheap clients, so the server is what is measured."""

    def __init__(self, target: str, filters: list[str], seconds: float = 300.0) -> None:
        requests = [pb.SubscribeRequest(topic="orders", filter=f).SerializeToString() for f in filters]
        self.counts: Any = _SPAWN.Array("q", len(filters), lock=False)
        ready = _SPAWN.Event()
        self.proc = _SPAWN.Process(
            target=drain_in_child, args=(target, SUBSCRIBE, requests, MARKER, seconds, self.counts, ready)
        )
        self.proc.start()
        if not ready.wait(120):
            self.close()
            raise SystemExit("the raw subscribers did not connect within 120 s")

    @property
    def received(self) -> int:
        return sum(self.counts)

    def close(self) -> None:
        self.proc.terminate()
        self.proc.join(30)


def fanout(target: str, n: int, pid: int | None = None) -> tuple[float, float]:
    """Record deliveries a second to 100 raw subscribers (printed as well), and deliveries per
    CPU-second of the server process ``pid`` (nan without one)."""
    orders = _orders(n)
    subscribers = RawSubscribers(target, [_fanout_filter(i) for i in range(100)])
    try:
        expected = n * 10  # every order matches the 10 subscribers of its /qty % 10
        queue: Any = _SPAWN.Queue()
        cpu = _cpu_seconds(pid) if pid else 0.0
        start = time.perf_counter()
        proc = _SPAWN.Process(target=_publish_fast, args=(target, orders, queue))
        proc.start()
        while subscribers.received < expected and time.perf_counter() - start < 120:
            time.sleep(0.02)
        took = time.perf_counter() - start
        cpu = _cpu_seconds(pid) - cpu if pid else float("nan")
        got = subscribers.received
        publish_rate = queue.get(timeout=60)
        proc.join()
    finally:
        subscribers.close()
    print(
        f"fan-out      100 subscribers x ~10 % (raw HTTP/2, a connection each): {got / took:,.0f} record "
        f"deliveries/s ({got:,} of {expected:,} in {took:.2f} s); publish rate held {publish_rate:,.0f} msg/s"
    )
    if got < expected:
        raise SystemExit(f"fan-out: {expected - got:,} deliveries never arrived")
    return got / took, got / max(cpu, 1e-9)


def symbols(target: str, pid: int, n: int, absent: int) -> tuple[float, float]:
    """The publish rate (msg/s) and the server's CPU per message (µs) with 10 subscriptions on
    ``/symbol`` values the orders have and ``absent`` more on values they never have; the 10 get
    every order of theirs."""
    orders = _orders(n)
    present = [f"/symbol = 'SYM{i}'" for i in range(10)]
    subscribers = RawSubscribers(target, present + [f"/symbol = 'NONE{i}'" for i in range(absent)])
    try:
        queue: Any = _SPAWN.Queue()
        proc = _SPAWN.Process(target=_publish_fast, args=(target, orders, queue))
        cpu = _cpu_seconds(pid)
        proc.start()
        rate = float(queue.get(timeout=300))
        cpu = _cpu_seconds(pid) - cpu
        proc.join()
        expected = sum(1 for o in orders if json.loads(o)["symbol"] in {f"SYM{i}" for i in range(10)})
        deadline = time.monotonic() + 60
        while subscribers.received < expected and time.monotonic() < deadline:
            time.sleep(0.02)
        if subscribers.received != expected:
            raise SystemExit(f"symbols: {subscribers.received:,} deliveries, {expected:,} expected")
    finally:
        subscribers.close()
    return rate, cpu / n * 1e6


async def snapshot(target: str, records: int = 20_000) -> dict[int, float]:
    """Seconds from ``sow_and_subscribe`` to ``group_end``, by batch size (medians of 5, printed)."""
    out = {}
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
        out[batch] = statistics.median(times)
    return out


async def slow_consumer(target: str, pid: int, stalled: bool, n: int = 200_000) -> tuple[float, float, float]:
    """Publish rate with 10 reading subscribers, and with one more that never reads (SL-1); the
    server's RSS (MB) and messages per server CPU-second."""
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
        channel = grpc.aio.insecure_channel(target, options=[("grpc.http2.bdp_probe", 0), *OWN_CONNECTION])
        call = channel.unary_stream(SUBSCRIBE, response_deserializer=lambda b: b)(
            pb.SubscribeRequest(topic="orders").SerializeToString()
        )
        await call.read()
    queue: Any = _SPAWN.Queue()
    proc = _SPAWN.Process(target=_publish_fast, args=(target, orders, queue))
    cpu = _cpu_seconds(pid)
    proc.start()
    rate = await asyncio.get_running_loop().run_in_executor(None, queue.get, True, 120)
    cpu = _cpu_seconds(pid) - cpu
    proc.join()
    stop.set()
    for t in tasks:
        t.cancel()
    if channel is not None:
        await channel.close()
    return float(rate), _rss_mb(pid), n / max(cpu, 1e-9)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--orders", type=int, default=200_000, help="published by slow consumer and fan-out")
    parser.add_argument("--rounds", type=int, default=SLOW_ROUNDS, help="alternating rounds (slow consumer, symbols)")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of the latency measurement")
    parser.add_argument("--snapshot", type=int, default=20_000, help="records of the snapshot's topic")
    parser.add_argument("--absent", type=int, default=990, help="symbols: subscriptions on values never published")
    parser.add_argument("--parts", default="slow,latency,fanout,symbols,snapshot", help="comma-separated")
    parser.add_argument(
        "--workers", type=int, default=1, help="fan-out: also sowd --workers N, alternating with one process"
    )
    add_store_option(parser)
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    if args.store == "both":
        runs = alternate(stores(args.store), args.rounds, lambda store: store_round(store, args, parts))
        print_medians(runs, f"{args.orders:,} orders, medians of {args.rounds} alternating rounds")
        return
    store = args.store
    if "slow" in parts:
        slow_consumers(args.orders, args.rounds, store)
    if "symbols" in parts:
        # the 1,000-subscription case against the 10-subscription one, alternating on fresh servers
        rates: dict[int, list[tuple[float, float]]] = {0: [], args.absent: []}
        for _ in range(args.rounds):
            for absent in rates:
                with _fresh(store=store) as (pid, target):
                    rates[absent].append(symbols(target, pid, args.orders, absent))
        few, many = (statistics.median(r for r, _ in rates[a]) for a in rates)
        few_cpu, many_cpu = (statistics.median(c for _, c in rates[a]) for a in rates)
        print(
            f"symbols      publish {args.orders:,} with 10 subscriptions on /symbol: {few:,.0f} msg/s, "
            f"{few_cpu:.1f} server CPU-µs/msg; with {10 + args.absent:,} (the others on values never "
            f"published): {many:,.0f} msg/s, {many_cpu:.1f} CPU-µs/msg (rate {many / few:.2f}x, CPU "
            f"{many_cpu / few_cpu:.2f}x; medians of {args.rounds} alternating rounds)"
        )
    if "fanout" in parts and args.workers > 1:
        fanouts: dict[int, list[float]] = {1: [], args.workers: []}
        for _ in range(args.rounds):
            for workers in fanouts:
                with _fresh("--workers", str(workers), store=store) as (_, target):
                    fanouts[workers].append(fanout(target, args.orders)[0])
        one, many = (statistics.median(fanouts[w]) for w in fanouts)
        print(
            f"fan-out      workers 1: {one:,.0f} deliveries/s; workers {args.workers}: {many:,.0f} deliveries/s "
            f"({many / one:.2f}x, medians of {args.rounds} alternating rounds)"
        )
        parts.discard("fanout")
    for name in ("latency", "fanout", "snapshot"):
        if name not in parts:
            continue
        with _fresh(store=store) as (_, target):
            if name == "fanout":
                fanout(target, args.orders)
            elif name == "latency":
                asyncio.run(latency(target, args.seconds))
            else:
                asyncio.run(snapshot(target, args.snapshot))


@contextlib.contextmanager
def _fresh(*args: str, store: str = DEFAULT_RECORD_STORE) -> Iterator[tuple[int, str]]:
    """A fresh ``sowd ARGS`` with ``[server] record_store = store`` on a throw-away data
    directory: (its process id, its target)."""
    with tempfile.TemporaryDirectory(prefix="sowdb-bench-") as data_dir:
        proc, target = _start(data_dir, *args, store=store)
        try:
            yield proc.pid, target
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def slow_consumers(orders: int, rounds: int, store: str) -> None:
    """Publish with 10 reading subscribers, without and with a stalled one, alternating."""
    # Run to run, the publish rate on this shared machine moves by more than the effect being
    # measured, so the two configurations alternate for ``rounds`` rounds and medians compare.
    runs: dict[bool, list[tuple[float, float, float]]] = {False: [], True: []}
    for _ in range(rounds):
        for stalled in (False, True):
            with _fresh(store=store) as (pid, target):
                runs[stalled].append(asyncio.run(slow_consumer(target, pid, stalled, orders)))
    base = statistics.median(r for r, _, _ in runs[False])
    slow = statistics.median(r for r, _, _ in runs[True])
    rss0, rss1 = max(m for _, m, _ in runs[False]), max(m for _, m, _ in runs[True])
    print(
        f"slow consumer publish {orders:,} with 10 subscribers: {base:,.0f} msg/s; plus one stalled "
        f"subscriber: {slow:,.0f} msg/s ({(slow / base - 1) * 100:+.1f} %, medians of {rounds} alternating "
        "rounds); "
        f"server RSS {rss0:.0f} MB vs {rss1:.0f} MB"
    )


def store_round(store: str, args: argparse.Namespace, parts: set[str]) -> Figures:
    """One round of ``--store both``: each part on a fresh ``sowd`` with ``store``; its figures,
    the rates also per server CPU-second (on a shared machine they move less than the wall clock)."""
    out: Figures = {}
    if "slow" in parts:
        with _fresh(store=store) as (pid, target):
            rate, _, per_cpu = asyncio.run(slow_consumer(target, pid, False, args.orders))
        out["10 subs publish msg/s"], out["10 subs msg/cpu-s"] = rate, per_cpu
    if "symbols" in parts:
        with _fresh(store=store) as (pid, target):
            rate, cpu_us = symbols(target, pid, args.orders, args.absent)
        out["symbols msg/s"], out["symbols CPU-µs/msg"] = rate, cpu_us
    if "latency" in parts:
        with _fresh(store=store) as (_, target):
            out["latency p50 ms"], out["latency p99 ms"] = asyncio.run(latency(target, args.seconds))
    if "fanout" in parts:
        with _fresh(store=store) as (pid, target):
            out["fan-out deliveries/s"], out["fan-out deliv./cpu-s"] = fanout(target, args.orders, pid)
    if "snapshot" in parts:
        with _fresh(store=store) as (_, target):
            times = asyncio.run(snapshot(target, args.snapshot))
        out |= {f"snapshot {batch} s": t for batch, t in times.items()}
    return out


if __name__ == "__main__":
    main()
