#!/usr/bin/env python3
"""Replication benchmarks (SPEC §13, issue 31) on real processes: etcd and ``sowd`` nodes started
as the cluster's tests start them (:mod:`sowdb.testing.cluster`), but with etcd over plain
``http://`` (no TLS, no auth): etcd is not on the replication path, and so the figures stay
comparable with those of the commits before etcd was secured (issue 40).

- **sync publish**: N messages in batches of 100 to a primary with ``ack = "sync"`` and one
  replica, beside a lone server (no ``[cluster]``); a fresh cluster or server per run,
  alternating rounds, medians and the ratio sync/alone;
- **failover**: kill -9 of the primary under ``sync`` load, ``--cycles`` times (the failover
  soak's cycle, ``tools/soak/failover_soak.py``): kill -> first acknowledgement by the new
  primary, median and max beside ``lease_ttl + 2 s``;
- **lag**: a primary (``ack = "async"``, so nothing waits for the replica) publishing N messages
  as fast as one pipelined stream goes, one replica: the time from the primary's acknowledgement
  of bookmark B (as its publisher receives it) to the delivery of B to a subscriber on the
  replica, p50 / p99 (one monotonic clock: every process runs on this machine; negative when the
  replica delivered B before the publisher read the primary's answer);
- **fan-out**: 100 subscribers, each matching ~10 % of the messages, all on the primary, or
  spread over the primary and two replicas (34/33/33); one publisher to the primary as fast as
  it can: record deliveries per second, alternating rounds, and the ratio spread/primary.

Usage: ``python tools/bench/bench_replication.py`` (``make bench-replication``); ``--quick`` for
a smoke run at tiny sizes (what the test suite runs).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import grpc

from sowdb import testing
from sowdb_api.v1 import sow_pb2 as pb
from sowdb_api.v1 import sow_pb2_grpc
from sowdb_client import Client

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the soak's cycle (tools.soak)
from alternating import Figures, alternate, print_medians  # sibling scripts, not a package
from bench_subscriptions import _SPAWN, _fanout_filter, _publish_fast, _subscriber

from sowdb.testing.cluster import TOPICS
from tools.soak.failover_soak import Ledger, Load, kill_primary, running_cluster

BATCH = 100


def messages(n: int) -> list[bytes]:
    """``n`` orders keyed by ``/id``; ``/qty % 10`` picks the fan-out subscribers of each."""
    return [json.dumps({"id": i, "qty": i, "venue": "X", "pad": "p" * 60}).encode() for i in range(n)]


@contextmanager
def workdir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="sowdb-bench-repl-") as tmp:
        yield Path(tmp)


def publish_rate(target: str, docs: list[bytes]) -> float:
    with Client(target) as c:
        start = time.perf_counter()
        c.publish("orders", docs, batch_size=BATCH)
        return len(docs) / (time.perf_counter() - start)


def sync_publish(n: int, rounds: int, ttl: int) -> None:
    docs = messages(n)

    def measure(mode: str) -> Figures:
        with workdir() as work:
            if mode == "alone":
                (work / "alone.toml").write_text(TOPICS)
                with testing.start(work / "alone", "--log-level", "WARNING", config=work / "alone.toml") as sowd:
                    return {"msg/s": publish_rate(sowd.target, docs)}
            with running_cluster(work, "sync", ttl, nodes=("n1", "n2"), plain_etcd=True) as cluster:
                return {"msg/s": publish_rate(cluster.nodes[cluster.primary()].target, docs)}

    runs = alternate(["alone", "sync"], rounds, measure, label="publish ")
    print_medians(runs, f"publish {n:,} messages in batches of {BATCH}: a lone server vs ack = sync, one replica")


def failover(cycles: int, ttl: int) -> None:
    with (
        workdir() as work,
        running_cluster(work, "sync", ttl, plain_etcd=True) as cluster,
        Load(cluster, Ledger()) as load,
    ):
        times = []
        for n in range(1, cycles + 1):
            load.ledger.cycle = n
            times.append(kill_primary(cluster, load.ledger).failover_s)
            print(f"failover cycle {n}: {times[-1]:.2f} s", flush=True)
    print(
        f"\nfailover     kill -9 -> first ack by the new primary, {cycles} cycles: median "
        f"{statistics.median(times):.2f} s, max {max(times):.2f} s (lease_ttl + 2 s = {ttl + 2} s)"
    )


def _publish_stream(target: str, docs: list[bytes], out: Any) -> None:
    """One pipelined Publish stream of the docs in batches; puts (bookmark, monotonic time of
    its answer) of each batch's last message, and the publish rate."""
    requests = (
        pb.PublishRequest(topic="orders", messages=[pb.PublishMessage(data=d) for d in docs[i : i + BATCH]])
        for i in range(0, len(docs), BATCH)
    )
    acks = []
    with grpc.insecure_channel(target) as channel:
        start = time.perf_counter()
        for reply in sow_pb2_grpc.SowServiceStub(channel).Publish(requests, timeout=600):
            acks.append((reply.last_bookmark, time.monotonic()))
        out.put((acks, len(docs) / (time.perf_counter() - start)))


def lag(n: int, ttl: int) -> None:
    docs = messages(n)
    delivered: dict[int, float] = {}
    with workdir() as work, running_cluster(work, "async", ttl, nodes=("n1", "n2"), plain_etcd=True) as cluster:
        primary = cluster.primary()
        replica = next(name for name in cluster.nodes if name != primary)
        channel = grpc.insecure_channel(cluster.nodes[replica].target)
        stream = sow_pb2_grpc.SowServiceStub(channel).Subscribe(pb.SubscribeRequest(topic="orders"))
        next(stream)  # subscribed

        def receive() -> None:
            for frame in stream:
                now = time.monotonic()
                for r in frame.publish.records:
                    delivered[r.bookmark] = now
                if len(delivered) >= n:
                    return

        reader = threading.Thread(target=receive, daemon=True)
        reader.start()
        queue: Any = _SPAWN.Queue()
        proc = _SPAWN.Process(target=_publish_stream, args=(cluster.nodes[primary].target, docs, queue))
        proc.start()
        acks, rate = queue.get(timeout=600)
        proc.join()
        reader.join(timeout=120)
        stream.cancel()
        channel.close()
    lags = [(delivered[b] - t) * 1000 for b, t in acks if b in delivered]
    q = statistics.quantiles(lags, n=100, method="inclusive") if len(lags) > 1 else lags * 99
    print(
        f"\nlag          primary ack -> replica delivery at {rate:,.0f} msg/s (async, one replica): "
        f"p50 {q[49]:.1f} ms, p99 {q[98]:.1f} ms, max {max(lags):.1f} ms ({len(lags):,} of {len(acks):,} batches)"
    )


async def _fanout(targets: list[str], docs: list[bytes]) -> float:
    """Record deliveries a second to 100 subscribers, the i-th on ``targets[i % len(targets)]``."""
    count = [0]

    def sink(data: bytes) -> None:
        count[0] += len(pb.SubscribeResponse.FromString(data).publish.records)

    stop = asyncio.Event()
    readies = [asyncio.Event() for _ in range(100)]
    tasks = [
        asyncio.create_task(_subscriber(targets[i % len(targets)], "orders", _fanout_filter(i), sink, r, stop))
        for i, r in enumerate(readies)
    ]
    await asyncio.gather(*(r.wait() for r in readies))
    expected = len(docs) * 10
    start = time.perf_counter()
    rate: Any = _SPAWN.Queue()  # the publisher's rate (kept: the child unpickles it)
    proc = _SPAWN.Process(target=_publish_fast, args=(targets[0], docs, rate))
    proc.start()
    while count[0] < expected and (proc.is_alive() or proc.exitcode == 0) and time.perf_counter() - start < 300:
        await asyncio.sleep(0.05)
    took = time.perf_counter() - start
    proc.join()
    if proc.exitcode != 0:
        raise SystemExit(f"the publisher failed (exit status {proc.exitcode})")
    stop.set()
    for t in tasks:
        t.cancel()
    return count[0] / took


def fanout(n: int, rounds: int, ttl: int) -> None:
    docs = messages(n)
    with workdir() as work, running_cluster(work, "async", ttl, plain_etcd=True) as cluster:
        primary = cluster.primary()
        targets = {
            "primary": [cluster.nodes[primary].target],
            "spread": [cluster.nodes[primary].target, *(s.target for k, s in cluster.nodes.items() if k != primary)],
        }

        def measure(mode: str) -> Figures:
            return {"deliveries/s": asyncio.run(_fanout(targets[mode], docs))}

        runs = alternate(list(targets), rounds, measure, label="fan-out ")
    print_medians(
        runs, f"fan-out: 100 subscribers x ~10 % of {n:,} messages, all on the primary vs spread over 3 nodes"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=200_000, help="messages per publish run")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds")
    parser.add_argument("--cycles", type=int, default=10, help="failover cycles")
    parser.add_argument("--lease-ttl", type=int, default=5, help="[cluster] lease_ttl in seconds")
    parser.add_argument("--parts", default="sync,failover,lag,fanout", help="which parts, comma-separated")
    parser.add_argument("--quick", action="store_true", help="a smoke run: tiny sizes, one round, one cycle, ttl 2 s")
    args = parser.parse_args()
    if args.quick:
        args.messages, args.rounds, args.cycles, args.lease_ttl = 2000, 1, 1, 2
    parts = set(args.parts.split(","))
    if "sync" in parts:
        sync_publish(args.messages, args.rounds, args.lease_ttl)
    if "failover" in parts:
        failover(args.cycles, args.lease_ttl)
    if "lag" in parts:
        lag(args.messages, args.lease_ttl)
    if "fanout" in parts:
        fanout(args.messages // 2, args.rounds, args.lease_ttl)
    return 0


if __name__ == "__main__":
    sys.exit(main())
