#!/usr/bin/env python3
"""Write N order messages, one JSON document a line, to stdout: the tour's demo data (docs/tour.md).

Usage: ``python3 tools/demo/make_orders.py 10000 | sow publish -topic orders``.

The orders are, byte for byte, those of the benchmark dataset's ``make_orders.py`` that the
reference figures were measured with (it lives outside this repository); the tour and every
benchmark (``tools/bench``, ``clients/node/bench``) take them from here, so both run on a fresh clone.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def order(i: int) -> dict[str, Any]:
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


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        prog="tools/demo/make_orders.py",
        description="Write N demo orders, one JSON document a line, to stdout.",
        epilog="example: python3 tools/demo/make_orders.py 10000 | sow publish -topic orders",
    )
    p.add_argument("n", nargs="?", type=int, default=1_000_000, help="how many orders (default 1000000)")
    n = p.parse_args(argv).n
    out = sys.stdout
    for i in range(n):
        out.write(json.dumps(order(i), separators=(",", ":")))
        out.write("\n")


if __name__ == "__main__":
    main()
