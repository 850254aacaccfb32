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

``--store both`` runs the whole of it on each record store, alternating for ``--store-rounds``
rounds, and prints the medians and arena/objects, with the server's CPU per figure (a rate per
CPU-second: on a shared machine it moves less than the wall clock).

Usage: ``python tools/bench/bench_history.py [--orders 1000000] [--rounds 5] [--store arena|objects|both]
[--store-rounds 3]`` (``make bench-history``).
"""

from __future__ import annotations

import argparse
import re
import resource
import subprocess
import tempfile
import time
from pathlib import Path

import orjson
from alternating import Figures, add_store_option, alternate, print_medians, server_section, stores
from bench_server import _cpu_seconds, _orders, _rss_mb, _settle, _timed_query
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
    parser.add_argument("--rounds", type=int, default=5, help="repetitions of each query (their median)")
    add_store_option(parser)
    parser.add_argument("--store-rounds", type=int, default=3, help="with --store both: alternating rounds")
    args = parser.parse_args()
    first = _orders(args.orders)
    second = _updated(first)
    modes = stores(args.store)
    if len(modes) == 1:
        measure(modes[0], first, second, args.rounds)
        return
    runs = alternate(modes, args.store_rounds, lambda store: measure(store, first, second, args.rounds, store))
    print_medians(runs, f"{len(first):,} orders, medians of {args.store_rounds} alternating rounds")


def measure(store: str, first: list[bytes], second: list[bytes], rounds: int, label: str = "") -> Figures:
    """One fresh ``sowd`` with ``store``: load, the query now and then, ``sowd rebuild``, start-up;
    printed (each line headed by ``label``) and returned, with the server's CPU for each."""
    n = len(first)
    query = "/price > 190 AND /side = 'B'"
    out: Figures = {}
    head = f"{label:8} " if label else ""
    with tempfile.TemporaryDirectory(prefix="sowdb-bench-history-") as tmp:
        config = Path(tmp) / "sowd.toml"
        config.write_text(server_section(store) + CONFIG)
        data = Path(tmp) / "data"
        proc, target, _ = _start(data, config)
        try:
            with Client(target) as c:
                start, cpu = time.perf_counter(), _cpu_seconds(proc.pid)
                c.publish("orders", first, batch_size=100)
                c.publish("orders", second, batch_size=100)
                took, cpu = time.perf_counter() - start, _cpu_seconds(proc.pid) - cpu
                out["load msg/s"], out["load msg/cpu-s"] = 2 * n / took, 2 * n / max(cpu, 1e-9)
                print(
                    f"{head}load         {2 * n:,} versions of {n:,} orders: {2 * n / took:,.0f} msg/s ({took:.1f} s)"
                )
                out["RSS MB"] = _rss_mb(proc.pid)
                print(f"{head}server RSS   {out['RSS MB']:.0f} MB with {n:,} records and {n:,} past versions")
                _settle(proc.pid)
                half = n + n // 2
                c.sow("orders", filter="/orderId = 1", batch_size=1)  # warm the connection
                cpu = _cpu_seconds(proc.pid)
                now_t, now_n = _timed_query(c, rounds, filter=query, batch_size=100)
                out["now ms"], out["now server CPU ms"] = now_t * 1000, (_cpu_seconds(proc.pid) - cpu) / rounds * 1000
                cpu = _cpu_seconds(proc.pid)
                then_t, then_n = _timed_query(c, rounds, filter=query, batch_size=100, bookmark=str(half))
                out["then ms"], out["then server CPU ms"] = (
                    then_t * 1000,
                    (_cpu_seconds(proc.pid) - cpu) / rounds * 1000,
                )
                print(f"{head}query now    {query}: {now_t * 1000:.0f} ms for {now_n:,} records (median of {rounds})")
                print(
                    f"{head}query then   same, as of bookmark {half:,} (halfway back): {then_t * 1000:.0f} ms for "
                    f"{then_n:,} records — {then_t / now_t:.2f}x the current-state query"
                )
        finally:
            proc.terminate()
            proc.wait(timeout=60)
        cpu = _children_cpu()
        rebuilt = testing.run("rebuild", "--config", str(config), "--data-dir", str(data), timeout=3600)
        cpu = _children_cpu() - cpu
        rebuilt.check_returncode()
        m = re.search(r"replayed (\d+) journal entries .* in ([\d.]+) s \(([\d,]+) entries/s\)", rebuilt.stdout)
        assert m, rebuilt.stdout + rebuilt.stderr
        entries, seconds, rate = int(m.group(1)), m.group(2), m.group(3)
        out["rebuild entries/s"], out["rebuild entries/cpu-s"] = float(rate.replace(",", "")), entries / max(cpu, 1e-9)
        print(f"{head}recovery     sowd rebuild: {entries:,} journal entries in {seconds} s ({rate} entries/s)")
        proc, target, started = _start(data, config)
        out["start-up s"], out["start-up CPU s"] = started, _cpu_seconds(proc.pid)
        proc.terminate()
        proc.wait(timeout=60)
        print(f"{head}start-up     {started:.1f} s to load {n:,} records and their versions into memory")
    return out


def _children_cpu() -> float:
    """CPU seconds of this process's ended (waited-for) children: ``sowd rebuild``'s, taken around it."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


if __name__ == "__main__":
    main()
