"""What the tests share: a real sowd (grpc.aio on port 0, RocksDB under tmp) in process or as a
process, the test topics, and helpers to read subscription streams and run the CLI. Fixtures
are in ``conftest.py``; test modules import helpers from here, never from each other."""

from __future__ import annotations

import asyncio
import json
import secrets
import subprocess
import sys
import tomllib
from collections.abc import AsyncIterable, AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import orjson

from sowdb import testing
from sowdb.auth import hash_token
from sowdb.config import Config, ServerConfig, config_from_dict
from sowdb.engine import Engine, InMessage, StoredRecord
from sowdb.engine.clock import Clock
from sowdb.server import SowServer
from sowdb.storage import Store
from sowdb.storage.keys import family_of_keys
from sowdb_client import AsyncClient, AsyncSubscriptionStream, Event

T = TypeVar("T")

TOPICS_TOML = Path(__file__).with_name("topics.toml")
"""The test topics as a config file (with ``[server] heartbeat``): the Python and Node tests and
the soaks read this one file."""

TEST_TOPICS: dict[str, Any] = tomllib.loads(TOPICS_TOML.read_text())
""":data:`TOPICS_TOML` as read (``make_config`` puts its own ``[server]`` in place of the file's)."""


BAD_MESSAGE = 150
"""The index of the message ``orders_with_a_bad_message`` makes unreadable by default: the
151st, so that in requests of 100 the second one is refused."""


def orders_with_a_bad_message(n: int = 250, bad: int = BAD_MESSAGE) -> list[bytes]:
    """``n`` orders (``orderId`` 0..n-1) as raw JSON, message ``bad`` cut short (-1: none)."""
    return [b'{"orderId": ' if i == bad else json.dumps({"orderId": i}).encode() for i in range(n)]


def make_config(data_dir: Path, **server: Any) -> Config:
    cfg = config_from_dict(TEST_TOPICS, source="<tests>")
    return replace(cfg, server=ServerConfig(listen="127.0.0.1:0", data_dir=str(data_dir), **server))


S = 1_000_000
"""Microseconds in a second: the engine's clock counts microseconds."""

T0 = 1_700_000_000 * S
"""Where a :class:`ManualClock` starts (2023-11-14T22:13:20Z)."""


class ManualClock:
    """The engine's clock (:mod:`sowdb.engine.clock`) in a test's hands: time moves only when
    the test says, so expirations, history windows and journal timestamps are exact."""

    def __init__(self, now: int = T0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += int(seconds * S)

    def at(self, seconds: float) -> None:
        """Set the time to ``seconds`` after :data:`T0`."""
        self.now = T0 + int(seconds * S)


def open_engine(
    data_dir: Path, topics: dict[str, Any] | None = None, *, clock: Clock | None = None, **server: Any
) -> Engine:
    """An engine over a RocksDB store in ``data_dir`` (no server): ``topics`` (the test topics
    by default) with ``server`` settings in place of their ``[server]``, and ``clock`` (a new
    :class:`ManualClock` by default)."""
    raw = {**(TEST_TOPICS if topics is None else topics), "server": {"data_dir": str(data_dir), **server}}
    return Engine.open(config_from_dict(raw, source="<tests>"), Store(data_dir), clock=clock or ManualClock())


def publish(engine: Engine, topic: str, *docs: Any, delta: bool = False) -> tuple[int, int]:
    """Publish ``docs`` (JSON-able) to ``topic`` as one batch; the (first, last) bookmark."""
    return engine.publish(topic, [InMessage(orjson.dumps(d)) for d in docs], delta=delta)


def doc(rec: StoredRecord) -> dict[str, Any]:
    """A record's document (every record the engine stores or queues has one)."""
    assert rec.data is not None, f"record {rec.sow_key!r} of {rec.topic!r} has no document"
    return rec.data


class Running:
    """An in-process server and an asyncio client connected to it."""

    def __init__(self, server: SowServer, client: AsyncClient) -> None:
        self.server = server
        self.client = client

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.server.port}"

    @property
    def console_url(self) -> str:
        """The web console's page (the server's config has ``http_listen``)."""
        assert self.server.console is not None, "the server has no console: http_listen is unset"
        return self.server.console.url

    @property
    def engine(self) -> Engine:
        """The server's engine (it has one once started)."""
        assert self.server.engine is not None, "the server has not started"
        return self.server.engine


@asynccontextmanager
async def serving(config: Config, *, clock: Clock | None = None) -> AsyncIterator[SowServer]:
    """A started in-process server (on ``clock``, if given: the system's by default), always
    stopped after (``grace=0``): the one way the tests start a :class:`SowServer` in process.

    A test that restarts a server on the same data directory, or looks at something while it
    is stopped, ends one ``async with`` and begins the next; a test of several servers nests
    them (the inner one stops first). A start that fails raises out of the ``async with`` and
    is not stopped here: :meth:`SowServer.start` lets go of what it took on its own, which
    the tests of a refused start check (``pytest.raises`` around the ``async with``)."""
    server = SowServer(config) if clock is None else SowServer(config, clock=clock)
    await server.start()
    try:
        yield server
    finally:
        await server.stop(grace=0)


@asynccontextmanager
async def running(config: Config, token: str | None = None) -> AsyncIterator[Running]:
    """A started in-process server (:func:`serving`) with a client (with ``token``, if
    given); both closed after."""
    async with serving(config) as server:
        client = AsyncClient(f"127.0.0.1:{server.port}", token=token)
        try:
            yield Running(server, client)
        finally:
            await client.close()


Process = testing.Sowd
"""``sowd`` running as a child process (:mod:`sowdb.testing`, the one launcher): ``target``,
``banner``, ``output`` (read as it comes), ``stop(sig)``."""


def start_sowd(data_dir: Path, *args: str, env: dict[str, str] | None = None) -> Process:
    """Start ``sowd`` (built-in demo config unless ``args`` say otherwise) on a free port, in
    ``env`` (default: this process's environment)."""
    try:
        return testing.start(data_dir, *args, env=env)
    except testing.NotStarted as e:
        raise AssertionError(str(e)) from e


def sow(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    """Run the ``sow`` CLI as a process."""
    return subprocess.run(
        [sys.executable, "-m", "sowdb_client.cli", *args], input=stdin, capture_output=True, text=True, timeout=60
    )


TAKE_TIMEOUT_S = 10.0
"""How long ``take`` waits for its events; a test that expects them sooner wraps the call in
``asyncio.timeout``."""


async def take(stream: AsyncSubscriptionStream, n: int) -> list[Event]:
    """The next ``n`` events that are not heartbeats (fewer if the stream ends first).

    Raises:
        TimeoutError: they did not come within ``TAKE_TIMEOUT_S``.
    """
    out: list[Event] = []
    async with asyncio.timeout(TAKE_TIMEOUT_S):
        async for e in stream:
            if e.kind != "heartbeat":
                out.append(e)
                if len(out) == n:
                    break
    return out


def collect(items: Iterable[T], into: list[T]) -> None:
    """Append each of ``items`` to ``into`` as it comes. Under ``pytest.raises``, when the
    iteration raises, ``into`` holds what came before the error."""
    for item in items:
        into.append(item)


async def acollect(items: AsyncIterable[T], into: list[T]) -> None:
    """:func:`collect` for an asynchronous iterable (a gRPC stream, an SDK stream)."""
    async for item in items:
        into.append(item)


def docs(events: list[Event]) -> list[tuple[str, Any]]:
    """(event kind, document) of every record of ``events``."""
    return [(e.kind, r.json()) for e in events for r in e.records]


def sst_files(store: Any) -> dict[str, list[Path]]:
    """Flush every column family of an open store; then its SST files by family
    (:func:`sowdb.storage.keys.family_of_keys`)."""
    store.db.flush()
    out: dict[str, list[Path]] = {"journal": [], "current": [], "history": [], "meta": []}
    for f in store.db.live_files():
        out[family_of_keys(f["start_key"], f["end_key"])].append(Path(store.path) / f["name"].lstrip("/"))
    return out


def flip_byte(path: Path, at: float = 0.5) -> None:
    """Damage a file: invert one byte at the given fraction of its length."""
    data = bytearray(path.read_bytes())
    i = int(len(data) * at)
    data[i] ^= 0xFF
    path.write_bytes(bytes(data))


sowd_command = testing.run
"""Run ``sowd`` (a subcommand such as ``verify``) as a process, to its end."""


class Tokens(dict[str, str]):
    """A token per user name, made on first use (a test may add users of its own)."""

    def __missing__(self, name: str) -> str:
        token = self[name] = secrets.token_urlsafe(16)
        return token


TOKENS = Tokens()
"""The token of every user of the secured servers the tests start (:func:`secured_config`)."""


def users_toml(users: dict[str, list[str]], tokens: dict[str, str] = TOKENS) -> str:
    """A users file (``[[user]]`` tables) holding each token's hash only."""
    return "".join(
        f"[[user]]\nname = {json.dumps(name)}\ntoken_sha256 = {json.dumps(hash_token(tokens[name]))}\n"
        f"roles = {json.dumps(roles)}\n\n"
        for name, roles in users.items()
    )


def secured_config(
    tmp_path: Path,
    *,
    roles: list[dict[str, Any]],
    users: dict[str, list[str]],
    topics: dict[str, Any],
    server: dict[str, Any] | None = None,
    security: dict[str, Any] | None = None,
) -> Config:
    """The config of a secured server in ``tmp_path`` (port 0 on 127.0.0.1): ``topics``, these
    ``roles``, and ``users`` with their :data:`TOKENS` in a users file."""
    users_file = tmp_path / "users.toml"
    users_file.write_text(users_toml(users))
    raw = {
        **topics,
        "server": {"listen": "127.0.0.1:0", "data_dir": str(tmp_path / "data"), "heartbeat": "200ms", **(server or {})},
        "security": {"users_file": str(users_file), **(security or {})},
        "role": roles,
    }
    return config_from_dict(raw, source=str(tmp_path / "sowd.toml"), base=tmp_path)


class Secured:
    """A started secured server and a client per user (with its :data:`TOKENS` token)."""

    def __init__(self, server: SowServer) -> None:
        self.server = server
        self.target = f"127.0.0.1:{server.port}"

    def client(self, user: str | None) -> AsyncClient:
        """A client with ``user``'s token (None: no token)."""
        return AsyncClient(self.target, token=TOKENS[user] if user else None)
