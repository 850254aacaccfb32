"""The transport's floor: bare grpcio servers of the same shapes as sowdb's calls, measured in
the same run as sowdb so that only ratios are compared (issue 29).

One ``grpc.aio`` server process (as ``sowd`` is its own process) with generic handlers over raw
bytes, no protobuf and no engine:

- ``/floor.Relay/Publish`` (stream-stream): each request is one message, forwarded to every
  subscriber's queue and acknowledged (an empty response), like a Publish call of one message;
- ``/floor.Relay/Subscribe`` (unary-stream): an empty first response (like ``subscribed``), then
  whatever the subscriber's queue holds each time its stream is free, newline-joined in one
  response — the batching sowdb's live path does, with nothing else;
- ``/floor.Lookup/Stream`` (unary-stream): one record, one response, like a point lookup;
- ``/floor.Lookup/Stream3`` (unary-stream): the same in three responses (an empty one, the
  record, an empty one), as sowdb's Sow sends ``group_begin``, the records, ``group_end``;
- ``/floor.Lookup/Unary`` (unary): the same record as a unary call;
- ``/floor.Replay/Frames`` (unary-stream): the frames given for the request's bytes, as they
  are (``bench_queries.py --floor`` replays the very frames a query's answer was made of).

Used by ``bench_latency.py``; ``python tools/bench/floor.py`` serves until interrupted and prints
its address.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any

import grpc

RELAY_PUBLISH = "/floor.Relay/Publish"
RELAY_SUBSCRIBE = "/floor.Relay/Subscribe"
LOOKUP_STREAM = "/floor.Lookup/Stream"
LOOKUP_UNARY = "/floor.Lookup/Unary"
LOOKUP_STREAM3 = "/floor.Lookup/Stream3"
REPLAY = "/floor.Replay/Frames"

_SPAWN = multiprocessing.get_context("spawn")


class _Relay:
    """Every subscriber's queue; a publish appends to each and wakes its sender."""

    def __init__(self) -> None:
        self.queues: list[tuple[list[bytes], asyncio.Event]] = []

    async def publish(self, requests: AsyncIterator[bytes], context: Any) -> AsyncIterator[bytes]:
        async for message in requests:
            for queue, ready in self.queues:
                queue.append(message)
                ready.set()
            yield b""

    async def subscribe(self, request: bytes, context: Any) -> AsyncIterator[bytes]:
        queue: list[bytes] = []
        ready = asyncio.Event()
        entry = (queue, ready)
        self.queues.append(entry)
        try:
            yield b""
            while True:
                await ready.wait()
                ready.clear()
                frame = b"\n".join(queue)
                queue.clear()
                yield frame
        finally:
            self.queues.remove(entry)


async def _serve(record: bytes, replays: dict[bytes, list[bytes]], started: Any) -> None:
    relay = _Relay()

    async def replay(request: bytes, context: Any) -> AsyncIterator[bytes]:
        for frame in replays.get(request, ()):
            yield frame

    async def lookup_stream(request: bytes, context: Any) -> AsyncIterator[bytes]:
        yield record

    async def lookup_stream3(request: bytes, context: Any) -> AsyncIterator[bytes]:
        yield b""
        yield record
        yield b""

    async def lookup_unary(request: bytes, context: Any) -> bytes:
        return record

    handlers: dict[str, dict[str, Any]] = {
        "floor.Relay": {
            "Publish": grpc.stream_stream_rpc_method_handler(relay.publish),
            "Subscribe": grpc.unary_stream_rpc_method_handler(relay.subscribe),
        },
        "floor.Lookup": {
            "Stream": grpc.unary_stream_rpc_method_handler(lookup_stream),
            "Stream3": grpc.unary_stream_rpc_method_handler(lookup_stream3),
            "Unary": grpc.unary_unary_rpc_method_handler(lookup_unary),
        },
        "floor.Replay": {"Frames": grpc.unary_stream_rpc_method_handler(replay)},
    }
    limit = [("grpc.max_send_message_length", 64 << 20), ("grpc.max_receive_message_length", 64 << 20)]
    server = grpc.aio.server(options=limit)
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(n, m) for n, m in handlers.items()])
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    started.put(f"127.0.0.1:{port}")
    await server.wait_for_termination()


def _run(record: bytes, replays: dict[bytes, list[bytes]], started: Any) -> None:
    asyncio.run(_serve(record, replays, started))


@contextmanager
def floor_server(record: bytes = b"", replays: dict[bytes, list[bytes]] | None = None) -> Iterator[tuple[Any, str]]:
    """The floor's server in its own process, ``record`` what its lookups return and
    ``replays`` what ``/floor.Replay/Frames`` sends for each request; (process, target).
    Stopped on leaving."""
    started: Any = _SPAWN.Queue()
    proc = _SPAWN.Process(target=_run, args=(record, replays or {}, started), daemon=True)
    proc.start()
    try:
        yield proc, started.get(timeout=60)
    finally:
        proc.terminate()
        proc.join(timeout=30)


if __name__ == "__main__":
    with floor_server(b"{}") as (served, target):
        print(f"floor listening on {target}", flush=True)
        try:
            served.join()
        except KeyboardInterrupt:
            sys.exit(0)
