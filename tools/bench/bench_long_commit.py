#!/usr/bin/env python3
"""Pings and queries while the writer commits a large staged write, one process vs a group.

A staged write (the data service's ``StageWrite`` then ``CommitStages``: what Spark's
``df.write.format("sowdb")`` sends) is committed in one step of the writer's event loop, which
holds every call that process serves for as long as it takes. With ``sowd --workers N`` a reader
answers health checks (from the writer's health as last seen) and queries of a topic on the
record arena (from the arena) itself, so its clients are not held.

Each round starts a fresh server (one process, then the group, alternating), stages ``--rows``
orders, then commits them while clients, each on a connection of its own, ping (a health check
every 10 ms) and query (a point lookup of the ``orders`` topic every 20 ms). Their round trips
during the commit are reported by the process that held the connection: the writer, or a
reader.

Usage: ``python tools/bench/bench_long_commit.py [--rows 300000] [--rounds 2] [--workers 2]
[--clients 6]`` (``make bench-long-commit``; the test of the benchmarks runs it tiny).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import orjson
from grpc_health.v1 import health_pb2, health_pb2_grpc

from sowdb.testing import Sowd, start
from sowdb.testing.holders import OWN_CONNECTION, connections, group_pids, holder
from sowdb_api.v1 import data_pb2 as dpb
from sowdb_api.v1 import data_pb2_grpc as dgrpc
from sowdb_api.v1 import sow_pb2 as pb
from sowdb_api.v1 import sow_pb2_grpc as sgrpc
from sowdb_client import Client

CONFIG = """
[server]
record_store = "arena"

[[topic]]
name = "orders"
key = ["/id"]

[[topic]]
name = "fills"
key = ["/id"]
"""


class Prober:
    """A client on a connection of its own that pings or queries in a loop on a thread."""

    def __init__(self, sowd: Sowd, pids: list[int], kind: str) -> None:
        port = int(sowd.target.rsplit(":", 1)[1])
        mine = connections(port)
        self.channel = grpc.insecure_channel(sowd.target, options=OWN_CONNECTION)
        grpc.channel_ready_future(self.channel).result(timeout=30)
        new = connections(port) - mine
        self.holder = holder(port, new.pop(), pids) if len(new) == 1 else None
        self.kind = kind
        self.times: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        health: Any = health_pb2_grpc.HealthStub(self.channel)
        sow: Any = sgrpc.SowServiceStub(self.channel)
        ping = health_pb2.HealthCheckRequest()
        lookup = pb.SowRequest(topic="orders", sow_keys=["7"])
        while not self._stop.is_set():
            start = time.perf_counter()
            if self.kind == "ping":
                health.Check(ping, timeout=120)
            else:
                assert len(list(sow.Sow(lookup, timeout=120))) >= 1
            self.times.append(time.perf_counter() - start)
            time.sleep(0.01 if self.kind == "ping" else 0.02)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(150)
        self.channel.close()


def _stage(target: str, rows: int) -> None:
    """Stage ``rows`` orders for the ``fills`` topic under the stage id ``bench``."""

    def requests() -> Iterator[dpb.StageWriteRequest]:
        for first in range(0, rows, 1000):
            messages = [
                pb.PublishMessage(data=orjson.dumps({"id": i, "qty": i % 100, "symbol": f"S{i % 500}"}))
                for i in range(first, min(rows, first + 1000))
            ]
            yield dpb.StageWriteRequest(stage_id="bench", topic="fills", messages=messages)
        yield dpb.StageWriteRequest(stage_id="bench", topic="fills", complete=True)

    with grpc.insecure_channel(target, options=[("grpc.max_send_message_length", -1)]) as channel:
        dgrpc.DataServiceStub(channel).StageWrite(requests(), timeout=600)


def one_round(rows: int, workers: int, clients: int) -> tuple[float, dict[str, list[float]]]:
    """The commit's time, and the probes' round trips during it by (holder, kind)."""
    with tempfile.TemporaryDirectory(prefix="sowdb-bench-") as tmp:
        config = Path(tmp) / "sowd.toml"
        config.write_text(CONFIG)
        args = ("--workers", str(workers)) if workers > 1 else ()
        sowd = start(Path(tmp) / "data", *args, config=config, timeout=120)
        try:
            with Client(sowd.target) as c:
                c.publish("orders", [{"id": i, "qty": i} for i in range(1000)])
            _stage(sowd.target, rows)
            writer, readers = group_pids(sowd.banner) if workers > 1 else (sowd.proc.pid, [])
            probes = [Prober(sowd, [writer, *readers], kind) for _ in range(clients) for kind in ("ping", "query")]
            for p in probes:
                p.start()
            time.sleep(0.5)
            for p in probes:
                p.times.clear()  # from the commit on
            with grpc.insecure_channel(sowd.target) as channel:
                start_s = time.perf_counter()
                dgrpc.DataServiceStub(channel).CommitStages(
                    dpb.CommitStagesRequest(topic="fills", stage_ids=["bench"]), timeout=600
                )
                took = time.perf_counter() - start_s
            for p in probes:
                p.stop()
            out: dict[str, list[float]] = {}
            for p in probes:
                where = "writer" if p.holder == writer else "reader" if p.holder in readers else "unknown"
                out.setdefault(f"{p.kind} ({where})", []).extend(p.times)
            return took, out
        finally:
            sowd.stop()


def _summary(times: list[float]) -> str:
    if not times:
        return "none"
    ms = sorted(t * 1000 for t in times)
    p99 = statistics.quantiles(ms, n=100, method="inclusive")[98] if len(ms) > 1 else ms[0]
    return f"{len(ms)} calls, p50 {statistics.median(ms):,.1f} ms, p99 {p99:,.1f} ms, max {ms[-1]:,.0f} ms"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=300_000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--clients", type=int, default=6, help="pingers, and as many queriers")
    a = ap.parse_args()
    results: dict[int, list[tuple[float, dict[str, list[float]]]]] = {1: [], a.workers: []}
    for _ in range(a.rounds):
        for workers in (1, a.workers):  # alternating: this machine's speed moves run to run
            results[workers].append(one_round(a.rows, workers, a.clients))
    for workers, runs in results.items():
        took = statistics.median(t for t, _ in runs)
        print(f"commit of {a.rows:,} staged rows, workers {workers}: {took:.2f} s (median of {len(runs)})")
        merged: dict[str, list[float]] = {}
        for _, by in runs:
            for name, times in by.items():
                merged.setdefault(name, []).extend(times)
        for name, times in sorted(merged.items()):
            print(f"  {name} during it: {_summary(times)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
