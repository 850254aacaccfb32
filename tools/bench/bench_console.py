#!/usr/bin/env python3
"""The console's grid latency (issue 21): a change published → visible in the page, at a
steady rate (not part of the test suite).

Starts ``sowd`` as a process with ``--http-listen``, loads one page of orders (``orderId``
0..size-1), opens the console's grid of that page (``order_by /orderId``) in headless Chromium
(Debian's, as the browser test uses it), waits until it is live, then publishes ``--rate``
changes a second for ``--seconds``, one message per publish request, each an update of one row
of the page that carries its send time (``time.time()``, ms). The page records every live
record it receives and the moment the animation frame that draws it ran
(``window.sowdbConsole.arrivals``); the two clocks are the same machine's wall clock.

Printed: how many changes were published and shown, and p50 / p90 / p99 / max of
publish → received by the page and publish → drawn.

Usage: ``python tools/bench/bench_console.py [--rate 100] [--seconds 60] [--size 20]``
(``make bench-console``; ``ARGS="--seconds 10"`` for a quick run).
"""

from __future__ import annotations

import argparse
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench_server import _start  # a sibling script, not a package
from playwright.sync_api import sync_playwright

from sowdb.testing.chromium import CHROMIUM, CHROMIUM_ARGS  # as the browser tests launch it
from sowdb_client import Client


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _percentiles(values: list[float]) -> str:
    if not values:
        return "no samples"
    q = statistics.quantiles(values, n=100, method="inclusive")
    return f"p50 {q[49]:6.1f} ms   p90 {q[89]:6.1f} ms   p99 {q[98]:6.1f} ms   max {max(values):6.1f} ms"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--rate", type=float, default=100.0, help="changes published per second (default 100)")
    parser.add_argument("--seconds", type=float, default=60.0, help="how long to publish (default 60)")
    parser.add_argument("--size", type=int, default=20, help="the grid's page size, and rows updated (default 20)")
    args = parser.parse_args()
    if not Path(CHROMIUM).exists():
        raise SystemExit(f"{CHROMIUM} is missing: `make setup` installs Debian's chromium")

    with tempfile.TemporaryDirectory(prefix="sowdb-bench-console-") as tmp:
        http = f"127.0.0.1:{_free_port()}"
        proc, target = _start(tmp, "--http-listen", http)
        try:
            return _run(args, target, f"http://{http}/")
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def _run(args: argparse.Namespace, target: str, url: str) -> int:
    client = Client(target)
    client.publish("orders", [{"orderId": i, "t": 0.0, "seq": -1} for i in range(args.size)])
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page()
        page.goto(f"{url}#grid?topic=orders&order_by=%2ForderId&size={args.size}&page=1")
        page.wait_for_selector("#grid-status[data-state='live']", timeout=30_000)
        page.wait_for_function(f"document.querySelectorAll('#grid tbody tr').length === {args.size}")

        count = int(args.rate * args.seconds)
        interval = 1.0 / args.rate
        print(f"publishing {count} changes at {args.rate:g}/s to a live grid of {args.size} rows ({url})")
        start = time.perf_counter()
        late = 0
        for seq in range(count):
            due = start + seq * interval
            pause = due - time.perf_counter()
            if pause > 0:
                time.sleep(pause)
            else:
                late += 1
            client.publish("orders", [{"orderId": seq % args.size, "t": time.time() * 1000, "seq": seq}])
        elapsed = time.perf_counter() - start
        time.sleep(1.0)  # the last frames
        arrivals = page.evaluate(
            "window.sowdbConsole.arrivals.filter(a => a.data.seq >= 0)"
            ".map(a => [a.data.seq, a.data.t, a.receivedAt, a.shownAt])"
        )
        browser.close()
    client.close()

    received = [a[2] - a[1] for a in arrivals]
    shown = [a[3] - a[1] for a in arrivals]
    seen = {a[0] for a in arrivals}
    print(f"published {count} in {elapsed:.1f} s ({count / elapsed:.1f}/s; {late} sent late); shown {len(seen)}")
    print(f"  publish -> received by the page: {_percentiles(received)}")
    print(f"  publish -> drawn (its frame):    {_percentiles(shown)}")
    return 0 if len(seen) == count else 1


if __name__ == "__main__":
    sys.exit(main())
