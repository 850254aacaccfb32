#!/usr/bin/env python3
"""Benchmarks of issue 6: pages and views on the engine in this process, and a view through sowd.

The in-process figures use RocksDB in a temporary directory and no gRPC:

- page upkeep: N orders, one paginated subscription (top 20 by ``/price DESC``), then updates
  (new prices for random orders, 100 per publish). The time spent keeping the page — the
  shared result set's O(log n) updates plus the window refreshes — is measured around exactly
  those calls and expressed as the CPU share it costs at 10k updates/s.
- view upkeep: a view ``SUM(/qty), COUNT(/orderId)`` grouped by ``/symbol`` over the same
  topic; the thread CPU time spent in the view's upkeep (``View.apply``: retract, add,
  recompute the touched groups) per underlying update gives the rate at which it can follow
  its topic. The
  engine's publish rate with and without the view is printed beside it.
- join upkeep (V-2, issue 42): a two-topic joined view, orders joined to 500 instruments on
  ``/symbol``, ``SUM([orders]./qty * [instruments]./px)`` grouped by ``[instruments]./sector``;
  the thread CPU time in ``JoinedView.apply`` per order update beside ``View.apply``'s for the
  plain view, each on an engine of its own, the updates given to the two in alternating chunks
  (medians); and the time per instrument update (each re-joins that instrument's orders).

Through gRPC:

- view end to end: the same updates published through gRPC (100 per request, from this
  process) to a ``sowd`` process holding the 1M orders, with the view configured and without,
  and with the joined view.

``--store both`` runs the parts on each record store, alternating for ``--rounds`` rounds, and
prints the medians and arena/objects; the publish rates come per CPU-second as well (this
process's for the engine in it, the server's through gRPC).

Usage: ``python tools/bench/bench_views.py [--orders 1000000] [--updates 200000] [--only join]
[--store arena|objects|both] [--rounds 3]`` (``make bench-views``; ``--only`` runs one part: page,
view, join or grpc).
"""

from __future__ import annotations

import argparse
import contextlib
import random
import statistics
import tempfile
import time
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
from alternating import Figures, add_store_option, alternate, print_medians, server_section, stores
from bench_server import _cpu_seconds, _orders, _start

from sowdb.config import config_from_dict
from sowdb.config.model import DEFAULT_RECORD_STORE
from sowdb.engine import Engine, InMessage, QueryOptions
from sowdb.engine.live.options import SubscriptionOptions
from sowdb.engine.live.pages import PagedSubscription, ResultSet
from sowdb.engine.state.derived import View
from sowdb.engine.state.joins import JoinedView
from sowdb.server import tune_gc
from sowdb.storage import Store
from sowdb_client import Client

VIEW_CONFIG = """
[[view]]
name = "by_symbol"
underlying = "orders"
grouping = ["/symbol"]
projection = ["/symbol", "SUM(/qty) AS /qty", "COUNT(/orderId) AS /orders"]
"""
JOIN_CONFIG = """
[[topic]]
name = "instruments"
key = ["/symbol"]
durability = "transient"

[[view]]
name = "by_sector"
underlying = "orders"
join = ["[orders]./symbol = [instruments]./symbol"]
grouping = ["[instruments]./sector"]
projection = ["[instruments]./sector AS /sector", "SUM([orders]./qty * [instruments]./px) AS /notional",
              "COUNT([orders]./orderId) AS /orders"]
"""
INSTRUMENTS = [orjson.dumps({"symbol": f"SYM{i}", "sector": f"S{i % 10}", "px": 1 + i % 13}) for i in range(500)]
TOPIC_CONFIG = """
[[topic]]
name = "orders"
key = ["/orderId"]
durability = "transient"
"""


def _engine(data_dir: str, views: bool, join: bool = False, store: str = DEFAULT_RECORD_STORE) -> Engine:
    raw = tomllib.loads(TOPIC_CONFIG + (VIEW_CONFIG if views else "") + (JOIN_CONFIG if join else ""))
    raw["server"] = {"data_dir": data_dir, "record_store": store}
    return Engine.open(config_from_dict(raw, source="<bench>"), Store(data_dir))


def _through_grpc(
    orders: list[bytes],
    batches: list[list[InMessage]],
    views: bool,
    join: bool = False,
    store: str = DEFAULT_RECORD_STORE,
) -> tuple[float, float]:
    """Updates/s published through gRPC to a ``sowd`` process holding ``orders`` (and, with
    ``join``, the instruments and the joined view), and updates per server CPU-second."""
    updates = [m.data for batch in batches for m in batch]
    with tempfile.TemporaryDirectory(prefix="sowdb-bench-views-") as tmp:
        config = Path(tmp) / "sowd.toml"
        config.write_text(
            server_section(store) + TOPIC_CONFIG + (VIEW_CONFIG if views else "") + (JOIN_CONFIG if join else "")
        )
        proc, target = _start(str(Path(tmp) / "data"), "--config", str(config))
        try:
            with Client(target) as client:
                if join:
                    client.publish("instruments", INSTRUMENTS)
                client.publish("orders", orders, batch_size=1000)
                start, cpu = time.perf_counter(), _cpu_seconds(proc.pid)
                client.publish("orders", updates, batch_size=100)
                rate = len(updates) / (time.perf_counter() - start)
                cpu = _cpu_seconds(proc.pid) - cpu
                view_topics = [t.name for t in client.list_topics() if t.name == "by_symbol"]
                assert bool(view_topics) == views, f"sowd's topics do not match the config: {view_topics}"
                return rate, len(updates) / max(cpu, 1e-9)
        finally:
            proc.terminate()
            proc.wait()


def _load(engine: Engine, orders: list[bytes], join: bool = False) -> None:
    """Publish the orders, then tune the garbage collector as sowd does after its start-up load."""
    if join:
        engine.publish("instruments", [InMessage(r) for r in INSTRUMENTS])
    for i in range(0, len(orders), 1000):
        engine.publish("orders", [InMessage(r) for r in orders[i : i + 1000]])
    tune_gc()


def _updates(orders: list[bytes], n: int, seed: int) -> list[list[InMessage]]:
    rnd = random.Random(seed)
    batches = []
    for _ in range(n // 100):
        batch = []
        for _ in range(100):
            d = orjson.loads(orders[rnd.randrange(len(orders))])
            d["price"] = round(rnd.uniform(1, 200), 2)
            d["qty"] = rnd.randrange(1, 1000)
            batch.append(InMessage(orjson.dumps(d)))
        batches.append(batch)
    return batches


@contextlib.contextmanager
def _timed(cls: Any, name: str, spent: list[float], clock: Callable[[], float] = time.perf_counter) -> Iterator[None]:
    """While inside, ``cls.name`` (its own method: a subclass's override is wrapped apart) adds
    the ``clock`` time spent in it to ``spent[0]``; restored on leaving, so that the next round
    (``--store both``) does not measure through two wrappers."""
    inner = cls.__dict__[name]

    def wrapper(self: Any, *args: Any, **kw: Any) -> Any:
        start = clock()
        try:
            return inner(self, *args, **kw)
        finally:
            spent[0] += clock() - start

    setattr(cls, name, wrapper)
    try:
        yield
    finally:
        setattr(cls, name, inner)


def _publish_all(engine: Engine, batches: list[list[InMessage]], sub: Any = None) -> tuple[float, float]:
    """Publish the batches: (seconds, this process's CPU seconds, every thread's: RocksDB's too)."""
    start, cpu = time.perf_counter(), time.process_time()
    for i, batch in enumerate(batches):
        engine.publish("orders", batch)
        if sub is not None and i % 50 == 0:
            sub.drain()
    return time.perf_counter() - start, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--orders", type=int, default=1_000_000)
    parser.add_argument("--updates", type=int, default=200_000)
    parser.add_argument("--only", choices=["page", "view", "join", "grpc"], default=None)
    add_store_option(parser)
    parser.add_argument("--rounds", type=int, default=3, help="with --store both: alternating rounds")
    args = parser.parse_args()
    orders = _orders(args.orders)
    batches = _updates(orders, args.updates, seed=1)
    modes = stores(args.store)
    if len(modes) == 1:
        measure(modes[0], orders, batches, args.only)
        return
    runs = alternate(modes, args.rounds, lambda store: measure(store, orders, batches, args.only, store))
    print_medians(
        runs, f"{len(orders):,} orders, {args.updates:,} updates, medians of {args.rounds} alternating rounds"
    )


def measure(
    store: str, orders: list[bytes], batches: list[list[InMessage]], only: str | None, label: str = ""
) -> Figures:
    """Every part (or ``only`` one) on ``store``, printed (each line headed by ``label``); their figures."""
    n = len(batches) * 100
    out: Figures = {}
    head = f"{label:8} " if label else ""
    if only in (None, "page"):
        out |= _page(orders, batches, n, store, head)
    if only in (None, "view"):
        out |= _view(orders, batches, n, store, head)
    if only in (None, "join"):
        out |= _join(orders, batches, n, store, head)
    if only in (None, "grpc"):
        rates = {(views, join): _through_grpc(orders, batches, views, join, store) for views, join in JOIN_RUNS}
        print(
            f"{head}view end to end  the same updates through gRPC, 100/request: {rates[False, False][0]:,.0f} msg/s "
            f"without a view, {rates[True, False][0]:,.0f} msg/s with the view, {rates[False, True][0]:,.0f} msg/s "
            f"with the joined view; per server CPU-second {rates[False, False][1]:,.0f}, {rates[True, False][1]:,.0f}, "
            f"{rates[False, True][1]:,.0f}"
        )
        for (views, join), name in zip(JOIN_RUNS, ("no view", "view", "joined view"), strict=True):
            out[f"grpc {name} msg/s"], out[f"grpc {name} msg/cpu-s"] = rates[views, join]
    return out


JOIN_RUNS = ((False, False), (True, False), (False, True))


def _page(orders: list[bytes], batches: list[list[InMessage]], n: int, store: str, head: str) -> Figures:
    with tempfile.TemporaryDirectory(prefix="sowdb-bench-views-") as tmp:
        engine = _engine(tmp, views=False, store=store)
        _load(engine, orders)
        sub, _ = engine.placement.sow_and_subscribe(
            QueryOptions(topic="orders", order_by="/price DESC", top_n=20, skip_n=0),
            options=SubscriptionOptions(oof=True),
        )
        assert isinstance(sub, PagedSubscription)
        spent = [0.0]
        with _timed(ResultSet, "apply", spent), _timed(PagedSubscription, "refresh", spent):
            took, cpu = _publish_all(engine, batches, sub)
        per_update = spent[0] / n
        print(
            f"{head}page upkeep  top 20 by /price DESC over {len(orders):,} records: "
            f"{per_update * 1e6:.1f} µs per update "
            f"= {per_update * 10_000 * 100:.1f} % of a core at 10k updates/s "
            f"(publish with the page: {n / took:,.0f} msg/s)"
        )
        engine.placement.unsubscribe(sub)
        engine.close()
    return {"page µs/update": per_update * 1e6, "page publish msg/s": n / took, "page publish msg/cpu-s": n / cpu}


def _view(orders: list[bytes], batches: list[list[InMessage]], n: int, store: str, head: str) -> Figures:
    with tempfile.TemporaryDirectory(prefix="sowdb-bench-views-") as tmp:
        plain = _engine(tmp, views=False, store=store)
        _load(plain, orders)
        without, without_cpu = map(min, zip(*(_publish_all(plain, batches) for _ in range(2)), strict=True))
        plain.close()
    with tempfile.TemporaryDirectory(prefix="sowdb-bench-views-") as tmp:
        viewed = _engine(tmp, views=True, store=store)
        _load(viewed, orders)
        spent = [0.0]
        with _timed(View, "apply", spent, time.thread_time):  # a shared machine's preemption is not counted
            with_view, with_cpu = map(min, zip(*(_publish_all(viewed, batches) for _ in range(2)), strict=True))
        groups = len(viewed.topics.sow_topic("by_symbol").records)
        viewed.close()
    per_update = spent[0] / (2 * n)
    print(
        f"{head}view upkeep  SUM(/qty), COUNT(/orderId) by /symbol ({groups:,} groups): {per_update * 1e6:.1f} µs per "
        f"update = {1 / per_update:,.0f} underlying updates/s; engine publish {n / without:,.0f} msg/s without "
        f"the view, {n / with_view:,.0f} msg/s with it"
    )
    return {
        "view µs/update": per_update * 1e6,
        "no view msg/cpu-s": n / without_cpu,
        "view msg/cpu-s": n / with_cpu,
    }


def _join(orders: list[bytes], batches: list[list[InMessage]], n: int, store: str, head: str) -> Figures:
    """V-2: the joined view's upkeep per order update beside the plain view's, and per
    instrument update. Each has an engine of its own in this process (a joined view alone, the
    plain view alone), and the updates go to them in chunks of 20 requests, the two taking turns
    (which goes first alternates), so that the machine's drift hits both alike; the time is the
    thread's CPU time in ``apply``, the median over the chunks (a shared machine's preemption is
    not counted, its caches still are)."""
    spent = [0.0]
    with (
        _timed(View, "apply", spent, time.thread_time),
        _timed(JoinedView, "apply", spent, time.thread_time),
        tempfile.TemporaryDirectory(prefix="sowdb-bench-views-") as tmp,
    ):
        engines = {
            "view": _engine(str(Path(tmp) / "v"), views=True, store=store),
            "join": _engine(str(Path(tmp) / "j"), False, True, store=store),
        }
        for name, engine in engines.items():
            _load(engine, orders, join=name == "join")
        per: dict[str, list[float]] = {name: [] for name in engines}
        for k, i in enumerate(range(0, len(batches), JOIN_CHUNK)):
            for name in list(engines) if k % 2 == 0 else list(engines)[::-1]:
                spent[0] = 0.0
                chunk = batches[i : i + JOIN_CHUNK]
                for batch in chunk:
                    engines[name].publish("orders", batch)
                per[name].append(spent[0] / sum(map(len, chunk)))
        joined = engines["join"]
        rnd = random.Random(2)
        moves = [
            [InMessage(orjson.dumps({"symbol": f"SYM{rnd.randrange(500)}", "sector": f"S{rnd.randrange(10)}",
                                     "px": rnd.randrange(1, 14)}))]
            for _ in range(50)
        ]  # fmt: skip
        spent[0] = 0.0
        for batch in moves:
            joined.publish("instruments", batch)
        per_instrument = spent[0] / len(moves)
        groups = len(joined.topics.sow_topic("by_sector").records)
        for engine in engines.values():
            engine.close()
    view, join = (statistics.median(per[name]) for name in ("view", "join"))
    print(
        f"{head}join upkeep  orders JOIN instruments ON /symbol, SUM(qty*px) by sector ({groups} groups): "
        f"{join * 1e6:.1f} µs per order update = {1 / join:,.0f} underlying updates/s; the plain view "
        f"{view * 1e6:.1f} µs = {1 / view:,.0f}/s in the same chunks: join/view {join / view:.2f} "
        f"(medians of {len(per['join'])} chunks, thread CPU); an instrument update re-joins its "
        f"{len(orders) // 500:,} orders in {per_instrument * 1e3:.1f} ms"
    )
    return {"join µs/update": join * 1e6, "join's view µs/update": view * 1e6, "instrument ms": per_instrument * 1e3}


JOIN_CHUNK = 20
"""Requests of 100 updates a turn of :func:`_join` gives each engine."""


if __name__ == "__main__":
    main()
