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
which is what a process holding one store would not pay for the other's objects. ``--history``
gives the topic a history (``history = { window = "1d" }``, as ``make bench-history``'s), so
that each version is kept in its key's chain. ``--split``
runs each store's engine in a process of its own, still publishing batch by batch in turns, so
that nothing process-wide is shared: the collector, the ring of recent documents
(``records._recent``), the stamps.

Usage: ``python tools/bench/bench_store_publish.py [--orders 100000] [--batch 100] [--rounds 3]
[--followed view|subscriber] [--history] [--split]``.
"""

from __future__ import annotations

import argparse
import gc
import multiprocessing
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

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


class _Collector:
    """The collector's CPU time, counted to the store whose call it ran in (``current``)."""

    def __init__(self) -> None:
        self.current = ""
        self.cpu: dict[str, float] = {}
        self._began = 0.0
        gc.callbacks.append(self._note)

    def _note(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._began = time.process_time()
        else:
            self.cpu[self.current] = self.cpu.get(self.current, 0.0) + time.process_time() - self._began

    def take(self, store: str) -> float:
        return self.cpu.pop(store, 0.0)

    def close(self) -> None:
        gc.callbacks.remove(self._note)


class _Publisher:
    """One store's engine on its own data directory, publishing the batches it is told to."""

    def __init__(self, store: str, data_dir: str, followed: str, collector: _Collector, history: bool = False) -> None:
        self.store, self.collector = store, collector
        views = VIEW if followed == "view" else {}
        topics = {"topic": [{**TOPICS["topic"][0], "history": {"window": "1d"}}]} if history else TOPICS
        config = config_from_dict(
            {**topics, **views, "server": {"data_dir": data_dir, "record_store": store}}, source="<bench>"
        )
        self.engine = Engine.open(config, Store(data_dir))
        self.sub: Subscription | None = None
        if followed == "subscriber":
            self.sub = self.engine.placement.subscribe("orders")
        self.docs: list[bytes] = []
        self.cpu = 0.0

    def phase(self, docs: list[bytes]) -> None:
        self.docs = docs
        gc.collect()
        self.cpu = 0.0
        self.collector.take(self.store)

    def publish(self, start: int, batch: int) -> None:
        messages = [InMessage(doc) for doc in self.docs[start : start + batch]]
        self.collector.current = self.store
        began = time.process_time()
        self.engine.publish("orders", messages)
        self.cpu += time.process_time() - began
        self.collector.current = ""
        if self.sub is not None:
            assert len(self.sub.drain()) == len(messages)

    def totals(self) -> tuple[float, float]:
        """This phase's CPU seconds, and the collector's share of them."""
        return self.cpu, self.collector.take(self.store)

    def rows(self) -> dict[str, bytes]:
        """The view's rows, by SowKey (none without the view)."""
        view = self.engine.topics.derived.get("by_symbol")
        return {} if view is None else {k: r.raw for k, r in view.topic.records.items()}

    def close(self) -> None:
        self.engine.close()


def _serve(conn: Connection, store: str, data_dir: str, followed: str, history: bool) -> None:
    """A :class:`_Publisher` in a process of its own (``--split``), driven over ``conn``."""
    collector = _Collector()
    publisher = _Publisher(store, data_dir, followed, collector, history)
    while True:
        call, *args = conn.recv()
        if call == "close":
            publisher.close()
            conn.send(None)
            return
        conn.send(getattr(publisher, call)(*args))


class _Remote:
    """The same calls as :class:`_Publisher`'s, answered by one in a child process."""

    def __init__(self, store: str, data_dir: str, followed: str, history: bool) -> None:
        self.conn, child = multiprocessing.Pipe()
        self.process = multiprocessing.Process(target=_serve, args=(child, store, data_dir, followed, history))
        self.process.start()

    def __getattr__(self, call: str) -> Callable[..., Any]:
        def remote(*args: Any) -> Any:
            self.conn.send((call, *args))
            return self.conn.recv()

        return remote


def _round(
    orders: list[bytes], batch: int, followed: str = "none", split: bool = False, history: bool = False
) -> dict[str, float]:
    """One round on fresh engines: ``phase`` -> arena/objects of messages per CPU-second."""
    phases = {
        "insert": orders,
        "update": [orjson.dumps({**orjson.loads(o), "qty": 7}) for o in orders],
        "update again": [orjson.dumps({**orjson.loads(o), "qty": 8}) for o in orders],
    }
    ratios: dict[str, float] = {}
    collector = _Collector()
    with tempfile.TemporaryDirectory() as one, tempfile.TemporaryDirectory() as two:
        dirs = dict(zip(STORES, (one, two), strict=True))
        sides: dict[str, Any] = {
            store: _Remote(store, dirs[store], followed, history)
            if split
            else _Publisher(store, dirs[store], followed, collector, history)
            for store in STORES
        }
        try:
            for phase, docs in phases.items():
                for side in sides.values():
                    side.phase(docs)
                for i, start in enumerate(range(0, len(docs), batch)):
                    for store in STORES if i % 2 else STORES[::-1]:
                        sides[store].publish(start, batch)
                totals = {store: sides[store].totals() for store in STORES}
                rates = {store: len(docs) / max(totals[store][0], 1e-9) for store in STORES}
                ratios[phase] = rates["arena"] / rates["objects"]
                less = {store: len(docs) / max(totals[store][0] - totals[store][1], 1e-9) for store in STORES}
                ratios[f"{phase} less gc"] = less["arena"] / less["objects"]
                per_msg = {store: totals[store][1] / len(docs) * 1e6 for store in STORES}
                rows = [sides[store].rows() for store in STORES]
                assert rows[0] == rows[1], rows  # both engines' views count the same
                print(
                    f"  {phase:12} objects {rates['objects']:9,.0f} msg/cpu-s   arena {rates['arena']:9,.0f} msg/cpu-s"
                    f"   arena/objects {ratios[phase]:.3f}   gc µs/msg: objects {per_msg['objects']:.2f}"
                    f" arena {per_msg['arena']:.2f}, less gc {ratios[f'{phase} less gc']:.3f}",
                    flush=True,
                )
        finally:
            for side in sides.values():
                side.close()
            collector.close()
    return ratios


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--orders", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--followed", choices=FOLLOWED, default="none", help="what follows the topic")
    parser.add_argument("--split", action="store_true", help="each store in a process of its own")
    parser.add_argument("--history", action="store_true", help="the topic keeps its versions (history)")
    args = parser.parse_args()
    orders = _orders(args.orders)
    rounds = []
    for n in range(args.rounds):
        where = "a process each" if args.split else "one process"
        kept = ", with history" if args.history else ""
        print(
            f"round {n + 1}: {args.orders:,} orders, {args.batch} a publish,"
            f" followed by: {args.followed}, {where}{kept}"
        )
        rounds.append(_round(orders, args.batch, args.followed, args.split, args.history))
    for phase in rounds[0]:
        values = [r[phase] for r in rounds]
        print(f"median {phase:12} arena/objects {statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})")


if __name__ == "__main__":
    main()
