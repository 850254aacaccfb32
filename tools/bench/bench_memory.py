#!/usr/bin/env python3
"""Where a stored record's memory goes (issue 20; SPEC §10 goal: RSS ≤ 3x the JSON bytes).

Loads N orders of ``../shared/bench/make_orders.py`` into an engine in this process (a real
RocksDB under a temporary directory, the topic of ``make bench``: ``orders`` keyed by
``/orderId``, a ``/symbol`` hash index), 100 per publish as the server applies them, and reports:

1. RSS growth per record, against the JSON bytes of a record;
2. the Python objects that hold it, per record: the ``StoredRecord``, its decoded ``data`` dict
   and the values in it, the ``raw`` JSON bytes, the SowKey, the topic's map and the hash index
   (objects shared between records — interned keys, small ints — counted once);
3. the protocol layer's cached encoding (``StoredRecord.wire``) once every record was sent;
4. the top allocation sites (tracemalloc) of loading N more records into a second topic.

What RSS holds beyond the Python objects is RocksDB's (memtables, block cache) and the
allocator's free lists.

Usage: ``python tools/bench/bench_memory.py [--records 200000] [--top 12]``.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import tempfile
import tracemalloc
from collections.abc import Iterable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_server import _orders, _rss_mb  # a sibling script, not a package

from sowdb.api.wire import record_element
from sowdb.config import config_from_dict
from sowdb.engine import Engine, InMessage
from sowdb.engine.state.sow_topic import SowTopic
from sowdb.storage import Store

TOPICS = {
    "topic": [
        {"name": "orders", "key": ["/orderId"], "indexes": ["/symbol"]},
        {"name": "traced", "key": ["/orderId"], "indexes": ["/symbol"]},
    ]
}


class Sizes:
    """Bytes of distinct objects (``sys.getsizeof``), by category."""

    def __init__(self) -> None:
        self.seen: set[int] = set()
        self.bytes: dict[str, int] = {}

    def add(self, category: str, objs: Iterable[Any]) -> None:
        total = 0
        seen = self.seen
        for o in objs:
            if id(o) not in seen:
                seen.add(id(o))
                total += sys.getsizeof(o)
        self.bytes[category] = self.bytes.get(category, 0) + total


def _values(data: Any) -> Iterable[Any]:
    """The keys and values inside a decoded document (nested ones too)."""
    stack = [data]
    while stack:
        d = stack.pop()
        items = d.items() if isinstance(d, dict) else enumerate(d)
        for k, v in items:
            if isinstance(k, str):
                yield k
            yield v
            if isinstance(v, dict | list):
                stack.append(v)


def breakdown(topic: SowTopic) -> Sizes:
    recs = list(topic.records.values())
    s = Sizes()
    s.add("StoredRecord objects", recs)
    s.add("data: the decoded dicts", (r.data for r in recs))
    s.add("data: keys and values inside them", (v for r in recs for v in _values(r.data)))
    s.add("raw: the JSON bytes", (r.raw for r in recs))
    s.add("sow_key strings", (r.sow_key for r in recs))
    s.add("the topic's map of records", [topic.records])
    for index in topic.indexes.values():
        buckets = list(index._map.values())
        s.add(f"hash index {index.path}: map and buckets", [index._map, *buckets])
    return s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--top", type=int, default=12)
    args = parser.parse_args()
    orders = _orders(args.records)
    n = len(orders)
    json_bytes = sum(map(len, orders)) / n
    with tempfile.TemporaryDirectory(prefix="sowdb-memory-") as tmp:
        cfg = config_from_dict({**TOPICS, "server": {"data_dir": tmp}}, source="<bench_memory>")
        engine = Engine.open(cfg, Store(tmp))
        try:
            gc.collect()
            rss0 = _rss_mb(os.getpid())
            for i in range(0, n, 100):
                engine.publish("orders", [InMessage(raw) for raw in orders[i : i + 100]])
            gc.collect()
            rss1 = _rss_mb(os.getpid())
            grown = (rss1 - rss0) * 2**20
            print(f"{n:,} orders, {json_bytes:.0f} JSON bytes each")
            print(f"RSS growth: {grown / n:,.0f} B/record ({grown / n / json_bytes:.1f}x JSON)\n")
            topic = engine.topics.sow["orders"]
            sizes = breakdown(topic)
            total = sum(sizes.bytes.values())
            print("Python objects per record (sys.getsizeof, shared objects once):")
            for name, b in sorted(sizes.bytes.items(), key=lambda kv: -kv[1]):
                print(f"  {b / n:7.0f} B  {b / total * 100:4.0f} %  {name}")
            print(f"  {total / n:7.0f} B  total; RSS growth beyond it: {(grown - total) / n:,.0f} B/record")
            recs = list(topic.records.values())
            for r in recs:
                record_element(r)
            gc.collect()
            wire = sum(sys.getsizeof(r.wire) for r in recs)
            print(
                f"\nOnce every record was sent: + {wire / n:.0f} B/record of cached encodings (StoredRecord.wire); "
                f"RSS then {(_rss_mb(os.getpid()) - rss0) * 2**20 / n:,.0f} B/record"
            )
            tracemalloc.start()
            before = tracemalloc.take_snapshot()
            for i in range(0, n, 100):
                engine.publish("traced", [InMessage(raw) for raw in orders[i : i + 100]])
            after = tracemalloc.take_snapshot()
            tracemalloc.stop()
            print(f"\nTop allocation sites of loading {n:,} more records (tracemalloc):")
            for stat in after.compare_to(before, "lineno")[: args.top]:
                frame = stat.traceback[0]
                where = f"{Path(frame.filename).name}:{frame.lineno}"
                print(f"  {stat.size_diff / n:7.0f} B/record  {stat.count_diff / n:5.2f} blocks/record  {where}")
        finally:
            engine.close()


if __name__ == "__main__":
    main()
