"""Issue 26, denial of service (items 5-8): one user must not stall the others (SPEC §11).

Each test performs the attack against a real secured sowd (``conftest.py``) and asserts that the
server's event loop kept serving -- measured by a ticker on that loop (:func:`watch_loop`), since
the in-process server and the test share it -- or that the hostile call was refused, naming the
limit. The bounds on the ticker's longest gap are generous (a second, where the attacks froze the
loop for ten or more); everything else is asserted on outcomes and order.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import grpc
import pytest

from sowdb.config import ConfigError, RoleConfig
from sowdb.engine.access import MEMO_LIMIT, Access
from sowdb.expr.matching import compile_pattern
from sowdb.ports import connection_limits
from sowdb_api.v1 import data_pb2 as dpb
from sowdb_api.v1 import data_pb2_grpc
from sowdb_api.v1 import sow_pb2 as pb
from sowdb_client import NotFoundError, ResourceExhaustedError
from sowdb_client.errors import from_rpc_error
from tests.security.conftest import DESK_A_ROWS, ROLES, TOPICS, Secured, StartSecured, secured_config
from tests.support import TOKENS, take

STALL_LIMIT_S = 1.0
"""The longest the loop may go without serving its ticker during an attack; the attacks froze it
for 3 to 40 s, an honest call takes milliseconds."""


class Watch:
    longest_gap_s = 0.0


@asynccontextmanager
async def watch_loop() -> AsyncIterator[Watch]:
    """Measure the longest time the event loop went without running a 5 ms ticker."""
    watch = Watch()

    async def tick() -> None:
        last = time.monotonic()
        while True:
            await asyncio.sleep(0.005)
            now = time.monotonic()
            watch.longest_gap_s = max(watch.longest_gap_s, now - last)
            last = now

    ticker = asyncio.create_task(tick())
    await asyncio.sleep(0)
    try:
        yield watch
    finally:
        ticker.cancel()
        await asyncio.gather(ticker, return_exceptions=True)


# --- 5: regex topic names ---------------------------------------------------------------------

REDOS_TOPIC = "((.*)*)*x"
LONG_TOPICS: dict[str, Any] = {"topic": [*TOPICS["topic"], {"name": "positions_eu1", "key": ["/id"]}]}


async def test_a_user_without_rights_cannot_freeze_the_server_with_a_topic_pattern(
    start_secured: StartSecured,
) -> None:
    """``norights`` sends a catastrophic topic pattern: it is matched against no topic (it may
    read none) and the loop keeps serving; before, Python ``re`` ran it on every topic name (the
    13-character name alone took tens of seconds)."""
    s = await start_secured(topics=LONG_TOPICS)
    async with s.client("norights") as hostile, watch_loop() as watch:
        assert await hostile.sow(REDOS_TOPIC).records() == []
        stream = hostile.subscribe(REDOS_TOPIC)
        assert [e.kind for e in await take(stream, 1)] == ["subscribed"]
        stream.cancel()
    assert watch.longest_gap_s < STALL_LIMIT_S


async def test_a_reader_topic_pattern_runs_in_linear_time(start_secured: StartSecured) -> None:
    """A user who may read the long-named topic sends the same pattern: it runs on RE2 (linear),
    and the query answers (no topic matches) without stalling the loop."""
    roles = [{**r, "read": [*r.get("read", []), "positions_eu1"]} if r["name"] == "reader" else r for r in ROLES]
    s = await start_secured(topics=LONG_TOPICS, roles=roles)
    async with s.client("reader") as reader, watch_loop() as watch:
        assert await reader.sow(REDOS_TOPIC).records() == []
        assert [r.topic for r in await reader.sow("^pos.*1$").records()] == []  # empty topic, but resolved
    assert watch.longest_gap_s < STALL_LIMIT_S


def test_pattern_engines_agree_and_the_backtracking_one_is_budgeted() -> None:
    """What RE2 runs means what ``regex`` means (FILTERS.md); what only ``regex`` can run (a
    backreference, a lookaround) is bounded by the per-pattern budget, not per text."""
    cases = {
        r"^us$": ["us", "US", "us\n", "bus"],
        r"(?i)^us$": ["US", "uS", "usa"],
        r"\w+\d": ["ab1", "é1", "  ", "\u0661"],
        r"a{,3}b": ["ab", "a{,3}b", "b"],
        r"\bx\b": ["a x b", "éxé", "axb"],
        r"C\+\+": ["C++", "C+"],
        r"[[:alpha:]]": ["1", "a", "é"],
        r"\s": [" ", "\v", "\u00a0", "x"],
    }
    for pattern, texts in cases.items():
        p = compile_pattern(pattern)
        for text in texts:
            assert p.search(text) == (p.backtracking.search(text) is not None), (pattern, text)
    assert compile_pattern(r"(.)\1").linear is None
    assert compile_pattern(r"(.)\1").search("Mississippi")
    hostile = compile_pattern(r"(?=a)(a|aa)+$")
    assert hostile.linear is None
    start = time.monotonic()
    assert not any(hostile.search("a" * 40 + "!") for _ in range(200))
    assert time.monotonic() - start < STALL_LIMIT_S  # one match's budget, not 200 of them


# --- 6: LIKE ------------------------------------------------------------------------------------

LIKE_REDOS = "(a|aa)+$"
SLOW_TEXT = "a" * 30 + "!"


@pytest.mark.parametrize("pattern", [LIKE_REDOS, f"(?=a){LIKE_REDOS}"], ids=["re2", "backtracking"])
async def test_a_like_pattern_cannot_freeze_a_query(start_secured: StartSecured, pattern: str) -> None:
    """``trader`` queries 300 records with a catastrophic LIKE: before, each record cost the
    50 ms timeout and the loop yielded every 128 records (6 s frozen at a time)."""
    s = await start_secured()
    async with s.client("trader") as trader:
        await trader.publish("orders", [{"orderId": 100 + i, "desk": "A", "note": SLOW_TEXT} for i in range(300)])
        async with watch_loop() as watch:
            found = await trader.sow("orders", filter=f"/note LIKE '{pattern}'").records()
    assert found == []
    assert watch.longest_gap_s < STALL_LIMIT_S


async def test_like_subscriptions_cannot_slow_another_users_publish(start_secured: StartSecured) -> None:
    """Three ``trader`` subscriptions with a catastrophic LIKE; ``writer``'s 20-message publish
    (each message evaluated against every subscription) still completes without stalling."""
    s = await start_secured()
    async with s.client("trader") as trader, s.client("writer") as writer:
        streams = [trader.subscribe("orders", filter=f"/note LIKE '{LIKE_REDOS}'") for _ in range(3)]
        for stream in streams:
            assert [e.kind for e in await take(stream, 1)] == ["subscribed"]
        async with watch_loop() as watch:
            await writer.publish("orders", [{"orderId": 200 + i, "desk": "A", "note": SLOW_TEXT} for i in range(20)])
        for stream in streams:
            stream.cancel()
    assert watch.longest_gap_s < STALL_LIMIT_S


# --- 7: per-user quotas -------------------------------------------------------------------------

QUOTA_ROLES = [
    {**r, "max_snapshots": 2, "max_subscriptions": 3, "max_staged_bytes": 4096} if r["name"] != "admin" else r
    for r in ROLES
]


@asynccontextmanager
async def data_stub(s: Secured, user: str) -> AsyncIterator[Any]:
    """A DataService stub with ``user``'s token (the SDK has no snapshot calls)."""
    async with grpc.aio.insecure_channel(s.target) as channel:
        stub = data_pb2_grpc.DataServiceStub(channel)
        metadata = (("authorization", f"Bearer {TOKENS[user]}"),)
        yield lambda method, request: call(getattr(stub, method)(request, metadata=metadata))


async def call(coro: Any) -> Any:
    try:
        return await coro
    except grpc.RpcError as exc:
        raise from_rpc_error(exc) from None


def staged(stage_id: str, size: int) -> Any:
    async def requests() -> AsyncIterator[dpb.StageWriteRequest]:
        doc = json.dumps({"orderId": stage_id, "desk": "A", "pad": "x" * size}).encode()
        yield dpb.StageWriteRequest(
            stage_id=stage_id, topic="orders", messages=[pb.PublishMessage(data=doc)], complete=True
        )

    return requests()


async def test_one_user_cannot_take_every_snapshot(start_secured: StartSecured) -> None:
    """``reader`` holds its ``max_snapshots`` (2, with the longest lease): the next is refused,
    naming the quota, while ``trader`` still opens one; before, one user took all 256."""
    s = await start_secured(roles=QUOTA_ROLES)
    async with data_stub(s, "reader") as reader, data_stub(s, "trader") as trader:
        for _ in range(2):
            await reader("OpenSnapshot", dpb.OpenSnapshotRequest(topic="orders", lease_seconds=86_400))
        with pytest.raises(ResourceExhaustedError, match="max_snapshots"):
            await reader("OpenSnapshot", dpb.OpenSnapshotRequest(topic="orders", lease_seconds=86_400))
        snap = await trader("OpenSnapshot", dpb.OpenSnapshotRequest(topic="orders"))
        assert snap.record_count == len(DESK_A_ROWS)


async def test_one_user_cannot_fill_the_staging_area(start_secured: StartSecured) -> None:
    """``trader`` stages up to its ``max_staged_bytes``: the stage over it is refused (and not
    kept), while ``writer`` still stages; before, one user filled the server's 2 GiB."""
    s = await start_secured(roles=QUOTA_ROLES)
    async with data_stub(s, "trader") as trader, data_stub(s, "writer") as writer:
        assert (await trader("StageWrite", staged("t1", 3000))).message_count == 1
        with pytest.raises(ResourceExhaustedError, match="max_staged_bytes"):
            await trader("StageWrite", staged("t2", 3000))
        assert (await writer("StageWrite", staged("w1", 3000))).message_count == 1
        with pytest.raises(NotFoundError):  # the refused stage was not kept
            await trader("CommitStages", dpb.CommitStagesRequest(topic="orders", stage_ids=["t2"]))


async def test_one_user_cannot_open_unbounded_subscriptions(start_secured: StartSecured) -> None:
    """``trader`` holds its ``max_subscriptions`` (3): the next is refused, naming the quota;
    ``reader`` still subscribes. Before, 1,000 subscriptions of one
    user slowed every publish a hundredfold."""
    s = await start_secured(roles=QUOTA_ROLES)
    async with s.client("trader") as trader, s.client("reader") as reader:
        streams = [trader.subscribe("orders") for _ in range(3)]
        for stream in streams:
            assert [e.kind for e in await take(stream, 1)] == ["subscribed"]
        with pytest.raises(ResourceExhaustedError, match="max_subscriptions"):
            await take(trader.sow_and_subscribe("orders"), 1)
        other = reader.subscribe("orders")
        assert [e.kind for e in await take(other, 1)] == ["subscribed"]
        for stream in [*streams, other]:
            stream.cancel()


def test_made_up_topic_names_do_not_grow_a_users_rights_cache() -> None:
    reader = RoleConfig(name="reader", read=("orders", "^desk\\."), filter="/qty > 1")
    access = Access("alice", (reader,))
    for i in range(3 * MEMO_LIMIT):  # a client asking about ever new names, for the server's life
        assert not access.can_read(f"nope{i}")
        assert access.entitlement(f"nope{i}") is None
    assert len(access._readable) <= MEMO_LIMIT
    assert len(access._entitlement) <= MEMO_LIMIT
    assert access.can_read("desk.fx")
    assert access.entitlement("orders") is not None


def test_quotas_are_checked_when_the_config_is_read(tmp_path: Path) -> None:
    bad = [{**ROLES[0], "max_subscriptions": -1}]
    with pytest.raises(ConfigError, match="max_subscriptions: a whole number"):
        secured_config(tmp_path, roles=bad)
    roles = {r.name: r for r in secured_config(tmp_path, roles=QUOTA_ROLES).security.roles}  # type: ignore[union-attr]
    assert roles["reader"].quota("max_snapshots") == 2
    assert roles["admin"].quota("max_snapshots") is None  # an admin role has no default quota
    assert roles["writer"].quota("max_subscriptions") == 3


# --- 8: unauthenticated resource use ------------------------------------------------------------


async def test_connections_that_never_handshake_are_dropped_and_capped(start_secured: StartSecured) -> None:
    """20 TCP connections that never send a byte, against ``max_connections = 8``: those past
    the cap are closed at once, the rest when ``handshake_timeout`` ends (before: held 120 s,
    until 20,000 of them kept a new admin client out); then the admin gets in."""
    s = await start_secured(server={"handshake_timeout": "300ms", "max_connections": 8})
    host, port = s.target.rsplit(":", 1)
    conns = [await asyncio.open_connection(host, int(port)) for _ in range(20)]
    try:
        async with asyncio.timeout(10):  # each read ends when the server closes the connection
            ends = await asyncio.gather(*(reader.read() for reader, _ in conns))
        timed_out = [e for e in ends if b"before handshake timeout" in e]  # HTTP/2 GOAWAY's text
        assert 0 < len(timed_out) <= 8  # the rest were over the cap: closed at once, unread
    finally:
        for _, writer in conns:
            writer.close()
    async with s.client("admin") as admin:
        assert [t.name for t in await admin.list_topics()] == ["audit", "orders"]


def test_connection_limits_are_core_channel_arguments(tmp_path: Path) -> None:
    cfg = secured_config(tmp_path, server={"handshake_timeout": "2s"}).server
    limits = dict(connection_limits(cfg))
    assert limits["grpc.server_handshake_timeout_ms"] == 2000
    assert limits["grpc.max_allowed_incoming_connections"] >= 64
    with pytest.raises(ConfigError, match="max_connections"):
        secured_config(tmp_path, server={"max_connections": -1})


async def post_headers(s: Secured, token: str | None, length: int) -> bytes:
    """POST a ListTopics whose body is announced at ``length`` bytes but never sent beyond its
    first kilobyte; the status line of the answer (the server must answer on the headers)."""
    assert s.server.console is not None
    host, port = s.server.console.url.split("//")[1].rstrip("/").rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    auth = f"authorization: Bearer {token}\r\n" if token else ""
    writer.write(
        f"POST /sowdb.v1.SowService/ListTopics HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/proto\r\n"
        f"{auth}content-length: {length}\r\n\r\n".encode()
        + b"\x00" * 1024
    )
    await writer.drain()
    try:
        return await reader.readline()
    finally:
        writer.close()


async def test_the_console_refuses_a_body_before_reading_it(start_secured: StartSecured) -> None:
    """24 concurrent 16 MB bodies without a valid token are each refused on their headers (401),
    while the bodies are still unsent -- before, the gateway read every one whole before the gRPC
    port said 401, and the process kept the 2.4 GB. A body announced over a message is refused
    likewise (413), even with a valid token."""
    s = await start_secured(server={"http_listen": "127.0.0.1:0"})
    big = 16 * 1024**2
    async with asyncio.timeout(10):  # the bodies never come: only an answer on the headers ends these
        answers = await asyncio.gather(*(post_headers(s, None if i % 2 else "wrong", big) for i in range(24)))
        assert {a.split()[1] for a in answers} == {b"401"}
        assert (await post_headers(s, TOKENS["reader"], 1 << 30)).split()[1] == b"413"


async def test_connections_that_never_call_are_closed_when_idle(start_secured: StartSecured) -> None:
    """Issue 37, finding 4: clients that finish their handshakes and never call held every slot
    of ``max_connections`` for ever, and an admin was refused. Now a connection with no call for
    ``idle_timeout`` is closed, and the admin gets in."""
    s = await start_secured(server={"max_connections": 4, "idle_timeout": "500ms"})
    options = [("grpc.use_local_subchannel_pool", 1)]  # one connection per channel, as 4 clients
    squatters = [grpc.aio.insecure_channel(s.target, options=options) for _ in range(4)]
    try:
        for channel in squatters:
            async with asyncio.timeout(10):
                await channel.channel_ready()  # TCP, the HTTP/2 preface and SETTINGS: no call
        async with asyncio.timeout(10):  # closed by the server once idle (before: held for ever)
            for channel in squatters:
                while channel.get_state() == grpc.ChannelConnectivity.READY:
                    await channel.wait_for_state_change(grpc.ChannelConnectivity.READY)
        async with s.client("admin") as admin:
            assert [t.name for t in await admin.list_topics()] == ["audit", "orders"]
    finally:
        for channel in squatters:
            await channel.close()


def test_idle_timeout_is_a_core_channel_argument(tmp_path: Path) -> None:
    limits = dict(connection_limits(secured_config(tmp_path, server={"idle_timeout": "2s"}).server))
    assert limits["grpc.max_connection_idle_ms"] == 2000
    assert "grpc.max_connection_idle_ms" not in dict(
        connection_limits(secured_config(tmp_path, server={"idle_timeout": "0s"}).server)
    )
    with pytest.raises(ConfigError, match="idle_timeout"):
        secured_config(tmp_path, server={"idle_timeout": "1ms"})
