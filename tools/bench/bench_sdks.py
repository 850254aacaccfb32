#!/usr/bin/env python3
"""Every generated SDK beside the Python SDK, in one run against one ``sowd`` (issue 43).

- sow: N orders of ``tools/demo/make_orders.py`` (``--records``, default 1M) in topic ``orders``,
  queried whole with batch_size 100, every record received as an object (its JSON parsed, a
  field read): records/s;
- publish: P orders (``--publish``, default 200k) ``{"orderId": i, "symbol": "SYM<i%100>",
  "price": ..., "qty": ...}`` made by the client before its clock starts, 100 per request over
  one stream, into ``pub`` (filled once beforehand, so every timed round updates existing
  records): messages/s.

Each round of each SDK is its own process with one interface, ``--address HOST:PORT --mode
sow|publish --count N [--topic T]``, printing one JSON line ``{"sdk", "mode", "count",
"seconds"}``: the Python SDK's is this script's ``--client`` mode, the Java SDK's is
``io.sowdb.bench.SowdbBench`` (``clients/java``, built by ``make setup``), the Go SDK's is
``clients/go/bin/sowdb-bench``. An SDK that is not built is left out with a note. The SDKs take
turns in every round (A B C, then B C A, ...), and the medians are reported with each SDK's
ratio to Python (> 1: faster than Python).

Usage: ``make bench-sdks`` or ``.venv/bin/python tools/bench/bench_sdks.py [--records 1000000]
[--publish 200000] [--rounds 3]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parents[1]
sys.path.insert(0, str(BENCH))
from bench_server import _orders  # noqa: E402  (the benchmarks' shared dataset and sowd starter)
from bench_server import _start as start_sowd  # noqa: E402

JAVA_DIR = ROOT / "clients" / "java"
GO_BENCH = ROOT / "clients" / "go" / "bin" / "sowdb-bench"
CONFIG = """
[[topic]]
name = "orders"
key = ["/orderId"]
indexes = ["/symbol"]

[[topic]]
name = "pub"
key = ["/orderId"]
"""


def order(i: int) -> dict[str, Any]:
    """The publish round's order ``i``, the same in every SDK's program."""
    return {"orderId": i, "symbol": f"SYM{i % 100}", "price": 100.0 + (i % 1000) / 10.0, "qty": 1 + i % 50}


def client_round(address: str, mode: str, count: int, topic: str) -> dict[str, Any]:
    """The Python SDK's round (``--client``), the counterpart of the other SDKs' programs."""
    from sowdb_client import Client

    with Client(address) as c:
        c.ping()  # connected before the clock starts
        received = 0
        if mode == "sow":
            start = time.perf_counter()
            check = 0
            for received, rec in enumerate(c.sow(topic, batch_size=100), start=1):  # noqa: B007
                check += rec.json()["qty"]  # the document is parsed: read a field of it
            seconds = time.perf_counter() - start
        else:
            docs = [order(i) for i in range(count)]
            start = time.perf_counter()
            received = c.publish(topic, docs, batch_size=100).count
            seconds = time.perf_counter() - start
    return {"sdk": "python", "mode": mode, "count": received, "seconds": seconds}


def programs() -> tuple[dict[str, list[str]], list[str]]:
    """The command (less its arguments) of each SDK's round that is built here, and notes on the others."""
    found = {"python": [sys.executable, str(Path(__file__).resolve()), "--client"]}
    notes = []
    classpath = JAVA_DIR / "target" / "classpath.txt"
    if (JAVA_DIR / "target" / "classes" / "io" / "sowdb" / "bench").is_dir() and classpath.exists():
        cp = f"{JAVA_DIR / 'target' / 'classes'}:{classpath.read_text().strip()}"
        found["java"] = ["java", "-cp", cp, "io.sowdb.bench.SowdbBench"]
    else:
        notes.append("java: not built (make setup builds clients/java); left out")
    if GO_BENCH.exists():
        found["go"] = [str(GO_BENCH)]
    else:
        notes.append("go: clients/go/bin/sowdb-bench not built; left out")
    return found, notes


def run_round(cmd: list[str], address: str, mode: str, count: int, topic: str) -> dict[str, Any]:
    args = [*cmd, "--address", address, "--mode", mode, "--count", str(count), "--topic", topic]
    done = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=900)
    if done.returncode:
        raise SystemExit(f"{' '.join(args[:4])} ... failed:\n{done.stdout}{done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def alternate(
    rounds: int, sdks: dict[str, list[str]], address: str, mode: str, count: int, topic: str
) -> dict[str, list[float]]:
    """Rates (count/s) of each SDK's rounds, the SDKs taking turns in a rotating order."""
    names = list(sdks)
    rates: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            out = run_round(sdks[name], address, mode, count, topic)
            if out["count"] != count:
                raise SystemExit(f"{name} {mode} handled {out['count']:,} of {count:,}")
            rate = out["count"] / out["seconds"]
            rates[name].append(rate)
            print(f"  round {r + 1} {name:6} {out['count']:,} in {out['seconds']:.2f} s: {rate:,.0f}/s", flush=True)
    return rates


def report(what: str, unit: str, rates: dict[str, list[float]]) -> None:
    python = statistics.median(rates["python"])
    parts = [f"Python {python:,.0f} {unit}"]
    for name, rs in rates.items():
        if name != "python":
            m = statistics.median(rs)
            parts.append(f"{name.capitalize()} {m:,.0f} {unit} ({name.capitalize()}/Python {m / python:.2f})")
    print(f"{what}: " + ", ".join(parts) + " (medians)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000, help="orders in the sow topic")
    parser.add_argument("--publish", type=int, default=200_000, help="orders published per round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of each SDK per figure")
    parser.add_argument("--client", action="store_true", help="run one Python SDK round (the other flags below)")
    parser.add_argument("--address", help="with --client")
    parser.add_argument("--mode", choices=["sow", "publish"], help="with --client")
    parser.add_argument("--count", type=int, default=0, help="with --client")
    parser.add_argument("--topic", default="orders", help="with --client")
    args = parser.parse_args()
    if args.client:
        print(json.dumps(client_round(args.address, args.mode, args.count, args.topic)))
        return 0

    from sowdb_client import Client

    sdks, notes = programs()
    for note in notes:
        print(note, flush=True)
    with tempfile.TemporaryDirectory(prefix="sowdb-bench-sdks-") as tmp:
        config = Path(tmp) / "sowd.toml"
        config.write_text(CONFIG)
        proc, address = start_sowd(str(Path(tmp) / "data"), "--config", str(config))
        try:
            print(f"sowd at {address}; loading {args.records:,} orders ...", flush=True)
            with Client(address) as c:
                c.publish("orders", _orders(args.records))
                c.publish("pub", [order(i) for i in range(args.publish)])  # every timed round then updates
            time.sleep(2)  # let RocksDB settle after the load
            print(f"sow of {args.records:,} orders, batch_size 100, received as objects:", flush=True)
            sow = alternate(args.rounds, sdks, address, "sow", args.records, "orders")
            print(f"publish of {args.publish:,} orders (objects), 100 per request:", flush=True)
            pub = alternate(args.rounds, sdks, address, "publish", args.publish, "pub")
            print()
            report(f"sow {args.records:,} orders", "records/s", sow)
            report(f"publish {args.publish:,} orders", "msg/s", pub)
        finally:
            proc.terminate()
            proc.wait(timeout=60)
    return 0


if __name__ == "__main__":
    sys.exit(main())
