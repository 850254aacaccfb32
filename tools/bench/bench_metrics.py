#!/usr/bin/env python3
"""What the metrics cost on publish throughput (issue 21; goal: under 3 %): N orders published
in batches of 100 to a fresh ``sowd`` per run, in alternating rounds of three modes:

- ``base``: the server as it was before any counting (a ``git archive`` of ``--baseline``, by
  default the commit before the one that brought the Stats RPC into ``admin.proto``), run from a
  temporary directory on ``PYTHONPATH``;
- ``off``: this server without ``metrics_listen`` (the engine counts anyway, for the Stats RPC);
- ``on``: this server with ``metrics_listen``, ``/metrics`` scraped every ``--scrape-interval``
  seconds while the orders are published (Prometheus's default is every 15 s).

``off/base`` is what the counting costs, ``on/base`` the whole: counting, exporter and scrapes.

Usage: ``python tools/bench/bench_metrics.py [--orders 200000] [--rounds 5]`` (``make
bench-metrics``); ``--baseline ''`` leaves the base mode out.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import urllib.request
from io import BytesIO
from pathlib import Path

from sowdb_client import Client

sys.path.insert(0, str(Path(__file__).resolve().parent))
from alternating import Figures, alternate, fresh_sowd, print_medians  # sibling scripts, not a package
from bench_server import BENCH_CONFIG_TOML, _orders

ROOT = Path(__file__).resolve().parents[2]
ADMIN_PROTO = "proto/sowdb/v1/admin.proto"


def default_baseline() -> str:
    """The commit before the one that brought the Stats RPC, and with it the figures and their
    counting ("" when git cannot say)."""
    found = subprocess.run(
        ["git", "log", "-S", "rpc Stats(", "--format=%H", "--", ADMIN_PROTO], cwd=ROOT, capture_output=True, text=True
    )
    added = found.stdout.split()
    return f"{added[-1]}^" if found.returncode == 0 and added else ""


def extract(revision: str, into: Path) -> dict[str, str]:
    """The tree of ``revision`` under ``into``; the environment that runs its ``sowd``."""
    tree = subprocess.run(["git", "archive", revision], cwd=ROOT, capture_output=True, check=True).stdout
    with tarfile.open(fileobj=BytesIO(tree)) as tar:
        tar.extractall(into, filter="data")
    path = os.pathsep.join(str(into / p) for p in ("server", "clients/python"))
    return {**os.environ, "PYTHONPATH": path}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Scraper:
    """Scrapes ``/metrics`` every ``interval`` seconds on a thread until stopped; notes each
    scrape's duration."""

    def __init__(self, url: str, interval: float) -> None:
        self.url = url
        self.interval = interval
        self.took: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            start = time.perf_counter()
            with urllib.request.urlopen(self.url, timeout=30) as resp:
                resp.read()
            self.took.append(time.perf_counter() - start)

    def __enter__(self) -> Scraper:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def measure(mode: str, orders: list[bytes], interval: float, base_env: dict[str, str] | None) -> Figures:
    port = free_port()

    def config(directory: Path) -> Path:
        path = directory / "sowd.toml"
        metrics = f'[server]\nmetrics_listen = "127.0.0.1:{port}"\n' if mode == "on" else ""
        path.write_text(metrics + BENCH_CONFIG_TOML)
        return path

    with fresh_sowd(config, env=base_env if mode == "base" else None) as (_, target), Client(target) as c:
        c.publish("orders", orders[:1000], batch_size=100)  # warm the connection and the loop
        scraper = Scraper(f"http://127.0.0.1:{port}/metrics", interval) if mode == "on" else None
        start = time.perf_counter()
        if scraper is None:
            c.publish("orders", orders, batch_size=100)
        else:
            with scraper:
                c.publish("orders", orders, batch_size=100)
        figures = {"publish msg/s": len(orders) / (time.perf_counter() - start)}
        if scraper is not None and scraper.took:
            figures["scrape ms"] = statistics.median(scraper.took) * 1000
        return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--orders", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds of every mode")
    parser.add_argument("--scrape-interval", type=float, default=1.0, metavar="SECONDS")
    parser.add_argument("--baseline", default=None, help="git revision of the base mode ('' for none)")
    args = parser.parse_args()
    baseline = default_baseline() if args.baseline is None else args.baseline
    orders = _orders(args.orders)
    with tempfile.TemporaryDirectory(prefix="sowdb-baseline-") as tmp:
        base_env = extract(baseline, Path(tmp)) if baseline else None
        modes = ["base", "off", "on"] if baseline else ["off", "on"]
        runs = alternate(modes, args.rounds, lambda m: measure(m, orders, args.scrape_interval, base_env))
    for figures in runs["on"]:
        figures.pop("scrape ms", None)  # not a figure of the other modes; printed per round above
    med = print_medians(
        runs,
        f"medians of {args.rounds} alternating rounds, {args.orders:,} orders in batches of 100 "
        f"(base: {baseline or '-'}; on: /metrics scraped every {args.scrape_interval:g} s)",
    )
    first = modes[0]
    cost = 1 - med["on"]["publish msg/s"] / med[first]["publish msg/s"]
    print(f"\nthe metrics cost {cost:.1%} of publish throughput against {first} (goal: under 3 %)")


if __name__ == "__main__":
    main()
