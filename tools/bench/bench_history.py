#!/usr/bin/env python3
"""Benchmarks of issue 5 against a real ``sowd`` process (not part of the test suite).

- historical query: N orders are published into a topic with history, then every order is
  updated once (2N versions). ``/price > 190 AND /side = 'B'`` (batch_size 100, every record
  received) is timed on the current state and as of the bookmark halfway back (1.5 N), where
  half the keys are at their first version and half at their second.
- recovery: with the server stopped, ``sowd rebuild`` replays the 2N-entry journal into
  ``current`` and ``history``: entries per second.
- start-up: time from launching ``sowd`` on that data to its banner (loads current and the
  version chains into memory).

Usage: ``python tools/bench/bench_history.py [--orders 1000000] [--rounds 5]`` (``make bench-history``).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import tempfile
import time
from pathlib import Path

import orjson
from bench_server import _orders, _rss_mb, _settle, _timed_query
from bench_server import _start as start_sowd

from sowdb import testing
from sowdb_client import Client

CONFIG = """
[[topic]]
name = "orders"
key = ["/orderId"]
indexes = ["/symbol"]
history = { window = "1d" }
"""


def _start(data_dir: Path, config: Path) -> tuple[subprocess.Popen[str], str, float]:
    """Start sowd; also returns the seconds until it listened (its start-up time)."""
    started = time.perf_counter()
    proc, target = start_sowd(str(data_dir), "--config", str(config))
    return proc, target, time.perf_counter() - started


def _updated(raw: list[bytes]) -> list[bytes]:
    """Every order once more, with a new price (so the matching set differs between versions)."""
    out = []
    for r in raw:
        d = orjson.loads(r)
        d["price"] = round(300 - d["price"], 2)
        out.append(orjson.dumps(d))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--orders", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    first = _orders(args.orders)
    second = _updated(first)
    n = len(first)
    query = "/price > 190 AND /side = 'B'"
    with tempfile.TemporaryDirectory(prefix="sowdb-bench-history-") as tmp:
        config = Path(tmp) / "sowd.toml"
        config.write_text(CONFIG)
        data = Path(tmp) / "data"
        proc, target, _ = _start(data, config)
        try:
            with Client(target) as c:
                start = time.perf_counter()
                c.publish("orders", first, batch_size=100)
                c.publish("orders", second, batch_size=100)
                took = time.perf_counter() - start
                print(f"load         {2 * n:,} versions of {n:,} orders: {2 * n / took:,.0f} msg/s ({took:.1f} s)")
                print(f"server RSS   {_rss_mb(proc.pid):.0f} MB with {n:,} records and {n:,} past versions")
                _settle(proc.pid)
                half = n + n // 2
                c.sow("orders", filter="/orderId = 1", batch_size=1)  # warm the connection
                now_t, now_n = _timed_query(c, args.rounds, filter=query, batch_size=100)
                then_t, then_n = _timed_query(c, args.rounds, filter=query, batch_size=100, bookmark=str(half))
                print(f"query now    {query}: {now_t * 1000:.0f} ms for {now_n:,} records (median of {args.rounds})")
                print(
                    f"query then   same, as of bookmark {half:,} (halfway back): {then_t * 1000:.0f} ms for "
                    f"{then_n:,} records — {then_t / now_t:.2f}x the current-state query"
                )
        finally:
            proc.terminate()
            proc.wait(timeout=60)
        rebuilt = testing.run("rebuild", "--config", str(config), "--data-dir", str(data), timeout=3600)
        rebuilt.check_returncode()
        m = re.search(r"replayed (\d+) journal entries .* in ([\d.]+) s \(([\d,]+) entries/s\)", rebuilt.stdout)
        assert m, rebuilt.stdout + rebuilt.stderr
        entries, seconds, rate = int(m.group(1)), m.group(2), m.group(3)
        print(f"recovery     sowd rebuild: {entries:,} journal entries in {seconds} s ({rate} entries/s)")
        proc, target, started = _start(data, config)
        proc.terminate()
        proc.wait(timeout=60)
        print(f"start-up     {started:.1f} s to load {n:,} records and their versions into memory")


if __name__ == "__main__":
    main()
