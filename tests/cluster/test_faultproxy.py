"""The fault proxy does what the cluster's tests rely on: forward, delay, hold (blackhole) and
release, cut."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from sowdb.testing.faultproxy import fault_proxy


@pytest.fixture
async def echo() -> AsyncIterator[int]:
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(1024):
            writer.write(data)
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    yield int(server.sockets[0].getsockname()[1])
    server.close()


async def test_forward_delay_blackhole_and_cut(echo: int) -> None:
    with fault_proxy("127.0.0.1", echo) as proxy:
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        writer.write(b"one")
        assert await asyncio.wait_for(reader.readexactly(3), 5) == b"one"

        proxy.set("forward", delay=0.2)
        sent = time.monotonic()
        writer.write(b"two")
        assert await asyncio.wait_for(reader.readexactly(3), 5) == b"two"
        assert time.monotonic() - sent >= 0.2  # each way's chunk waited

        proxy.set("blackhole")
        writer.write(b"three")
        answer = asyncio.get_running_loop().create_task(reader.readexactly(5))
        done, _ = await asyncio.wait({answer}, timeout=0.3)
        assert not done  # held: no answer, no error
        proxy.set("forward")  # healed: what was held arrives, in order
        assert await asyncio.wait_for(answer, 5) == b"three"

        proxy.set("cut")
        assert await asyncio.wait_for(reader.read(), 5) == b""  # closed
        writer.close()
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        assert await asyncio.wait_for(reader.read(), 5) == b""  # new ones too
        writer.close()
