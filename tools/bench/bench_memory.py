#!/usr/bin/env python3
"""Where a stored record's memory goes (issue 20; SPEC §10 goal: RSS ≤ 3x the JSON bytes).

Loads N orders of ``tools/demo/make_orders.py`` into an engine in this process (a real
RocksDB under a temporary directory, the topic of ``make bench``: ``orders`` keyed by
``/orderId``, a ``/symbol`` hash index), 100 per publish as the server applies them, and reports:

1. RSS growth per record, against the JSON bytes of a record, after loading (and the load
   rate), after the peer queries of ``peers.py`` ran twice (their columns built between), once
   every record was sent, and after a restart (a child process opening the same store: the
   growth and how long ``Engine.open`` took);
2. the Python objects that hold it, per record, after the restart: the ``StoredRecord``, the
   decoded ``data`` dicts kept (only the recent versions', issue 30) and the values in them, the
   ``raw`` JSON bytes, the SowKey, the topic's map and the hash index (objects shared between
   records — interned keys, small ints — counted once);
3. the top allocation sites (tracemalloc) of loading N more records into a second topic.

What RSS holds beyond the Python objects is RocksDB's (memtables, block cache) and the
allocator's free lists.

Usage: ``python tools/bench/bench_memory.py [--records 200000] [--top 12] [--store arena]
[--columns-first]``
(``--top 0``: no allocation sites, the slow part)
(``make bench-memory``; ``--store``: the ``[server] record_store`` measured, issue 39).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Iterable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_server import _orders, _rss_mb  # a sibling script, not a package

from sowdb.api.wire import record_element, records_frame
from sowdb.config import config_from_dict
from sowdb.config.model import DEFAULT_RECORD_STORE, RECORD_STORES
from sowdb.engine import Engine, InMessage, QueryOptions, RecordBatch
from sowdb.engine.state.arena_topic import ArenaTopic
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
    """What one topic holds: its arena's files by kind (the pages the RAM file system holds for
    them), its indexes and columns, and the Python objects left per record."""
    s = Sizes()
    if isinstance(topic, ArenaTopic):
        for path in sorted(topic.store.arena.directory.iterdir()):
            kind = path.name.rstrip("0123456789.-")
            s.bytes[f"arena: {kind} files"] = s.bytes.get(f"arena: {kind} files", 0) + path.stat().st_blocks * 512
        for index in topic.slot_indexes.values():
            s.bytes[f"hash index {index.path}: codes by slot"] = index.by_slot.nbytes
            s.add(f"hash index {index.path}: its terms", [index.codes, *index.codes])
        if topic.columns is not None:
            columns = topic.columns.by_path.values()
            s.bytes["columns"] = sum(c.kind.nbytes + c.num.nbytes + c.code.nbytes for c in columns)
        s.add("the history's past versions", topic._past.values())
        return s
    recs = list(topic.records.values())
    s.add("StoredRecord objects", recs)
    # the decoded documents held: the recent versions' (StoredRecord.kept); before issue 30, every record's
    held = [d for d in (r.kept if hasattr(r, "kept") else r.data for r in recs) if d is not None]
    s.add("data: the decoded dicts kept (recent versions)", held)
    s.add("data: keys and values inside them", (v for d in held for v in _values(d)))
    s.add("raw: the JSON bytes", (r.raw for r in recs))
    s.add("sow_key strings", (r.sow_key for r in recs))
    s.add("the topic's map of records", [topic.records])
    return s


QUERIES = ("/price > 190 AND /side = 'B'", "/symbol = 'SYM42'", "/trader = 't42'", "/orderId = 777")
"""The peer queries of ``peers.py`` (range, indexed, unindexed, point)."""


async def _query(engine: Engine, flt: str) -> int:
    """Run one query as the server does, encoding what it sends; how many records it sent."""
    sent = 0
    async for event in engine.sow(QueryOptions(topic="orders", filter=flt, batch_size=1000)):
        if isinstance(event, RecordBatch):
            records_frame(event.records)
            sent += len(event.records)
    return sent


def _queries(engine: Engine, *, columns_first: bool = False) -> list[tuple[str, int, float]]:
    """The peer queries, twice (the first asks for columns, built before the second; with
    ``columns_first`` built before both, as a server's upkeep builds them after a load: a
    scan of 10M records without them runs past a query's budget); the second pass's
    (filter, records sent, seconds)."""
    if not columns_first:
        for flt in QUERIES:
            asyncio.run(_query(engine, flt))
    while engine.build_columns():
        pass
    timed = []
    for flt in QUERIES:
        started = time.perf_counter()
        sent = asyncio.run(_query(engine, flt))
        timed.append((flt, sent, time.perf_counter() - started))
    return timed


def _fresh(raw: bytes) -> bytes:
    """A copy of a message's bytes, as a server's request parsing makes one: a record keeps the
    bytes it was published with, so publishing the generator's own objects would leave the JSON
    (~141 B a record) out of the RSS growth after loading."""
    return bytes(memoryview(raw))


def _rocksdb(store: Store) -> str:
    """RocksDB's memory (MiB), counted: the write buffers of every family, and the block cache
    (one, shared by the families: ``[server] memtable_bytes``, ``block_cache_bytes``)."""
    views = [store.db.family(f) for f in ("journal", "current", "history", "meta")]
    memtables = sum(v.property_int_value("rocksdb.size-all-mem-tables") or 0 for v in views)
    cache = views[0].property_int_value("rocksdb.block-cache-usage") or 0
    return f"RocksDB memtables {memtables / 2**20:.1f} MiB, block cache {cache / 2**20:.1f} MiB"


def _growth(rss0: float, n: int, json_bytes: float) -> str:
    """RSS growth since ``rss0`` (MiB) per record and against the JSON bytes."""
    gc.collect()
    per = (_rss_mb(os.getpid()) - rss0) * 2**20 / n
    return f"{per:,.0f} B/record ({per / json_bytes:.1f}x JSON)"


def _restart(data_dir: str, store: str) -> None:
    """The child process of ``--reopen``: RSS growth of opening the store the parent wrote."""
    gc.collect()
    rss0 = _rss_mb(os.getpid())
    started = time.perf_counter()
    cfg = config_from_dict({**TOPICS, "server": {"data_dir": data_dir, "record_store": store}}, source="<bench_memory>")
    db = Store(data_dir)
    engine = Engine.open(cfg, db)
    try:
        gc.collect()
        n = len(engine.topics.sow["orders"].records)
        print(f"{(_rss_mb(os.getpid()) - rss0) * 2**20 / n:.0f} {time.perf_counter() - started:.2f} {_rocksdb(db)}")
    finally:
        engine.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--store", choices=RECORD_STORES, default=DEFAULT_RECORD_STORE, help="[server] record_store")
    parser.add_argument(
        "--columns-first", action="store_true", help="build the columns before the first queries (10M records)"
    )
    parser.add_argument("--reopen", help=argparse.SUPPRESS)  # the restart's child process
    args = parser.parse_args()
    if args.reopen:
        return _restart(args.reopen, args.store)
    orders = _orders(args.records)
    n = len(orders)
    json_bytes = sum(map(len, orders)) / n
    with tempfile.TemporaryDirectory(prefix="sowdb-memory-") as tmp:
        server = {"data_dir": tmp, "record_store": args.store}
        cfg = config_from_dict({**TOPICS, "server": server}, source="<bench_memory>")
        store = Store(tmp)
        engine = Engine.open(cfg, store)
        try:
            gc.collect()
            rss0 = _rss_mb(os.getpid())
            started = time.perf_counter()
            for i in range(0, n, 100):
                engine.publish("orders", [InMessage(_fresh(raw)) for raw in orders[i : i + 100]])
            took = time.perf_counter() - started
            print(f"{n:,} orders, {json_bytes:.0f} JSON bytes each; loaded at {n / took:,.0f} records/s")
            growth = _growth(rss0, n, json_bytes)
            print(f"RSS growth after loading: {growth}; {_rocksdb(store)}")
            started = time.perf_counter()
            timed = _queries(engine, columns_first=args.columns_first)
            took = time.perf_counter() - started
            for flt, sent, secs in timed:
                print(f"  query {flt!r}: {sent:,} records in {secs * 1000:,.0f} ms (in process, encoded as sent)")
            growth = _growth(rss0, n, json_bytes)
            growth = f"{growth}; {_rocksdb(store)}"
            how = "columns built first" if args.columns_first else "twice, columns built between"
            print(f"RSS growth after the peer queries ({how}, {took:.1f} s): {growth}")
            topic = engine.topics.sow["orders"]
            for r in topic.records.values():
                record_element(r)
            print(f"RSS growth once every record was sent: {_growth(rss0, n, json_bytes)}")
            engine.close()
            child = subprocess.run(
                [sys.executable, __file__, "--reopen", tmp, "--store", args.store],
                check=True,
                capture_output=True,
                text=True,
            ).stdout.split(maxsplit=2)
            per, took_s = float(child[0]), float(child[1])
            times = f"{per / json_bytes:.1f}x JSON"
            print(f"RSS growth after a restart: {per:,.0f} B/record ({times}), open {took_s} s; {child[2].strip()}")
            engine = Engine.open(cfg, Store(tmp))
            topic = engine.topics.sow["orders"]
            print()
            sizes = breakdown(topic)
            total = sum(sizes.bytes.values())
            print("What the topic holds per record after the restart (arena: pages held; objects: getsizeof):")
            for name, b in sorted(sizes.bytes.items(), key=lambda kv: -kv[1]):
                print(f"  {b / n:7.0f} B  {b / total * 100:4.0f} %  {name}")
            print(f"  {total / n:7.0f} B  total")
            if not args.top:
                return
            tracemalloc.start()
            before = tracemalloc.take_snapshot()
            for i in range(0, n, 100):
                engine.publish("traced", [InMessage(_fresh(raw)) for raw in orders[i : i + 100]])
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
