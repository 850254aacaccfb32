#!/usr/bin/env python3
"""What a topic's record arena (``sowdb.engine.arena``, issue 39) costs per record.

Loads N orders of ``tools/demo/make_orders.py`` into a ``TopicArena`` in a fresh child process,
100 a batch as the server's publishes come, keyed by ``orderId``, one bookmark a message and one
timestamp a batch, and reports:

- the RSS growth per record, and how many times the orders' JSON bytes that is (issue 39's target:
  at most 2x), with what the arena's own structures hold (slot arrays, key table, segments);
- the build time (records a second);
- a chunked scan of a pin with the project's compiled filters (``sowdb.expr.compile_filter``),
  4,096 records per ``orjson.loads``, in CPU ns a record, beside the same filter over each
  record's own bytes decoded one by one (what the engine's scans do today), in alternating
  rounds (medians: the ratio holds on a loaded machine where the absolute rates do not);
- point reads: ``get`` + ``raw`` of random keys, and a ``StoredRecord`` made on demand.

The arena's files go to a directory under ``/dev/shm`` (RAM, as the engine will use it; pass
``--dir`` for another): their pages are the process's shared memory and count in its RSS.

Usage: ``python tools/bench/bench_arena.py [--records 1000000]``.
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_server import _orders, _rss_mb  # a sibling script, not a package

from sowdb.engine.arena import TopicArena
from sowdb.expr import compile_filter

BOOKMARK0 = 1_000_000_000
FILTERS = ("/trader = 't42'", "/trader LIKE 't4%' OR /qty % 7 = 3")


def _load(arena: TopicArena, orders: list[bytes], batch: int) -> None:
    bookmark = BOOKMARK0
    for i in range(0, len(orders), batch):
        raws = [bytes(memoryview(r)) for r in orders[i : i + batch]]  # a request's own copies
        keys = [str(j).encode() for j in range(i, i + len(raws))]  # orderId is the order's index
        arena.put_batch(keys, raws, bookmark, time.time_ns() // 1000)
        bookmark += len(raws)


def _child(n: int, batch: int, base: Path, rounds: int) -> None:
    orders = _orders(n)
    json_bytes = sum(map(len, orders)) / n
    matchers = [compile_filter(text).matches for text in FILTERS]  # imports and compiling before the baseline
    directory = Path(tempfile.mkdtemp(prefix="bench-arena-", dir=base))
    try:
        gc.collect()
        rss0 = _rss_mb(os.getpid())
        started = time.perf_counter()
        arena = TopicArena(directory / "orders", "orders")
        _load(arena, orders, batch)
        took = time.perf_counter() - started
        gc.collect()
        per = (_rss_mb(os.getpid()) - rss0) * 2**20 / n
        print(f"{n:,} orders of {json_bytes:.0f} JSON bytes, {batch} a batch, arena in {base}:")
        print(f"  RSS growth {per:,.0f} B/record = {per / json_bytes:.2f}x the JSON bytes (target <= 2x)")
        slot_bytes = sum(getattr(arena.slots, f).itemsize for f in arena.slots.__annotations__)
        table = (arena.table.mask + 1) * 4
        print(
            f"  of which: slot arrays {slot_bytes} B/record, key table {table / n:.1f} B/record "
            f"({arena.table.keys / (arena.table.mask + 1):.2f} full), "
            f"JSON segments {sum(arena.json.used.values()) / n:.1f} B/record (with commas), "
            f"key segments {sum(arena.keys.used.values()) / n:.1f} B/record"
        )
        print(f"  built in {took:.2f} s: {n / took:,.0f} records/s")
        pin = arena.pin()
        for text, match in zip(FILTERS, matchers, strict=True):
            arena_ns, each_ns = [], []
            for _ in range(rounds):
                t0 = time.process_time()
                hits = sum(1 for _, docs in pin.scan() for d in docs if match(d, None))
                arena_ns.append((time.process_time() - t0) / n * 1e9)
                t0 = time.process_time()
                each = sum(1 for raw in orders if match(orjson.loads(raw), None))
                each_ns.append((time.process_time() - t0) / n * 1e9)
                assert each == hits
            a, e = statistics.median(arena_ns), statistics.median(each_ns)
            print(
                f"  scan {text!r}: {hits:,} hits, {a:,.0f} CPU ns/record ({1e9 / a:,.0f} records/s) chunked, "
                f"{e:,.0f} record by record: {a / e:.2f}x"
            )
        keys = [str(k).encode() for k in random.Random(1).sample(range(n), min(n, 20_000))]
        t0 = time.process_time()
        for key in keys:
            arena.raw(arena.get(key))
        point = time.process_time() - t0
        t0 = time.process_time()
        for key in keys:
            arena.record(arena.get(key))
        made = time.process_time() - t0
        print(
            f"  point read get + raw: {point / len(keys) * 1e6:.2f} CPU us; "
            f"get + record (a StoredRecord): {made / len(keys) * 1e6:.2f} CPU us"
        )
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=100, help="messages a publish (default 100)")
    shm = Path("/dev/shm")
    parser.add_argument("--dir", type=Path, default=shm if shm.is_dir() else Path(tempfile.gettempdir()))
    parser.add_argument("--rounds", type=int, default=3, help="scan rounds, medians reported (default 3)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return _child(args.records, args.batch, args.dir, args.rounds)
    command = [sys.executable, __file__, "--child", "--records", str(args.records), "--batch", str(args.batch)]
    command += ["--rounds", str(args.rounds)]
    subprocess.run([*command, "--dir", str(args.dir)], check=True)


if __name__ == "__main__":
    main()
