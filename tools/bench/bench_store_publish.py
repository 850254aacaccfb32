#!/usr/bin/env python3
"""Publish into the record arena beside the object store, in one process (issue 39).

Two engines, one per ``[server] record_store`` (``objects``, ``arena``), each on its own data
directory with the benchmarks' ``orders`` topic (keyed by ``/orderId``, indexed by ``/symbol``),
publish the same orders batch by batch, alternating which goes first, and each call's CPU time
is counted to its store (``time.process_time``): on a shared machine the ratio holds where the
absolute rates do not, as both stores run in the same minutes. Phases: the orders inserted, then
updated twice (each message replacing its record). Reports each store's messages per
CPU-second and arena/objects, per round, and the medians.

``--followed`` makes the publish one that something follows, so that the writer builds each
version as a record and hands the changes on (``FanOut.wanted``), on both engines alike:
``view``, a view counting the orders by ``/symbol`` (the versions a publish ends are read for
their group); ``subscriber``, a subscription to ``orders`` placed in the engine, its queue
drained after each publish (outside the CPU time counted). Without it nobody follows the topic
and the writer takes its lean path (``SowTopic.put_docs``).

The garbage collector's passes run inside whichever store's call crosses its threshold, and a
full pass scans both stores' objects (the objects' records are most of them): each phase also
prints the collector's CPU time counted to each store, and the ratio without it (``less gc``),
which is what a process holding one store would not pay for the other's objects.

Usage: ``python tools/bench/bench_store_publish.py [--orders 100000] [--batch 100] [--rounds 3]
[--followed view|subscriber]``.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import tempfile
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_server import _orders  # a sibling script, not a package

from sowdb.config import config_from_dict
from sowdb.engine import Engine, InMessage
from sowdb.engine.live.subscription import Subscription
from sowdb.storage import Store

TOPICS = {"topic": [{"name": "orders", "key": ["/orderId"], "indexes": ["/symbol"]}]}
VIEW = {
    "view": [
        {
            "name": "by_symbol",
            "underlying": "orders",
            "grouping": ["/symbol"],
            "projection": ["/symbol", "COUNT(/orderId) AS /orders"],
        }
    ]
}
STORES = ("objects", "arena")
FOLLOWED = ("none", "view", "subscriber")


def _round(orders: list[bytes], batch: int, followed: str = "none") -> dict[str, float]:
    """One round on fresh engines: ``phase`` -> arena/objects of messages per CPU-second."""
    phases = {
        "insert": orders,
        "update": [orjson.dumps({**orjson.loads(o), "qty": 7}) for o in orders],
        "update again": [orjson.dumps({**orjson.loads(o), "qty": 8}) for o in orders],
    }
    ratios: dict[str, float] = {}
    current = [""]  # the store whose call is running: the collector's passes are counted to it
    collecting = [0.0]
    gc_cpu = dict.fromkeys(STORES, 0.0)

    def collector(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collecting[0] = time.process_time()
        else:
            gc_cpu[current[0]] = gc_cpu.get(current[0], 0.0) + time.process_time() - collecting[0]

    gc.callbacks.append(collector)
    with tempfile.TemporaryDirectory() as one, tempfile.TemporaryDirectory() as two:
        engines = {}
        subs: dict[str, Subscription] = {}
        for store, data_dir in zip(STORES, (one, two), strict=True):
            views = VIEW if followed == "view" else {}
            config = config_from_dict(
                {**TOPICS, **views, "server": {"data_dir": data_dir, "record_store": store}}, source="<bench>"
            )
            engines[store] = Engine.open(config, Store(data_dir))
            if followed == "subscriber":
                subs[store] = engines[store].placement.subscribe("orders")
        try:
            for phase, docs in phases.items():
                cpu = dict.fromkeys(STORES, 0.0)
                gc.collect()
                gc_cpu.update(dict.fromkeys(STORES, 0.0))
                for i, start in enumerate(range(0, len(docs), batch)):
                    for store in STORES if i % 2 else STORES[::-1]:
                        messages = [InMessage(doc) for doc in docs[start : start + batch]]
                        current[0] = store
                        began = time.process_time()
                        engines[store].publish("orders", messages)
                        cpu[store] += time.process_time() - began
                        current[0] = ""
                        if subs:
                            assert len(subs[store].drain()) == len(messages)
                gc_cpu.pop("", None)  # passes outside the calls timed
                rates = {store: len(docs) / max(cpu[store], 1e-9) for store in STORES}
                ratios[phase] = rates["arena"] / rates["objects"]
                less = {store: len(docs) / max(cpu[store] - gc_cpu[store], 1e-9) for store in STORES}
                ratios[f"{phase} less gc"] = less["arena"] / less["objects"]
                per_msg = {store: gc_cpu[store] / len(docs) * 1e6 for store in STORES}
                if followed == "view":  # both engines' views count the same
                    counts = [_view_rows(engines[store]) for store in STORES]
                    assert counts[0] == counts[1], counts
                print(
                    f"  {phase:12} objects {rates['objects']:9,.0f} msg/cpu-s   arena {rates['arena']:9,.0f} msg/cpu-s"
                    f"   arena/objects {ratios[phase]:.3f}   gc µs/msg: objects {per_msg['objects']:.2f}"
                    f" arena {per_msg['arena']:.2f}, less gc {ratios[f'{phase} less gc']:.3f}",
                    flush=True,
                )
        finally:
            gc.callbacks.remove(collector)
            for engine in engines.values():
                engine.close()
    return ratios


def _view_rows(engine: Engine) -> dict[str, bytes]:
    """The view's rows, by SowKey."""
    return {k: r.raw for k, r in engine.topics.derived["by_symbol"].topic.records.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--orders", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--followed", choices=FOLLOWED, default="none", help="what follows the topic")
    args = parser.parse_args()
    orders = _orders(args.orders)
    rounds = []
    for n in range(args.rounds):
        print(f"round {n + 1}: {args.orders:,} orders, {args.batch} a publish, followed by: {args.followed}")
        rounds.append(_round(orders, args.batch, args.followed))
    for phase in rounds[0]:
        values = [r[phase] for r in rounds]
        print(f"median {phase:12} arena/objects {statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})")


if __name__ == "__main__":
    main()
