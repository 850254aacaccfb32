#!/usr/bin/env python3
"""What enrichment (EN-2) costs a publish, against a real ``sowd`` (issue 42).

Modes: ``plain`` (the ``orders`` topic of ``make bench``) and ``enriched`` (the same topic with
the two enrichment fields of issue 42's example: ``IF(/qty < 0, /qty OF PREVIOUS, /qty) AS /qty``,
which reads the previous version for a correction only (none of these orders is one), and
``/price * /qty AS /notional``, which adds a field to every message, so every message is
rewritten and encoded again). ``--previous`` makes the first field
``COALESCE(/qty OF PREVIOUS, 0) AS /prev_qty`` instead: every message then looks up its previous
version and gains a second field. Each round publishes N orders of ``tools/demo/make_orders.py``
(100 per request, one stream) to a fresh ``sowd`` per mode, and then the same N again (every
message replaces a record: the previous version exists), in an order of modes that alternates
from round to round (:mod:`alternating`); then the medians and their ratio. Each phase gives
its rate (wall clock) and the messages per second of the server's CPU time (user + system, all
its threads): on a shared machine, where the wall clock measures the neighbours as much as the
server, the second is what tells the two modes apart.

Usage: ``python tools/bench/bench_enrichment.py [--orders 200000] [--rounds 4] [--previous]``
(``make bench-enrichment``).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from sowdb_client import Client

sys.path.insert(0, str(Path(__file__).resolve().parent))
from alternating import Figures, alternate, fresh_sowd, print_medians  # a sibling script, not a package
from bench_server import _cpu_seconds, _orders  # a sibling script, not a package

TOPIC = """
[[topic]]
name = "orders"
key = ["/orderId"]
indexes = ["/symbol"]
"""
FIELDS = {
    "issue": '["IF(/qty < 0, /qty OF PREVIOUS, /qty) AS /qty", "/price * /qty AS /notional"]',
    "previous": '["COALESCE(/qty OF PREVIOUS, 0) AS /prev_qty", "/price * /qty AS /notional"]',
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--orders", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--previous", action="store_true", help="every message reads its previous version")
    args = parser.parse_args()
    orders = _orders(args.orders)
    enrichment = FIELDS["previous" if args.previous else "issue"]

    def measure(mode: str) -> Figures:
        def config(directory: Path) -> Path:
            path = directory / "sowd.toml"
            path.write_text(TOPIC + (f"enrichment = {enrichment}\n" if mode == "enriched" else ""))
            return path

        figures: Figures = {}
        with fresh_sowd(config) as (proc, target), Client(target) as c:
            for phase in ("insert", "replace"):
                start, cpu = time.perf_counter(), _cpu_seconds(proc.pid)
                assert c.publish("orders", orders, batch_size=100).count == len(orders)
                figures[f"{phase} msg/s"] = len(orders) / (time.perf_counter() - start)
                ticks = max(_cpu_seconds(proc.pid) - cpu, 0.01)  # at least one clock tick (a tiny run)
                figures[f"{phase} msg/cpu-s"] = len(orders) / ticks
            sample = next(iter(c.sow("orders", filter="/orderId = 7"))).json()
            assert ("notional" in sample) == (mode == "enriched"), sample
        return figures

    runs = alternate(["plain", "enriched"], args.rounds, measure)
    print_medians(runs, f"publish {len(orders):,} orders, 100/request, enrichment {enrichment} (medians)")


if __name__ == "__main__":
    main()
