#!/usr/bin/env python3
"""The PySpark pipeline's figures (issue 17) against a real ``sowd`` process, Spark ``local[2]``.

1. read: the orders topic into a schema'd DataFrame (8 columns), count and sum it — rows/s;
2. write: ``df.write.format("sowdb")`` of N rows — rows/s, beside the server's own publish
   rate (the SDK, 100 per request) measured in the same run; while it runs a client pings the
   server every 10 ms, and the longest ping is how long the commit's one step held the server;
   the same commit on the engine in process (no gRPC) says how long its slices and its one
   step took;
3. export: the first N journal entries to Parquet (``format("sowdb.journal")``) — rows/s;
4. streaming: publish at 1,000 msg/s for ``--seconds``, a streaming query (as-fast-as-possible
   trigger) reads them; the delay from each publish to the end of the micro-batch that output
   it, p50 and p99.

Usage: ``python tools/bench/bench_spark.py [--orders 1000000] [--seconds 20]`` (``make bench-spark``).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from sowdb_client import Client

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_server import _orders  # sibling scripts, not a package
from bench_server import _start as start_sowd

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = "orderId long, symbol string, price long, qty long, side string, trader string, venue string, ts long"

CONFIG = """
[[topic]]
name = "orders"
key = ["/orderId"]
indexes = ["/symbol"]

[[topic]]
name = "orders_copy"
key = ["/orderId"]

[[topic]]
name = "ticks"
key = ["/id"]
"""


def _start(root: Path) -> tuple[subprocess.Popen[str], str]:
    config = root / "sowd.toml"
    config.write_text(CONFIG)
    return start_sowd(str(root / "data"), "--config", str(config))


class Pinger:
    """Pings the server every 10 ms from a thread; the longest round trip while it ran."""

    def __init__(self, target: str) -> None:
        self.client = Client(target)
        self.times: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.times.append(self.client.ping(timeout=60))
            time.sleep(0.01)

    def __enter__(self) -> Pinger:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.client.close()


def engine_commit(n: int) -> tuple[float, float]:
    """(seconds preparing in slices, seconds of the one step) of a commit of n staged orders,
    on the engine in process."""
    from sowdb.config import config_from_dict
    from sowdb.engine import Engine, InMessage
    from sowdb.storage import Store

    with tempfile.TemporaryDirectory() as tmp:
        cfg = config_from_dict({"topic": [{"name": "orders", "key": ["/orderId"]}]}, source="<bench>")
        store = Store(Path(tmp) / "data")
        engine = Engine.open(cfg, store)
        docs = _orders(n)
        builder = engine.stages.begin("bench", "orders")
        for i in range(0, n, 2000):
            builder.add([InMessage(d) for d in docs[i : i + 2000]])
        builder.seal()
        writer = engine.writer
        apply = writer.publish_decoded
        step: list[float] = []

        def timed(*args: Any, **kwargs: Any) -> tuple[int, int]:  # publish_decoded's signature, whatever it is
            t = time.perf_counter()
            try:
                return apply(*args, **kwargs)
            finally:
                step.append(time.perf_counter() - t)

        writer.publish_decoded = timed  # type: ignore[method-assign]
        start = time.perf_counter()
        asyncio.run(engine.stages.commit("orders", ["bench"]))
        total = time.perf_counter() - start
        engine.close()
    return total - step[0], step[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--orders", type=int, default=1_000_000)
    parser.add_argument("--seconds", type=float, default=20.0, help="length of the streaming measurement")
    args = parser.parse_args()
    n = args.orders
    from sowdb_spark.session import session

    with tempfile.TemporaryDirectory() as tmp:
        proc, target = _start(Path(tmp))
        try:
            docs = _orders(n)
            with Client(target) as c:
                start = time.perf_counter()
                c.publish("orders", docs)
                publish_rate = n / (time.perf_counter() - start)
            print(f"server publish (SDK, 100/request): {publish_rate:,.0f} msg/s ({n:,} orders)", flush=True)
            spark = session("local[2]", "sowdb-bench")
            opts = {"server": target, "topic": "orders", "partitions": "2"}
            _warm_up(spark, target)

            start = time.perf_counter()
            df = spark.read.format("sowdb").options(**opts).schema(SCHEMA).load()
            count, total = df.selectExpr("count(*)", "sum(qty)").first()  # type: ignore[misc]
            took = time.perf_counter() - start
            assert count == n, count
            print(f"read + count/sum:  {n / took:,.0f} rows/s ({took:.2f} s; sum(qty) = {total:,})", flush=True)

            gen = spark.range(n, numPartitions=2).selectExpr(
                "id AS orderId",
                "concat('SYM', id % 500) AS symbol",
                "100 + id % 97 AS price",
                "id % 1000 AS qty",
                "if(id % 2 = 1, 'B', 'S') AS side",
                "concat('t', id % 50) AS trader",
                "concat('V', id % 7) AS venue",
                "id AS ts",
            )
            with Pinger(target) as pings:
                start = time.perf_counter()
                gen.write.format("sowdb").options(server=target, topic="orders_copy").mode("append").save()
                took = time.perf_counter() - start
            with Client(target) as c:
                copied = next(t.record_count for t in c.list_topics() if t.name == "orders_copy")
            assert copied == n, copied
            print(
                f"df.write:          {n / took:,.0f} rows/s ({took:.2f} s) vs server publish {publish_rate:,.0f} msg/s "
                f"({n / took / publish_rate:.2f}x); longest ping during it {max(pings.times) * 1000:,.0f} ms "
                f"(p99 {statistics.quantiles(pings.times, n=100, method='inclusive')[98] * 1000:,.1f} ms)",
                flush=True,
            )

            out = Path(tmp) / "journal.parquet"
            start = time.perf_counter()
            spark.read.format("sowdb.journal").options(
                server=target, to_bookmark=str(n), partitions="2"
            ).load().write.parquet(str(out))
            took = time.perf_counter() - start
            exported = spark.read.parquet(str(out)).count()
            assert exported == n, exported
            print(f"journal → Parquet: {n / took:,.0f} rows/s ({took:.2f} s)", flush=True)

            delays = _streaming(spark, target, args.seconds)
            if len(delays) < 2:
                raise SystemExit(f"streaming: {len(delays)} message(s) output within {WAIT_S:g} s of the last publish")
            q = statistics.quantiles(delays, n=100, method="inclusive")
            print(
                f"streaming, 1k msg/s: publish → micro-batch output p50 {statistics.median(delays) * 1000:,.0f} ms, "
                f"p99 {q[98] * 1000:,.0f} ms ({len(delays):,} messages)",
                flush=True,
            )
            spark.stop()
        finally:
            proc.terminate()
            proc.wait(30)
    prep, step = engine_commit(n)
    print(f"engine commit of {n:,} staged rows: prepared in slices {prep:.2f} s, one step {step * 1000:,.0f} ms")
    return 0


def _warm_up(spark: Any, target: str) -> None:
    """One small run of each operation first: the first query of a session starts Python workers
    and compiles code paths (seconds), which no later query pays again; the figures are of warm
    queries, each still paying Spark's fixed cost per query (~0.3-0.4 s for a Python source)."""
    small = {"server": target, "topic": "orders", "partitions": "2", "filter": "/orderId < 1000"}
    spark.read.format("sowdb").options(**small).schema(SCHEMA).load().selectExpr("count(*)", "sum(qty)").first()
    spark.range(1000, numPartitions=2).selectExpr("id AS orderId", "id AS qty").write.format("sowdb").options(
        server=target, topic="orders_copy"
    ).mode("append").save()
    with tempfile.TemporaryDirectory() as tmp:
        spark.read.format("sowdb.journal").options(server=target, to_bookmark="1000").load().write.parquet(tmp + "/j")
    with Client(target) as c:
        c.sow_delete("orders_copy", filter="/orderId < 1000")


WAIT_S = 120.0
"""The longest the streaming step waits for its query to start, and then for its output."""


def _streaming(spark: Any, target: str, seconds: float) -> list[float]:
    """Delays (s) from publish to the end of the micro-batch that output each message."""
    delays: list[float] = []
    done = threading.Event()

    def output(batch: Any, batch_id: int) -> None:
        stamps = [r.sent for r in batch.select("sent").collect()]
        now = time.time()
        delays.extend(now - s for s in stamps)

    query = (
        spark.readStream.format("sowdb")
        .options(server=target, topic="ticks", from_bookmark="now")
        .schema("id long, sent double")
        .load()
        .writeStream.foreachBatch(output)
        .trigger(processingTime="0 seconds")
        .start()
    )
    # the query's first (empty) batch places its stream at "now": what is published before is
    # not its; a loaded machine takes far longer than an idle one to get there
    give_up = time.monotonic() + WAIT_S
    while query.lastProgress is None and time.monotonic() < give_up:
        time.sleep(0.1)
    sent = 0

    def publish() -> None:
        nonlocal sent
        with Client(target) as c:
            start = time.perf_counter()
            while time.perf_counter() - start < seconds:
                c.publish("ticks", [{"id": sent + j, "sent": time.time()} for j in range(10)])
                sent += 10
                delay = start + sent / 1000 - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
        done.set()

    publisher = threading.Thread(target=publish)
    publisher.start()
    publisher.join()
    give_up = time.monotonic() + WAIT_S
    while len(delays) < sent and time.monotonic() < give_up:  # every message output
        time.sleep(0.1)
    query.stop()
    return delays


if __name__ == "__main__":
    sys.exit(main())
