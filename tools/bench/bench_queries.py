#!/usr/bin/env python3
"""The peer queries over 1M orders: this checkout's record stores beside a baseline build (issue 39).

Measured as a new user would: a real ``sowd`` per mode and round on a fresh data directory,
loaded with the same orders through the Python SDK (100 per request), left to settle (RocksDB's
compactions, the upkeep building the columns the first queries asked for), then each query
through the SDK, which receives and decodes every record; the medians of its repetitions, and
the server's CPU per query over them (read from ``/proc``: on a shared machine it moves less
than the wall clock, which the other work there stretches).
Modes alternate from round to round (``alternating.py``) and the table gives their medians and
ratios to the first mode:

- ``base``: another checkout's ``server/`` and ``clients/python`` (``--baseline DIR``, e.g. the
  build before the record model: ``git archive 2655d70 server clients/python | tar -x -C DIR``);
- ``objects`` and ``arena``: this checkout, ``[server] record_store`` of each.

Queries: the 3 % range ``/price > 190 AND /side = 'B'``, the indexed ``/symbol = 'SYM42'``, the
unindexed ``/trader = 't42'`` and the point lookup ``/orderId = 777``.

``--floor`` adds the transport's floor for each query (``floor.py``): its answer's frames, taken
from the server as they were sent, replayed by a bare ``grpc.aio`` server and decoded by the
client as the SDK decodes them (``records_of``), the same repetitions right after the server's.
What a query costs beyond it is the server's own work on the records (issue 39: the indexed
query beside PostgreSQL).

Usage: ``python tools/bench/bench_queries.py [--orders 1000000] [--rounds 3] [--baseline DIR] [--floor]``
(``make bench-queries``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import grpc
from alternating import Figures, alternate, print_medians  # sibling scripts, not a package
from bench_server import BENCH_CONFIG_TOML, _cpu_seconds, _orders, _settle, _start
from floor import REPLAY, floor_server

from sowdb_api.v1 import sow_pb2 as pb
from sowdb_client import Client
from sowdb_client.types import records_of

QUERIES = (  # (figure, filter, repetitions)
    ("range ms", "/price > 190 AND /side = 'B'", 5),
    ("indexed ms", "/symbol = 'SYM42'", 200),
    ("unindexed ms", "/trader = 't42'", 5),
    ("point ms", "/orderId = 777", 1000),
)
"""The server's CPU is read in clock ticks (10 ms): the repetitions of the short queries make
each figure some hundred ticks (100 point lookups of ~1.3 ms were 13, so a figure moved by
0.1 ms a call, ~8 %, between runs of the same code: the "1.31x of 2655d70" of 2026-11-27)."""


def _config(directory: Path, store: str | None) -> Path:
    """The benchmarks' config, with ``record_store`` where the build has it (not the baseline)."""
    config = directory / "sowd.toml"
    server = f'[server]\nrecord_store = "{store}"\n' if store else ""
    config.write_text(server + BENCH_CONFIG_TOML)
    return config


def _floor(target: str, repetitions: dict[str, int]) -> dict[str, float]:
    """Each query's frames taken from ``target`` as sent, then replayed by the floor's server
    and decoded as the SDK does: the median ms of each filter's repetitions."""
    with grpc.insecure_channel(target) as channel:
        raw: Any = channel.unary_stream(
            "/sowdb.v1.SowService/Sow", request_serializer=pb.SowRequest.SerializeToString, response_deserializer=None
        )
        replays = {
            flt.encode(): list(
                raw(pb.SowRequest(topic="orders", filter=flt, batch_size=100, record_layout=pb.RECORD_LAYOUT_PACKED))
            )
            for flt in repetitions
        }
    out: dict[str, float] = {}
    with floor_server(replays=replays) as (_, floor), grpc.insecure_channel(floor) as channel:
        call: Any = channel.unary_stream(
            REPLAY, request_serializer=None, response_deserializer=pb.SowResponse.FromString
        )
        for flt, reps in repetitions.items():
            times = []
            for _ in range(reps):
                start = time.perf_counter()
                for resp in call(flt.encode()):
                    if resp.HasField("records"):
                        records_of(resp.records)
                times.append(time.perf_counter() - start)
            out[flt] = statistics.median(times) * 1000
    return out


def measure(mode: str, orders: list[bytes], baseline: str | None, floor: bool = False) -> Figures:
    """One round of ``mode``: load, settle, warm each query once, then time them."""
    env = None
    if mode == "base":
        assert baseline is not None
        paths = [str(Path(baseline) / "server"), str(Path(baseline) / "clients" / "python")]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    with tempfile.TemporaryDirectory(prefix="sowdb-queries-") as tmp:
        config = _config(Path(tmp), None if mode == "base" else mode)
        proc, target = _start(str(Path(tmp) / "data"), "--config", str(config), env=env)
        try:
            with Client(target) as client:
                start = time.perf_counter()
                assert client.publish("orders", orders, batch_size=100).count == len(orders)
                out: Figures = {"load msg/s": len(orders) / (time.perf_counter() - start)}
                for _, flt, _ in QUERIES:  # the first query of a filter asks the upkeep for its columns
                    client.sow("orders", filter=flt, batch_size=100).records()
                _settle(proc.pid)
                for figure, flt, repetitions in QUERIES:
                    times = []
                    cpu = _cpu_seconds(proc.pid)
                    for _ in range(repetitions):
                        start = time.perf_counter()
                        client.sow("orders", filter=flt, batch_size=100).records()
                        times.append(time.perf_counter() - start)
                    out[figure] = statistics.median(times) * 1000
                    out[f"{figure.split()[0]} server CPU ms"] = (_cpu_seconds(proc.pid) - cpu) / repetitions * 1000
                if floor:
                    floors = _floor(target, {flt: reps for _, flt, reps in QUERIES})
                    for figure, flt, _ in QUERIES:
                        out[f"{figure.split()[0]} floor ms"] = floors[flt]
                return out
        finally:
            proc.terminate()
            proc.wait(timeout=60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--orders", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline", help="a checkout (server/ and clients/python) run as mode 'base'")
    parser.add_argument("--modes", default="", help="comma-separated (default: base if --baseline, objects, arena)")
    parser.add_argument(
        "--floor", action="store_true", help="each query's frames replayed by a bare grpc.aio server too"
    )
    args = parser.parse_args()
    modes = args.modes.split(",") if args.modes else [*(["base"] if args.baseline else []), "objects", "arena"]
    orders = _orders(args.orders)
    runs = alternate(modes, args.rounds, lambda mode: measure(mode, orders, args.baseline, args.floor))
    med = print_medians(runs, f"{len(orders):,} orders, medians of {args.rounds} rounds")
    if "objects" in med and "arena" in med:
        arena, objects = med["arena"], med["objects"]  # a tiny run's CPU can be 0 ticks: no ratio then
        ratios = ", ".join(f"{k} {arena[k] / objects[k]:.3f}" if objects[k] else f"{k} -" for k in arena)
        print(f"arena/objects: {ratios}")


if __name__ == "__main__":
    main()
