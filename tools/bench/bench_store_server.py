#!/usr/bin/env python3
"""Publish end to end into a real ``sowd`` per record store, per server CPU-second (issue 39).

Each round starts one ``sowd`` per (build, store) on a fresh data directory, as
``bench_server.py`` does (its config, ``[server] record_store`` set), publishes N orders 100 a
request over one stream, then updates each of them once, and counts the server's CPU time over
each phase (``/proc/PID/stat``: every thread, RocksDB's included). The order of the runs turns
round by round, so that on a shared machine the ratios compare runs of the same minutes. A
build is a ``server/`` directory put on sowd's ``PYTHONPATH`` (default: this tree's), so an
older commit's ``git archive`` measures against the same client.

Reports each run's messages per server CPU-second, the medians, arena/objects per build and each
build against the first per store.

Usage: ``python tools/bench/bench_store_server.py [--orders 100000] [--rounds 3]
[--build NAME=SERVER_DIR ...]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_server import _cpu_seconds, _orders, _start  # a sibling script, not a package

from sowdb_client import Client

ROOT = Path(__file__).resolve().parents[2]
STORES = ("objects", "arena")
PHASES = ("insert", "update")


def _run(server: Path, store: str, orders: list[bytes], updates: list[bytes]) -> dict[str, float]:
    """One fresh ``sowd`` of ``server``'s code: ``phase`` -> messages per server CPU-second."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(server), *os.environ.get("PYTHONPATH", "").split(os.pathsep)]),
    }
    rates: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="sowdb-bench-") as data_dir:
        proc, target = _start(data_dir, env=env, store=store)
        try:
            with Client(target) as c:
                for phase, docs in zip(PHASES, (orders, updates), strict=True):
                    before = _cpu_seconds(proc.pid)
                    assert c.publish("orders", docs, batch_size=100).count == len(docs)
                    rates[phase] = len(docs) / max(_cpu_seconds(proc.pid) - before, 1e-9)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    return rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--orders", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--build", action="append", default=[], help="NAME=SERVER_DIR (default: this tree's)")
    args = parser.parse_args()
    builds = dict(b.split("=", 1) for b in args.build) or {"this": str(ROOT / "server")}
    orders = _orders(args.orders)
    updates = [o.replace(b'"qty":', b'"qty":1', 1) for o in orders]  # each replaces its record
    runs = [(name, store) for name in builds for store in STORES]
    got: dict[tuple[str, str], list[dict[str, float]]] = {run: [] for run in runs}
    for n in range(args.rounds):
        turn = n % len(runs)
        for name, store in runs[turn:] + runs[:turn]:
            rates = got[(name, store)]
            rates.append(_run(Path(builds[name]), store, orders, updates))
            shown = "   ".join(f"{p} {rates[-1][p]:9,.0f}" for p in PHASES)
            print(f"round {n + 1}  {name:8} {store:8} msg/server-cpu-s: {shown}", flush=True)
    for name, store in runs:
        shown = "   ".join(f"{p} {statistics.median(r[p] for r in got[(name, store)]):9,.0f}" for p in PHASES)
        print(f"median   {name:8} {store:8} msg/server-cpu-s: {shown}")
    first = next(iter(builds))
    for name in builds:
        _ratio(f"{name}: arena/objects", got[(name, "arena")], got[(name, "objects")])
        if name != first:
            for store in STORES:
                _ratio(f"{name}/{first} {store}", got[(name, store)], got[(first, store)])


def _ratio(label: str, top: list[dict[str, float]], bottom: list[dict[str, float]]) -> None:
    """The median of the rounds' ratios (each of runs minutes apart; the load drifts between
    rounds more than within one), and their range."""
    shown = []
    for p in PHASES:
        each = [t[p] / b[p] for t, b in zip(top, bottom, strict=True)]
        shown.append(f"{p} {statistics.median(each):.3f} ({min(each):.2f}-{max(each):.2f})")
    print(f"{label}: {'   '.join(shown)}  (median of the rounds' ratios)")


if __name__ == "__main__":
    main()
