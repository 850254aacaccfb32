"""Filter-engine benchmark: evaluation rate and parse+compile latency (issue: filter engine).

Prints the two figures the targets name:
- evaluations/s of ``/price > 190 AND /side = 'B'`` over already-decoded orders (target >= 3M/s);
- parse + compile time of a 200-character filter, cold (no cache; target <= 200 us).

Run: ``make bench-expr`` (or ``.venv/bin/python tools/bench/bench_expr.py``).
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from sowdb.expr.compiled import CompiledFilter
from sowdb.expr.parser import parse

HOT_FILTER = "/price > 190 AND /side = 'B'"
FILTER_200 = (
    "/symbol IN ('SYM1', 'SYM2', 'SYM42', 'SYM77') AND /price BETWEEN 120 AND 180 AND /side = 'B' "
    "AND /qty >= 500 AND (/trader LIKE '^t1' OR /venue = 'V3') AND /ts % 7 != 3 AND /note IS NULL"
)


def order(i: int) -> dict[str, Any]:
    """The dataset of tools/demo/make_orders.py, built in memory."""
    return {
        "orderId": i,
        "symbol": f"SYM{i % 500}",
        "price": 100 + i % 97,
        "qty": i % 1000,
        "side": "B" if i % 2 else "S",
        "trader": f"t{i % 50}",
        "venue": f"V{i % 7}",
        "ts": i,
    }


def bench_eval(n: int, rounds: int) -> float:
    messages = [order(i) for i in range(n)]
    matches = CompiledFilter(HOT_FILTER, parse(HOT_FILTER)).matches
    rates = []
    for _ in range(rounds):
        start = time.perf_counter()
        for m in messages:
            matches(m, None)
        rates.append(n / (time.perf_counter() - start))
    return statistics.median(rates)


def bench_compile(text: str, iterations: int) -> float:
    times = []
    for _ in range(iterations):
        start = time.perf_counter()
        CompiledFilter(text, parse(text))  # bypasses the cache on purpose: a cold compile
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--compiles", type=int, default=2000)
    args = ap.parse_args()
    rate = bench_eval(args.messages, args.rounds)
    print(f"eval   {HOT_FILTER!r}: {rate / 1e6:.2f} M evaluations/s (target >= 3.00)")
    latency = bench_compile(FILTER_200, args.compiles)
    print(f"compile {len(FILTER_200)}-char filter: {latency * 1e6:.0f} us median (target <= 200)")


if __name__ == "__main__":
    main()
