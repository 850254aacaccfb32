#!/usr/bin/env python3
"""Benchmarks of issue 3 against a real ``sowd`` process (not part of the test suite).

Starts ``sowd`` on a fresh data directory, then from this (separate) client process:

- publish: N orders of ``tools/demo/make_orders.py``, 100 per request, over one stream;
- query-range: ``/price > 190 AND /side = 'B'`` over the N orders, batch_size 100, every record
  received by the client;
- query-eq: ``/symbol = 'SYM42'`` served by the ``/symbol`` hash index;
- the server's RSS after the load.

Usage: ``python tools/bench/bench_server.py [--orders 1000000] [--rounds 5]`` (``make bench``).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from sowdb import testing
from sowdb.config.model import DEFAULT_RECORD_STORE, RECORD_STORES
from sowdb_client import Client

ROOT = Path(__file__).resolve().parents[2]
MAKE_ORDERS = ROOT / "tools" / "demo" / "make_orders.py"
"""The benchmarks' orders: the tour's generator, which writes the same orders, byte for byte, as the
benchmark dataset's ``make_orders.py`` that the reference figures were measured with (checked for
N = 1000 and 100000)."""


def _orders(n: int) -> list[bytes]:
    """The first ``n`` orders of :data:`MAKE_ORDERS`, as JSON bytes."""
    spec = importlib.util.spec_from_file_location("make_orders", MAKE_ORDERS)
    assert spec and spec.loader, f"dataset generator not found at {MAKE_ORDERS}"
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return [json.dumps(mod.order(i), separators=(",", ":")).encode() for i in range(n)]


BENCH_CONFIG_TOML = """
# The demo config's topics that the server and subscription benchmarks use, as the demo had them
# before it gained a view and a conflated topic of orders: these figures measure the core publish
# path, which a view or conflated topic would add to (bench_views measures that).
[[topic]]
name = "orders"
key = ["/orderId"]
indexes = ["/symbol"]

[[topic]]
name = "quotes"
key = ["/symbol"]
durability = "transient"
"""


def _start(
    data_dir: str, *args: str, env: dict[str, str] | None = None, store: str = DEFAULT_RECORD_STORE
) -> tuple[subprocess.Popen[str], str]:
    """Start ``sowd`` through the one launcher (:mod:`sowdb.testing`) on ``data_dir`` (extra
    ``args`` such as ``--config F``; without one, the benchmarks' own config, written under
    ``data_dir``: their figures were measured on it, with ``store`` as ``[server] record_store``;
    ``env``: variables added to this process's environment); (process, target). Its output is
    drained (and kept) by the launcher."""
    if "--config" not in args:
        config = Path(data_dir) / "sowd.toml"
        config.write_text(f'[server]\nrecord_store = "{store}"\n' + BENCH_CONFIG_TOML)
        args = ("--config", str(config), *args)
        data_dir = str(Path(data_dir) / "data")
    try:
        sowd = testing.start(data_dir, "--log-level", "WARNING", *args, env=env)
    except testing.NotStarted as e:
        raise SystemExit(str(e)) from e
    return sowd.proc, sowd.target


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _settle(pid: int, limit_s: float = 60.0) -> float:
    """Wait until sowd (RocksDB flushes and compactions after the load) is idle."""
    start = time.perf_counter()
    while time.perf_counter() - start < limit_s:
        before = _cpu_seconds(pid)
        time.sleep(1.0)
        if _cpu_seconds(pid) - before < 0.05:
            break
    return time.perf_counter() - start


def _timed_query(c: Client, rounds: int, **kw: object) -> tuple[float, int]:
    times, count = [], 0
    for _ in range(rounds):
        start = time.perf_counter()
        count = sum(1 for _ in c.sow("orders", **kw))  # type: ignore[arg-type]
        times.append(time.perf_counter() - start)
    return statistics.median(times), count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--orders", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--store", choices=RECORD_STORES, default=DEFAULT_RECORD_STORE, help="[server] record_store")
    args = parser.parse_args()
    orders = _orders(args.orders)
    with tempfile.TemporaryDirectory(prefix="sowdb-bench-") as data_dir:
        proc, target = _start(data_dir, store=args.store)
        try:
            with Client(target) as c:
                rss_empty = _rss_mb(proc.pid)
                start = time.perf_counter()
                ack = c.publish("orders", orders, batch_size=100)
                took = time.perf_counter() - start
                assert ack.count == len(orders)
                print(
                    f"publish      {len(orders):,} orders, 100/request: {len(orders) / took:,.0f} msg/s ({took:.2f} s)"
                )
                rss_loaded = _rss_mb(proc.pid)
                updates = [o.replace(b'"qty":', b'"qty":1', 1) for o in orders]  # each replaces its record
                start = time.perf_counter()
                assert c.publish("orders", updates, batch_size=100).count == len(orders)
                took = time.perf_counter() - start
                print(
                    f"update       {len(orders):,} orders, 100/request: {len(orders) / took:,.0f} msg/s ({took:.2f} s)"
                )
                waited = _settle(proc.pid)
                print(f"(waited {waited:.0f} s for RocksDB to finish compacting after the load)")
                c.sow("orders", filter="/orderId = 1", batch_size=1)  # warm the connection
                t, n = _timed_query(c, args.rounds, filter="/price > 190 AND /side = 'B'", batch_size=100)
                print(
                    f"query-range  /price > 190 AND /side = 'B': {t * 1000:.0f} ms for {n:,} records "
                    f"(median of {args.rounds})"
                )
                t, n = _timed_query(c, args.rounds * 4, filter="/symbol = 'SYM42'", batch_size=100)
                print(
                    f"query-eq     /symbol = 'SYM42' (index): {t * 1000:.2f} ms for {n:,} records "
                    f"(median of {args.rounds * 4})"
                )
                t, n = _timed_query(c, args.rounds, filter="/trader = 't42'", batch_size=100)
                print(f"query-scan   /trader = 't42' (no index): {t * 1000:.0f} ms for {n:,} records")
                print(
                    f"server RSS   {rss_empty:.0f} MB empty, {rss_loaded:.0f} MB after loading {len(orders):,} orders"
                )
        finally:
            proc.terminate()
            proc.wait(timeout=30)


if __name__ == "__main__":
    main()
