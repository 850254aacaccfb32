#!/usr/bin/env python3
"""What a per-topic record store would cost per record, before building it (issue 30).

``bench_memory.py`` measures the engine as it is: one Python object graph per record
(``StoredRecord``, its JSON ``bytes``, its SowKey, the topic's map entry). This probe builds, in
a fresh child process each, the same N orders of ``tools/demo/make_orders.py`` held three
ways, and reports the RSS growth per record of each (the records only: the ``/symbol`` index,
~26 B, and RocksDB, ~25 B, come on top of every model alike):

- ``objects``: today's model, a ``StoredRecord`` per record in a ``dict`` by SowKey;
- ``arena``: the JSON of all records appended to one ``bytearray``; offset, length, bookmark,
  timestamp and expiry in ``array('q')``/``array('i')`` by slot; a ``dict`` SowKey -> slot and
  a list slot -> SowKey (the key strings and the slot ints stay Python objects);
- ``arena-hash``: as ``arena``, but the keys are no objects at all: a numpy open-addressed table
  of the keys' hashes -> slot (a lookup would check the key against the stored JSON).

and then, over the ``arena``, what reading costs: a ``StoredRecord`` made per record for a
snapshot, and decoding a record from the arena (through a ``memoryview``) against decoding its
own ``bytes``.

Usage: ``python tools/bench/bench_record_store.py [--records 1000000]``.
"""

from __future__ import annotations

import argparse
import gc
import os
import subprocess
import sys
import time
from array import array
from pathlib import Path
from typing import Any

import numpy as np
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_server import _orders, _rss_mb  # a sibling script, not a package

from sowdb.engine.records import StoredRecord

MODELS = ("objects", "arena", "arena-hash")
BOOKMARK0 = 1_000_000_000


class Arena:
    """The JSON of a topic's records in one buffer, their metadata in arrays by slot."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.off, self.length = array("q"), array("i")
        self.bookmark, self.timestamp, self.expiry = array("q"), array("q"), array("q")

    def append(self, raw: bytes, bookmark: int, timestamp_us: int) -> int:
        """Store a record's JSON and metadata; its slot."""
        slot = len(self.off)
        self.off.append(len(self.buf))
        self.length.append(len(raw))
        self.bookmark.append(bookmark)
        self.timestamp.append(timestamp_us)
        self.expiry.append(0)
        self.buf += raw
        return slot


def _load(model: str, orders: list[bytes]) -> Any:
    """The orders held as ``model`` holds them (100 a batch, one timestamp a batch)."""
    bookmark = BOOKMARK0
    if model == "objects":
        records: dict[str, StoredRecord] = {}
        for i in range(0, len(orders), 100):
            now = time.time_ns() // 1000
            for raw in orders[i : i + 100]:
                key = str(orjson.loads(raw)["orderId"])
                records[key] = StoredRecord("orders", key, None, bytes(memoryview(raw)), bookmark, now)
                bookmark += 1
        return records
    arena = Arena()
    if model == "arena":
        slots: dict[str, int] = {}
        keys: list[str] = []
        for i in range(0, len(orders), 100):
            now = time.time_ns() // 1000
            for raw in orders[i : i + 100]:
                key = str(orjson.loads(raw)["orderId"])
                slots[key] = arena.append(raw, bookmark, now)
                keys.append(key)
                bookmark += 1
        return arena, slots, keys
    mask = (1 << max(4, (2 * len(orders)).bit_length())) - 1  # a load factor under 1/2
    table = np.full(mask + 1, -1, dtype=np.int64)
    for i in range(0, len(orders), 100):
        now = time.time_ns() // 1000
        for raw in orders[i : i + 100]:
            h = hash(str(orjson.loads(raw)["orderId"])) & mask
            while table[h] != -1:
                h = (h + 1) & mask
            table[h] = arena.append(raw, bookmark, now)
            bookmark += 1
    return arena, table


def _reads(arena: Arena, keys: list[str]) -> None:
    """What reading the arena costs, CPU time a record."""
    n = len(keys)
    buf, off, length, bm, ts, ex = arena.buf, arena.off, arena.length, arena.bookmark, arena.timestamp, arena.expiry
    t0 = time.process_time()
    snap = [
        StoredRecord("orders", keys[s], None, bytes(buf[off[s] : off[s] + length[s]]), bm[s], ts[s], ex[s])
        for s in range(n)
    ]
    made = time.process_time() - t0
    del snap
    view = memoryview(buf)
    t0 = time.process_time()
    for s in range(n):
        orjson.loads(view[off[s] : off[s] + length[s]])
    from_arena = time.process_time() - t0
    raws = [bytes(view[off[s] : off[s] + length[s]]) for s in range(n)]
    t0 = time.process_time()
    for raw in raws:
        orjson.loads(raw)
    from_bytes = time.process_time() - t0
    print(f"  a StoredRecord made per record (a snapshot): {made / n * 1e9:,.0f} ns/record")
    print(f"  decoding from the arena (memoryview slice): {from_arena / n * 1e9:,.0f} ns/record")
    print(f"  decoding a record's own bytes: {from_bytes / n * 1e9:,.0f} ns/record")


def _child(model: str, n: int) -> None:
    orders = _orders(n)
    json_bytes = sum(map(len, orders)) / n
    gc.collect()
    rss0 = _rss_mb(os.getpid())
    started = time.perf_counter()
    held = _load(model, orders)
    took = time.perf_counter() - started
    gc.collect()
    per = (_rss_mb(os.getpid()) - rss0) * 2**20 / n
    times = f"{per / json_bytes:.2f}x the {json_bytes:.0f} JSON bytes"
    print(f"{model:>10}: RSS growth {per:,.0f} B/record ({times}), built in {took:.1f} s")
    if model == "arena":
        _reads(held[0], held[2])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--model", choices=MODELS, help=argparse.SUPPRESS)  # a child process
    args = parser.parse_args()
    if args.model:
        return _child(args.model, args.records)
    for model in MODELS:
        subprocess.run([sys.executable, __file__, "--records", str(args.records), "--model", model], check=True)


if __name__ == "__main__":
    main()
