#!/usr/bin/env python3
"""Fault runs against real ``sowd`` processes (issue 15): each damages a data directory or the
server's working conditions the way a probe did, and checks that nothing is lost or hidden in
silence. Prints a pass/fail table; exit status 1 if any run failed.

- missing CURRENT: the start is refused in one line twice (no new, empty store is made), then
  ``sowd repair`` brings back every acknowledged record;
- a flipped byte in an SST file of each column family (``current``, ``history``, ``journal``):
  the server rebuilds, refuses to start with the reason, or answers ``DATA_LOSS`` — never fewer
  records with no error;
- disk full (a small tmpfs; skipped where it cannot be mounted): writes are refused with
  RESOURCE_EXHAUSTED naming the cause, health turns NOT_SERVING, writes resume when space is
  back, and every acknowledged record is there after a restart;
- a stalling request: a 1M-comparison sort query on 200k records while pings and small queries
  run: their p99 stays under 50 ms.

Usage: ``.venv/bin/python tools/soak/fault_soak.py [--records 20000]``.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from sowdb import testing
from sowdb.storage import Store
from sowdb.storage.keys import family_of_keys
from sowdb_client import Client, SowdbError

TOPICS_TOML = Path(__file__).resolve().parents[2] / "tests" / "topics.toml"
"""The tests' topics; these runs use ``book`` (keyed by ``/id``, with history)."""


def launch(data: Path) -> testing.Sowd:
    """``sowd`` on ``data`` with the tests' topics, once it serves, or once it refused to start
    (then its ``target`` is empty and its output says why)."""
    s = testing.spawn(data, "--log-level", "WARNING", config=TOPICS_TOML)
    with contextlib.suppress(testing.NotStarted):
        s.wait_serving()
    return s


def load(data: Path, n: int) -> None:
    """``n`` records published, then each updated once (history holds the first versions)."""
    with launch(data) as s, Client(s.target) as c:
        c.publish("book", ({"id": i, "v": 1, "pad": "x" * 40} for i in range(n)))
        c.publish("book", ({"id": i, "v": 2, "pad": "y" * 40} for i in range(n)))
    store = Store(data)  # flush everything to SST files
    store.db.flush("current", "history", "journal")
    store.close()


def biggest_sst(data: Path, family: str) -> Path:
    store = Store(data)
    try:
        files = store.db.live_files()
    finally:
        store.close()
    names = [f["name"] for f in files if family_of_keys(f["start_key"], f["end_key"]) == family]
    return max((data / n.lstrip("/") for n in names), key=lambda p: p.stat().st_size)


def flip_byte(path: Path) -> None:
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    path.write_bytes(bytes(raw))


def count(target: str, bookmark: str = "") -> int:
    with Client(target) as c:
        return len(c.sow("book", bookmark=bookmark, batch_size=10_000).records())


def missing_current(root: Path, n: int) -> str:
    data = root / "data"
    load(data, n)
    (data / "CURRENT").unlink()
    for _ in range(2):
        s = launch(data)
        s.stop()
        if s.target or (data / "CURRENT").exists():
            return "FAIL: started, or made a new CURRENT"
    line = s.lines[-1].strip()
    if testing.run("repair", "--data-dir", str(data), timeout=300).returncode != 0:
        return "FAIL: sowd repair failed"
    with launch(data) as s:
        got = count(s.target)
    return f"pass: refused ({line[:60]}…), repaired, {got:,} records" if got == n else f"FAIL: {got} of {n}"


def flipped(family: str) -> Callable[[Path, int], str]:
    def run(root: Path, n: int) -> str:
        data = root / "data"
        load(data, n)
        flip_byte(biggest_sst(data, family))
        s = launch(data)
        try:
            if not s.target:
                return f"pass: start refused: {s.lines[-1].strip()[:70]}"
            try:
                now, before = count(s.target), count(s.target, bookmark=str(n))
            except SowdbError as exc:
                return f"pass: {exc.code.name} to the caller" if exc.code.name == "DATA_LOSS" else f"FAIL: {exc}"
            if now == n and before == n:
                how = "rebuilt at start" if any("rebuil" in line for line in s.lines) else "no damaged block read"
                return f"pass: {now:,} records now and {before:,} as of bookmark {n} ({how})"
            return f"FAIL: silently {now} now, {before} as of {n}, of {n}"
        finally:
            s.stop()

    return run


def disk_full(root: Path, n: int) -> str:
    disk = root / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(disk)], capture_output=True)
    if mounted.returncode:
        return "skip: cannot mount a small filesystem here"
    try:
        (disk / "ballast").write_bytes(b"\0" * 12 * 1024 * 1024)
        data = disk / "data"
        acked = 0
        with launch(data) as s, Client(s.target) as c:
            refused = None
            for _ in range(2_000):
                try:
                    c.publish("book", [{"id": acked + j, "pad": "z" * 2000} for j in range(100)])
                    acked += 100
                except SowdbError as exc:
                    refused = exc
                    break
            if refused is None or refused.code.name != "RESOURCE_EXHAUSTED":
                return f"FAIL: no RESOURCE_EXHAUSTED after {acked} messages ({refused})"
            with grpc.insecure_channel(s.target) as ch:
                health = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest()).status
            (disk / "ballast").unlink()
            deadline = time.monotonic() + 30
            while True:
                try:
                    c.publish("book", [{"id": acked, "pad": "after"}])
                    acked += 1
                    break
                except SowdbError:
                    if time.monotonic() > deadline:
                        return "FAIL: writes did not resume once space was back"
                    time.sleep(0.5)
        with launch(data) as s:
            got = count(s.target)
        ok = health == health_pb2.HealthCheckResponse.NOT_SERVING and got == acked
        verdict = "pass" if ok else "FAIL"
        return f"{verdict}: refused after {acked - 1:,} ({refused.message[:50]}…), NOT_SERVING, resumed, {got:,} kept"
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)


def stalling_request(root: Path, n: int) -> str:
    data = root / "data"
    with launch(data) as s, Client(s.target) as c:
        c.publish("book", ({"id": i, "a": i % 97, "b": -i, "c": str(i)} for i in range(200_000)))
        # the heavy client is another process: its decoding must not hold this one's GIL
        heavy = multiprocessing.get_context("spawn").Process(target=_sort_queries, args=(s.target,))
        heavy.start()
        small: list[float] = []
        while heavy.is_alive():
            start = time.perf_counter()
            c.sow("book", sow_keys=[str(len(small) % 1000)]).records()
            small.append((time.perf_counter() - start) * 1000)
        heavy.join()
    p99 = statistics.quantiles(small, n=100)[98]
    verdict = "pass" if p99 < 50 else "FAIL"
    return f"{verdict}: {len(small):,} small queries, p99 {p99:.1f} ms, during three sorts of 200k records"


def _sort_queries(target: str) -> None:
    with Client(target) as h:
        for _ in range(3):
            h.sow("book", order_by="/a DESC, /c, /b", batch_size=1000).records()


RUNS: list[tuple[str, Callable[[Path, int], str]]] = [
    ("missing CURRENT", missing_current),
    ("flipped byte in current", flipped("current")),
    ("flipped byte in history", flipped("history")),
    ("flipped byte in journal", flipped("journal")),
    ("disk full", disk_full),
    ("stalling request", stalling_request),
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=20_000)
    args = parser.parse_args()
    results = []
    for name, run in RUNS:
        root = Path(tempfile.mkdtemp(prefix="sowdb-fault-"))
        try:
            result = run(root, args.records)
        except Exception as exc:  # a run that crashes is a failure, reported as one
            result = f"FAIL: {type(exc).__name__}: {exc}"
        finally:
            shutil.rmtree(root, ignore_errors=True)
        results.append((name, result))
        print(f"{name:26} {result}", flush=True)
    failed = [n for n, r in results if r.startswith("FAIL")]
    print(f"\n{len(results) - len(failed)} of {len(results)} runs passed" + (f"; failed: {failed}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
