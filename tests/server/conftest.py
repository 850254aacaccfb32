"""Fixtures: a real sowd (grpc.aio on port 0, RocksDB under tmp) in-process or as a process."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from sowdb.config import Config, ServerConfig, config_from_dict, demo_config
from sowdb.server import SowServer
from sowdb_client import AsyncClient

TEST_TOPICS: dict[str, Any] = {
    "topic": [
        {"name": "orders", "key": ["/orderId"], "indexes": ["/symbol"]},
        {"name": "orders_noindex", "key": ["/orderId"]},
        {"name": "notes"},
        {"name": "quotes", "key": ["/symbol"], "durability": "transient"},
        {"name": "pairs", "key": ["/region", "/id"]},
        {"name": "markers", "key": ["/id"]},
        {"name": "book", "key": ["/id"], "history": {"window": "1d"}},
    ],
    "view": [
        {
            "name": "orders_by_symbol",
            "underlying": "orders",
            "grouping": ["/symbol"],
            "projection": ["/symbol", "COUNT(/orderId) AS /n"],
        }
    ],
}


def make_config(data_dir: Path, **server: Any) -> Config:
    cfg = config_from_dict(TEST_TOPICS, source="<tests>")
    return replace(cfg, server=ServerConfig(listen="127.0.0.1:0", data_dir=str(data_dir), **server))


class Running:
    """An in-process server and an asyncio client connected to it."""

    def __init__(self, server: SowServer, client: AsyncClient) -> None:
        self.server = server
        self.client = client

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.server.port}"


@pytest.fixture
async def sowd(tmp_path: Path) -> AsyncIterator[Running]:
    server = SowServer(
        make_config(tmp_path / "data", max_document_bytes=4096, max_message_bytes=64 * 1024, heartbeat_s=0.2)
    )
    port = await server.start()
    client = AsyncClient(f"127.0.0.1:{port}")
    try:
        yield Running(server, client)
    finally:
        await client.close()
        await server.stop(grace=0)


class Process:
    """``sowd`` running as a child process."""

    def __init__(self, proc: subprocess.Popen[str], target: str) -> None:
        self.proc = proc
        self.target = target

    def stop(self) -> tuple[int, str]:
        self.proc.terminate()
        out, _ = self.proc.communicate(timeout=30)
        return self.proc.returncode, out


def start_sowd(data_dir: Path, *args: str) -> Process:
    """Start ``sowd`` (built-in demo config unless ``args`` say otherwise) on a free port."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "sowdb.main", "--data-dir", str(data_dir), "--listen", "127.0.0.1:0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    seen = []
    for line in proc.stdout:  # log lines (stderr is merged) may come before the banner
        seen.append(line)
        if "listening on" in line:
            return Process(proc, line.split("listening on ")[1].split()[0])
    proc.kill()
    raise AssertionError(f"sowd did not start: {''.join(seen)}")


@pytest.fixture
def sowd_process(tmp_path: Path) -> Iterator[Process]:
    p = start_sowd(tmp_path / "data")
    try:
        yield p
    finally:
        if p.proc.poll() is None:
            p.stop()


@pytest.fixture
def demo() -> Config:
    return demo_config()
