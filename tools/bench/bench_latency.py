#!/usr/bin/env python3
"""Live delivery and point lookups beside the transport's floor (issue 29; not part of the tests).

Every figure is measured in one run for each mode, in alternating rounds on fresh servers
(``alternating.py``), medians and ratios printed:

- ``floor``: the bare grpcio servers of ``floor.py`` (a relay, a one-record stream, a unary call);
- ``sowdb``: ``sowd`` of this checkout; ``base``: ``sowd`` of another checkout's ``server/``
  (``--baseline DIR``, e.g. the previous commit exported with ``git archive``), for A/B runs.

Parts (``--parts``, comma-separated):

- ``latency``: publish -> receive p50 / p99 with 1, 10 and 100 raw gRPC subscribers at 2,000
  msg/s and 1,000 at 200 msg/s (one message per request, from another process; the first second
  left out); the subscribers' cut-offs (SL-1) are counted;
- ``lookup``: one record by its key field (``/orderId = 777``) through the Python SDK and a raw
  stub, beside the floor's one-record stream and unary call, all servers up at once and the
  calls interleaved in rounds; per-call medians;
- ``fanout``: ``bench_subscriptions``' fan-out (100 subscribers) and publish with 10 subscribers.

Usage: ``python tools/bench/bench_latency.py [--rounds 2] [--seconds 5] [--baseline DIR]``
(``make bench-latency``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc

from sowdb_api.v1 import sow_pb2 as pb
from sowdb_client import Client

sys.path.insert(0, str(Path(__file__).resolve().parent))
import floor  # a sibling script, not a package
from alternating import Figures, alternate, print_medians
from bench_server import _orders, _start
from bench_subscriptions import _SPAWN, fanout, paced_messages, slow_consumer

SUBSCRIBE = "/sowdb.v1.SowService/Subscribe"
PUBLISH = "/sowdb.v1.SowService/Publish"
SOW = "/sowdb.v1.SowService/Sow"
LOOKUP = "/orderId = 777"
CONFIGS = ((1, 2000.0), (10, 2000.0), (100, 2000.0), (1000, 200.0))
CLIENT_OPTIONS: list[tuple[str, Any]] = []
"""The subscribers' channel options (``--no-bdp``: a fixed flow-control window, see main)."""
MEASURED = 10
"""Subscribers whose deliveries are decoded and timed (the others only read, as a screen would)."""


@contextlib.contextmanager
def server(mode: str, baseline: str | None) -> Iterator[tuple[int, str]]:
    """A fresh server of ``mode``; (its process id, its target)."""
    if mode == "floor":
        with floor.floor_server() as (proc, target):
            yield proc.pid, target
        return
    env = {"PYTHONPATH": str(Path(baseline or "") / "server")} if mode == "base" else None
    with tempfile.TemporaryDirectory(prefix="sowdb-bench-") as data_dir:
        proc, target = _start(data_dir, env=env)
        try:
            yield proc.pid, target
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def _publish(target: str, floor_shape: bool, rate: float, seconds: float) -> None:
    """One message per request at ``rate`` for ``seconds``, acks read as they come."""

    def request(message: bytes) -> bytes:
        if floor_shape:
            return message
        return pb.PublishRequest(topic="orders", messages=[pb.PublishMessage(data=message)]).SerializeToString()

    with grpc.insecure_channel(target) as channel:
        call = channel.stream_stream(floor.RELAY_PUBLISH if floor_shape else PUBLISH)
        for _ in call(request(m) for m in paced_messages(rate, seconds)):
            pass


def _stamps(floor_shape: bool) -> Callable[[bytes], list[int]]:
    """The publisher's stamps (``/t``) of the messages in a frame."""
    if floor_shape:
        return lambda frame: [json.loads(m)["t"] for m in frame.split(b"\n")]
    return lambda frame: [json.loads(r.data)["t"] for r in pb.SubscribeResponse.FromString(frame).publish.records]


async def latency(target: str, floor_shape: bool, n: int, rate: float, seconds: float) -> Figures:
    """p50 / p99 (ms) publish -> receive with ``n`` subscribers at ``rate``; cut-offs counted."""
    lat: list[tuple[int, float]] = []
    cut, frames = [0], [0]
    stamps = _stamps(floor_shape)
    per_channel = 1 if n <= 100 else 10
    spread = max(1, n // MEASURED)  # the measured subscribers, spread over the line
    channels = [grpc.aio.insecure_channel(target, options=CLIENT_OPTIONS) for _ in range(-(-n // per_channel))]
    request = b"" if floor_shape else pb.SubscribeRequest(topic="orders").SerializeToString()
    readies = [asyncio.Event() for _ in range(n)]

    async def reader(i: int) -> None:
        call = channels[i // per_channel].unary_stream(floor.RELAY_SUBSCRIBE if floor_shape else SUBSCRIBE)(request)
        try:
            await call.read()
            readies[i].set()
            while (frame := await call.read()) is not grpc.aio.EOF:
                frames[0] += 1
                if i % spread == 0:
                    now = time.monotonic_ns()
                    lat.extend((t, (now - t) / 1e6) for t in stamps(frame))
        except grpc.aio.AioRpcError:
            cut[0] += 1
            readies[i].set()

    tasks = [asyncio.create_task(reader(i)) for i in range(n)]
    await asyncio.gather(*(r.wait() for r in readies))
    proc = _SPAWN.Process(target=_publish, args=(target, floor_shape, rate, seconds))
    proc.start()
    while proc.is_alive():
        await asyncio.sleep(0.1)
    await asyncio.sleep(1.0)
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    for c in channels:
        await c.close()
    first = min(t for t, _ in lat)
    kept = [ms for t, ms in lat if t > first + 1_000_000_000]  # the first second: connections warm up
    q = statistics.quantiles(kept, n=100)
    per_frame = len(lat) * spread / frames[0] if frames[0] else 0.0
    return {"p50": q[49], "p99": q[98], "msgs/frame": per_frame, "cut": float(cut[0])}


def _lookups(targets: dict[str, str], rounds: int, calls: int) -> dict[str, list[float]]:
    """Per-call seconds of every kind of lookup, the kinds interleaved in ``rounds`` rounds."""
    sow = pb.SowRequest(topic="orders", filter=LOOKUP).SerializeToString()
    clients: dict[str, Any] = {}
    kinds: dict[str, Callable[[], Any]] = {}
    with contextlib.ExitStack() as stack:
        for mode, target in targets.items():
            channel = stack.enter_context(grpc.insecure_channel(target))
            if mode == "floor":
                stream, unary = channel.unary_stream(floor.LOOKUP_STREAM), channel.unary_unary(floor.LOOKUP_UNARY)
                kinds["floor-stream"] = lambda s=stream: list(s(b""))
                kinds["floor-unary"] = lambda u=unary: u(b"")
                continue
            client = clients[mode] = stack.enter_context(Client(target))
            raw = channel.unary_stream(SOW)
            kinds[f"{mode}-sdk"] = lambda c=client: c.sow("orders", filter=LOOKUP).records()
            kinds[f"{mode}-raw"] = lambda r=raw: list(r(sow))
        for call in kinds.values():  # connect and warm up
            for _ in range(20):
                call()
        times: dict[str, list[float]] = {k: [] for k in kinds}
        order = list(kinds)
        for r in range(rounds):
            for kind in order if r % 2 == 0 else order[::-1]:
                call = kinds[kind]
                for _ in range(calls):
                    start = time.perf_counter()
                    call()
                    times[kind].append(time.perf_counter() - start)
    return times


def lookup(modes: list[str], baseline: str | None, rounds: int) -> None:
    with contextlib.ExitStack() as stack:
        targets = {m: stack.enter_context(server(m, baseline))[1] for m in modes}
        for mode, target in targets.items():
            if mode != "floor":
                with Client(target) as c:
                    c.publish("orders", _orders(1000))
        times = _lookups(targets, rounds * 5, 100)
    floor_ms = statistics.median(times["floor-stream"]) * 1e3
    print(f"\npoint lookup {LOOKUP!r}, one record: medians of {len(times['floor-stream'])} calls each")
    for kind, t in times.items():
        ms, p99 = statistics.median(t) * 1e3, statistics.quantiles(t, n=100)[98] * 1e3
        print(f"{kind:14} {ms:7.3f} ms  p99 {p99:7.3f} ms  {ms / floor_ms:5.2f}x floor-stream")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--baseline", help="a checkout whose server/ is the 'base' mode")
    parser.add_argument("--parts", default="latency,lookup,fanout")
    parser.add_argument("--subscribers", default=",".join(str(n) for n, _ in CONFIGS), help="configs to run")
    parser.add_argument(
        "--no-bdp",
        action="store_true",
        help="subscribers keep HTTP/2's initial 64 KiB window (no BDP probing): back-pressure comes sooner",
    )
    args = parser.parse_args()
    if args.no_bdp:
        CLIENT_OPTIONS.append(("grpc.http2.bdp_probe", 0))
    sowdbs = ["sowdb", "base"] if args.baseline else ["sowdb"]
    parts = args.parts.split(",")
    if "latency" in parts:
        for n, rate in CONFIGS:
            if str(n) not in args.subscribers.split(","):
                continue

            def measure(mode: str, n: int = n, rate: float = rate) -> Figures:
                with server(mode, args.baseline) as (_, target):
                    return asyncio.run(latency(target, mode == "floor", n, rate, args.seconds))

            runs = alternate(["floor", *sowdbs], args.rounds, measure, f"{n} subscribers {rate:,.0f} msg/s ")
            print_medians(runs, f"publish -> receive (ms), {n} subscribers at {rate:,.0f} msg/s, medians")
    if "lookup" in parts:
        lookup(["floor", *sowdbs], args.baseline, args.rounds)
    if "fanout" in parts:

        def spread(mode: str) -> Figures:
            with server(mode, args.baseline) as (_, target):
                out = {"fanout/s": asyncio.run(fanout(target, 200_000))}
            with server(mode, args.baseline) as (pid, target):
                out["publish/s (10 subs)"] = asyncio.run(slow_consumer(target, pid, False))[0]
            return out

        print_medians(alternate(sowdbs, args.rounds, spread), "fan-out and publish with 10 subscribers, medians")


if __name__ == "__main__":
    main()
