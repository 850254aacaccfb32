"""Security (SPEC §11) through a real server: tokens (A-1), topic rights and row entitlements on
every read path (A-2), regex topics and ListTopics (A-3), reload (A-4) — each denied call
checked to have changed nothing."""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from sowdb.config import ConfigError, config_from_dict
from sowdb.server import SowServer
from sowdb_client import (
    AsyncClient,
    Mirror,
    PermissionDeniedError,
    SowdbError,
    UnauthenticatedError,
)
from tests.support import TOKENS, Secured, acollect, serving, take, users_toml
from tests.support import secured_config as support_secured_config

ROLES: list[dict[str, Any]] = [
    {
        "name": "fx_trader",
        "read": ["orders", "^mark", "desk_totals", "orders_fast"],
        "write": ["orders"],
        "filter": "/desk = 'FX'",
    },
    {"name": "viewer", "read": ["orders"]},
    {"name": "admin", "read": [".*"], "write": [".*"], "admin": True},
]
USERS = {"trader": ["fx_trader"], "viewer": ["viewer"], "root": ["admin"], "gone": ["viewer"]}
TOPICS: dict[str, Any] = {
    "topic": [
        {"name": "orders", "key": ["/id"], "history": {"window": "1d"}},
        {"name": "markers", "key": ["/id"]},
        {"name": "secrets", "key": ["/id"]},
    ],
    "view": [
        {
            "name": "desk_totals",
            "underlying": "orders",
            "grouping": ["/desk"],
            "projection": ["/desk AS /desk", "SUM(/px) AS /px"],
        }
    ],
    "conflated_topic": [{"name": "orders_fast", "underlying": "orders", "interval": "100ms"}],
}


def write_users(path: Path, users: dict[str, list[str]]) -> None:
    path.write_text(users_toml(users))


def secured_config(tmp_path: Path, users: dict[str, list[str]] = USERS, **security: Any) -> Any:
    return support_secured_config(tmp_path, roles=ROLES, users=users, topics=TOPICS, security=security)


@pytest.fixture
async def secured(tmp_path: Path) -> AsyncIterator[Secured]:
    async with serving(secured_config(tmp_path)) as server:
        s = Secured(server)
        async with s.client("root") as root:
            await root.publish("orders", [{"id": i, "desk": "FX" if i % 2 else "EQ", "px": i} for i in range(10)])
            await root.publish("markers", [{"id": 1, "desk": "FX"}, {"id": 2, "desk": "EQ"}])
            await root.publish("secrets", [{"id": 1, "desk": "FX"}])
        yield s


async def state(s: Secured) -> list[tuple[str, str, bytes]]:
    async with s.client("root") as c:
        return sorted((r.topic, r.sow_key, r.data) for r in await c.sow("^(orders|markers|secrets)$").records())


async def test_calls_without_a_valid_token_are_unauthenticated(secured: Secured) -> None:
    before = await state(secured)
    for client in (secured.client(None), AsyncClient(secured.target, token="not-a-token")):
        async with client as c:
            with pytest.raises(UnauthenticatedError):
                await c.sow("orders").records()
            with pytest.raises(UnauthenticatedError):
                await c.publish("orders", [{"id": 100, "desk": "FX"}])
            with pytest.raises(UnauthenticatedError):
                await c.list_topics()
            assert await c.ping() > 0  # health stays open
    assert await state(secured) == before


MATRIX = [
    # user, operation, topic, allowed
    ("trader", "publish", "orders", True),
    ("trader", "publish", "markers", False),
    ("trader", "sow", "orders", True),
    ("trader", "sow", "secrets", False),
    ("trader", "sow_and_subscribe", "markers", True),
    ("trader", "sow_and_subscribe", "secrets", False),
    ("trader", "subscribe", "orders", True),
    ("trader", "subscribe", "secrets", False),
    ("trader", "sow_delete", "orders", True),
    ("trader", "sow_delete", "markers", False),
    ("viewer", "publish", "orders", False),
    ("viewer", "sow", "orders", True),
    ("viewer", "sow", "markers", False),
    ("viewer", "subscribe", "markers", False),
    ("viewer", "sow_delete", "orders", False),
    ("root", "sow_delete", "secrets", True),
    ("root", "subscribe", "secrets", True),
]


async def _attempt(c: AsyncClient, op: str, topic: str) -> None:
    if op == "publish":
        await c.publish(topic, [{"id": 50, "desk": "FX"}])
    elif op == "sow":
        await c.sow(topic).records()
    elif op == "sow_delete":
        await c.sow_delete(topic, sow_keys=["1"])
    else:
        stream = c.sow_and_subscribe(topic) if op == "sow_and_subscribe" else c.subscribe(topic, bookmark="0")
        await take(stream, 1)
        stream.cancel()


@pytest.mark.parametrize(("user", "op", "topic", "allowed"), MATRIX)
async def test_the_entitlement_matrix(secured: Secured, user: str, op: str, topic: str, allowed: bool) -> None:
    before = await state(secured)
    async with secured.client(user) as c:
        if allowed:
            await _attempt(c, op, topic)
            return
        with pytest.raises(SowdbError) as err:  # a publish refusal is a PublishError in-band
            await _attempt(c, op, topic)
    assert err.value.code == grpc.StatusCode.PERMISSION_DENIED
    assert topic in err.value.message
    assert ("read" if op not in ("publish", "sow_delete") else "write") in err.value.message
    assert await state(secured) == before  # a denied call changed nothing


async def test_replace_and_checkpoint_rights(secured: Secured, tmp_path: Path) -> None:
    async with secured.client("trader") as c:
        stream = c.sow_and_subscribe("orders", filter="/px > 0", oof=True)
        await take(stream, 4)
        await c.replace_subscription(stream.sub_id, filter="/px > 5", oof=True)  # its own: allowed, still filtered
        stream.cancel()
    from sowdb_api.v1 import admin_pb2, admin_pb2_grpc

    for user, allowed in (("trader", False), ("root", True)):
        async with grpc.aio.insecure_channel(secured.target) as channel:
            stub = admin_pb2_grpc.AdminServiceStub(channel)
            request = admin_pb2.CheckpointRequest(directory=str(tmp_path / f"copy-{user}"))
            metadata = (("authorization", f"Bearer {TOKENS[user]}"),)
            if allowed:
                await stub.Checkpoint(request, metadata=metadata)
            else:
                with pytest.raises(grpc.aio.AioRpcError) as err:
                    await stub.Checkpoint(request, metadata=metadata)
                assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert (tmp_path / "copy-root").is_dir()
    assert not (tmp_path / "copy-trader").exists()


async def test_regex_topics_and_list_topics_show_only_readable_topics(secured: Secured) -> None:
    async with secured.client("trader") as c:
        listed = sorted(t.name for t in await c.list_topics())
        assert listed == ["desk_totals", "markers", "orders", "orders_fast"]
        topics = {r.topic for r in await c.sow("^(orders|markers|secrets)$").records()}
        assert topics == {"orders", "markers"}
        stream = c.subscribe(".*")
        await take(stream, 1)
        async with secured.client("root") as root:
            await root.publish("secrets", [{"id": 2, "desk": "FX"}])
            await root.publish("markers", [{"id": 3, "desk": "FX"}])
        # up to the markers record: orders_fast, a conflated topic, may publish its first
        # refresh meanwhile (on a loaded machine it comes after the subscription is placed)
        seen: list[str] = []
        while "markers" not in seen:
            (event,) = await take(stream, 1)
            seen += [r.topic for r in event.records]
        assert "secrets" not in seen, seen  # never secrets
        assert seen.count("markers") == 1, seen
        stream.cancel()
    async with secured.client("root") as root:
        assert len(await root.list_topics()) == 5


async def test_stats_show_only_what_the_caller_may_see(secured: Secured) -> None:
    """Stats (SPEC §12) under §11: the server-wide figures and other users' subscriptions need an
    admin role; without one, ``topics_only`` gives the topics the user may read and its own
    subscriptions, and a topic named that it may not read is refused."""
    async with secured.client("viewer") as viewer, secured.client("trader") as trader:
        mine, theirs = viewer.subscribe("orders"), trader.subscribe("^mark")
        await take(mine, 1)
        await take(theirs, 1)
        with pytest.raises(PermissionDeniedError, match="user 'viewer' may not see the server-wide figures"):
            await viewer.stats()
        seen = await viewer.stats(topics_only=True)
        assert [t.name for t in seen.topics] == ["orders"]
        assert [s.user for s in seen.subscriptions] == ["viewer"]
        assert not seen.HasField("server")
        with pytest.raises(PermissionDeniedError, match="'secrets'"):
            await viewer.stats("secrets", topics_only=True)
        regex = await trader.stats("^(orders|markers|secrets)$", topics_only=True)
        assert [t.name for t in regex.topics] == ["markers", "orders"]
        assert [(s.user, s.topic) for s in regex.subscriptions] == [("trader", "^mark")]
        async with secured.client("root") as root:
            full = await root.stats()
        assert len(full.topics) == 5
        assert sorted(s.user for s in full.subscriptions) == ["trader", "viewer"]
        stats_calls = next(r for r in full.server.rpcs if r.rpc == "AdminService/Stats")
        assert dict(stats_calls.errors) == {"PERMISSION_DENIED": 2}
        mine.cancel()
        theirs.cancel()
    async with secured.client(None) as nobody:
        with pytest.raises(UnauthenticatedError):
            await nobody.stats(topics_only=True)


async def test_a_row_filtered_user_never_sees_a_row_outside_its_entitlement(secured: Secured) -> None:
    """A randomized run: a trader (desk FX only) follows ``orders`` through every read path —
    a mirror with oof, a delta mirror, a page, an aggregation, a plain subscription with deletes,
    a historical replay — while updates move records in and out of the FX desk, delete and
    recreate them. No event ever carries a non-FX version, oofs included, and each mirror ends
    equal to the FX slice of the final state."""
    rnd = random.Random(7)
    trader = secured.client("trader")
    streams = {
        "oof": trader.sow_and_subscribe("orders", oof=True, batch_size=100),
        "delta": trader.sow_and_subscribe("orders", oof=True, delta=True, batch_size=100),
        "page": trader.sow_and_subscribe("orders", order_by="/px DESC", top_n=3, skip_n=0, oof=True, batch_size=100),
        "groups": trader.sow_and_subscribe("orders", grouping=["/desk"], projection=["/desk", "COUNT(/id) AS /n"]),
        "plain": trader.subscribe("orders"),
        "replay": trader.subscribe("orders", bookmark="0"),
    }
    seen: dict[str, list[Any]] = {name: [] for name in streams}
    mirrors = {"oof": Mirror(), "delta": Mirror(delta=True)}

    applied = asyncio.Event()  # a mirror took an event

    async def follow(name: str) -> None:
        async for e in streams[name]:
            if name in mirrors:
                mirrors[name].apply(e)
                applied.set()
            for r in e.records:
                seen[name].append((e.kind, r.json()))

    followers = [asyncio.create_task(follow(n)) for n in streams]
    async with secured.client("root") as root:
        for _n in range(300):
            i = rnd.randrange(14)
            if rnd.random() < 0.15:
                await root.sow_delete("orders", sow_keys=[str(i)])
            else:
                await root.publish("orders", [{"id": i, "desk": rnd.choice(["FX", "EQ"]), "px": rnd.randrange(100)}])
        final = {r.sow_key: r.json() for r in await root.sow("orders", filter="/desk = 'FX'").records()}

    def mirrored() -> dict[str, dict[str, Any]]:
        return {name: {k: r.json() for (_, k), r in m.records.items()} for name, m in mirrors.items()}

    with contextlib.suppress(TimeoutError):  # (the assertions below then say what differs)
        async with asyncio.timeout(30):  # every stream drained: the mirrors reach the final state
            while any(m != final for m in mirrored().values()):  # (on a loaded machine, seconds)
                applied.clear()
                await applied.wait()
    await asyncio.sleep(0.2)  # and what the other streams had in flight
    for t in followers:
        t.cancel()
    await trader.close()
    for name, events in seen.items():
        assert events, name
        for kind, doc in events:
            if name == "groups":
                assert doc.get("desk") == "FX", (name, kind, doc)
            elif doc:  # a key-only oof carries {}
                assert doc.get("desk", "FX") == "FX", (name, kind, doc)
    for name, got in mirrored().items():
        assert got == final, name


async def test_views_and_conflated_topics_are_read_through_the_entitlement(secured: Secured) -> None:
    async with secured.client("trader") as c:
        assert [r.json() for r in await c.sow("desk_totals").records()] == [{"desk": "FX", "px": 25}]
        await asyncio.sleep(0.3)  # the conflated topic's first refresh
        fast = c.sow_and_subscribe("orders_fast", batch_size=100)
        opening = await take(fast, 4)  # subscribed, group_begin, sow, group_end
        assert [e.kind for e in opening] == ["subscribed", "group_begin", "sow", "group_end"]
        assert {r.json()["desk"] for r in opening[2].records} == {"FX"}
        async with secured.client("root") as root:
            await root.publish("orders", [{"id": 20, "desk": "EQ", "px": 1}, {"id": 21, "desk": "FX", "px": 2}])
        (event,) = await take(fast, 1)
        assert [r.json()["id"] for r in event.records] == [21]
        fast.cancel()
    async with secured.client("viewer") as c:
        with pytest.raises(PermissionDeniedError):
            await c.sow("desk_totals").records()


def reload_without_orders_for_viewer(server: SowServer, tmp_path: Path, users: dict[str, list[str]] = USERS) -> int:
    """What a SIGHUP does after the viewer role lost ``orders`` (and ``users`` were written)."""
    from dataclasses import replace

    from sowdb.config import RoleConfig

    roles = [dict(r) for r in ROLES]
    roles[1]["read"] = ["markers"]  # viewer loses orders
    write_users(tmp_path / "users.toml", users)
    config = secured_config(tmp_path, users)
    assert config.security is not None
    new_roles = tuple(RoleConfig(r["name"], tuple(r.get("read", ())), tuple(r.get("write", ())),
                                 r.get("filter", ""), r.get("admin", False)) for r in roles)  # fmt: skip
    return server.reload(replace(config, security=replace(config.security, roles=new_roles)))


async def ended(stream: Any) -> SowdbError:
    """The error a subscription's stream ends with."""
    with pytest.raises(SowdbError) as err:
        await asyncio.wait_for(acollect(stream, []), 5)
    return err.value


async def test_a_reload_ends_every_kind_of_subscription_that_lost_its_right(secured: Secured, tmp_path: Path) -> None:
    """A-4 for plain, query, aggregated, paginated, historical and conflated subscriptions
    alike (issue 27: an aggregated one ran as nobody, kept streaming and showed no user)."""
    async with secured.client("viewer") as c:
        streams = [
            c.subscribe("orders"),
            c.sow_and_subscribe("orders"),
            c.sow_and_subscribe("orders", grouping=["/desk"], projection=["/desk AS /desk", "SUM(/px) AS /px"]),
            c.sow_and_subscribe("orders", top_n=2, skip_n=0),
            c.subscribe("orders", bookmark="1"),
            c.sow_and_subscribe("orders", conflation=0.1),
        ]
        for stream in streams:
            await take(stream, 1)
        async with secured.client("root") as root:
            users = {s.user for s in (await root.stats()).subscriptions}
        assert users == {"viewer"}
        assert reload_without_orders_for_viewer(secured.server, tmp_path) == len(streams)
        for stream in streams:
            assert isinstance(await ended(stream), PermissionDeniedError)


async def test_a_reload_applies_new_rights_and_ends_subscriptions_that_lost_theirs(tmp_path: Path) -> None:
    async with serving(secured_config(tmp_path)) as server:
        s = Secured(server)
        kept = s.client("trader")
        lost = s.client("viewer")
        revoked = s.client("gone")
        trader_stream, viewer_stream, gone_stream = (
            kept.subscribe("orders"),
            lost.subscribe("orders"),
            revoked.subscribe("orders"),
        )
        for stream in (trader_stream, viewer_stream, gone_stream):
            await take(stream, 1)
        users = {k: v for k, v in USERS.items() if k != "gone"}  # gone's token is revoked
        assert reload_without_orders_for_viewer(server, tmp_path, users) == 2
        assert isinstance(await ended(viewer_stream), PermissionDeniedError)
        assert isinstance(await ended(gone_stream), PermissionDeniedError)
        with pytest.raises(UnauthenticatedError):
            await revoked.sow("orders").records()  # the revoked token: new calls refused
        with pytest.raises(PermissionDeniedError):
            await lost.sow("orders").records()
        async with s.client("root") as root:
            await root.publish("orders", [{"id": 77, "desk": "FX"}])
        (event,) = await take(trader_stream, 1)  # the trader kept its rights: still live
        assert event.records[0].json()["id"] == 77
        for c in (kept, lost, revoked):
            await c.close()


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"role": [{"name": "r", "read": ["("]}]}, 'role]] #1 "r": read'),
        ({"role": [{"name": "r", "filter": "/a >"}]}, 'role]] #1 "r": filter'),
        ({"security": {"tls_cert": "missing.pem", "tls_key": "missing.key"}}, "tls_cert"),
        ({"users": {"bob": ["no_such_role"]}}, "no_such_role"),
        ({"security": {"anonymous": "nobody"}}, "anonymous"),
    ],
)
def test_security_config_errors_name_the_entry(tmp_path: Path, change: dict[str, Any], words: str) -> None:
    users_file = tmp_path / "users.toml"
    users = change.get("users", {"trader": ["fx_trader"]})
    TOKENS.setdefault("bob", "x")
    write_users(users_file, users)
    raw: dict[str, Any] = {
        **TOPICS,
        "security": {"users_file": str(users_file), **change.get("security", {})},
        "role": change.get("role", ROLES),
    }
    with pytest.raises(ConfigError) as err:
        config_from_dict(raw, source="sowd.toml", base=tmp_path)
    assert words in str(err.value)


async def test_the_data_service_reads_and_writes_under_the_callers_rights(secured: Secured) -> None:
    from sowdb_api.v1 import data_pb2, data_pb2_grpc

    def auth(user: str) -> tuple[tuple[str, str], ...]:
        return (("authorization", f"Bearer {TOKENS[user]}"),)

    async with grpc.aio.insecure_channel(secured.target) as channel:
        stub = data_pb2_grpc.DataServiceStub(channel)
        opened = await stub.OpenSnapshot(data_pb2.OpenSnapshotRequest(topic="orders"), metadata=auth("trader"))
        rows: list[bytes] = []
        async for resp in stub.ReadSnapshot(
            data_pb2.ReadSnapshotRequest(snapshot_id=opened.snapshot_id, partition=0, partitions=1),
            metadata=auth("trader"),
        ):
            rows.extend(resp.records.data)
        async with secured.client("root") as root:
            fx = await root.sow("orders", filter="/desk = 'FX'").records()
        assert sorted(rows) == sorted(r.data for r in fx)
        refusals: list[Any] = [
            stub.OpenSnapshot(data_pb2.OpenSnapshotRequest(topic="secrets"), metadata=auth("trader")),
            stub.OpenSnapshot(data_pb2.OpenSnapshotRequest(topic=".*"), metadata=auth("viewer")),
            stub.DescribeJournal(data_pb2.DescribeJournalRequest(topic="orders"), metadata=auth("trader")),
            stub.CommitStages(data_pb2.CommitStagesRequest(topic="orders", stage_ids=["x"]), metadata=auth("viewer")),
        ]
        for call in refusals:
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await call
            assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED, err.value.details()
        described = await stub.DescribeJournal(data_pb2.DescribeJournalRequest(topic="orders"), metadata=auth("viewer"))
        assert described.last_bookmark > 0  # no row entitlement: the journal is readable
