"""Issue 26, leaks (A-2: a record outside the entitlement is never sent, nor anything about it):
each test performs the attack a hostile but authenticated caller would, through the real
server, and checks that it learns nothing about desk B's rows and changes nothing it may not."""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import orjson
import pytest

from sowdb.config import ConfigError
from sowdb.engine.state import columns as cols
from sowdb_api.v1 import data_pb2 as dpb
from sowdb_api.v1 import data_pb2_grpc
from sowdb_api.v1 import sow_pb2 as pb
from sowdb_client import FailedPreconditionError, InvalidArgumentError, PermissionDeniedError, PublishError
from sowdb_client.errors import from_rpc_error
from tests.security.conftest import DESK_A_ROWS, DESK_B_ROWS, ROLES, USERS, Secured, secured_config
from tests.support import TOKENS, take

INJECTIONS = ["1=1) OR (1=1", "TRUE) OR (TRUE", "/desk = 'B') OR (/desk = 'B'"]


async def open_snapshot(s: Secured, user: str, **request: Any) -> tuple[dpb.OpenSnapshotResponse, list[dict[str, Any]]]:
    """OpenSnapshot then ReadSnapshot as ``user``: the response and the records read."""
    meta = (("authorization", f"Bearer {TOKENS[user]}"),)
    async with grpc.aio.insecure_channel(s.target) as channel:
        stub = data_pb2_grpc.DataServiceStub(channel)
        try:
            snap = await stub.OpenSnapshot(dpb.OpenSnapshotRequest(**request), metadata=meta)
            rows = [
                orjson.loads(d)
                async for resp in stub.ReadSnapshot(
                    dpb.ReadSnapshotRequest(snapshot_id=snap.snapshot_id), metadata=meta
                )
                for d in resp.records.data
            ]
        except grpc.RpcError as exc:
            raise from_rpc_error(exc) from None
    return snap, rows


# 1. filter text injection


@pytest.mark.parametrize("injected", INJECTIONS)
async def test_a_filter_that_closes_the_entitlements_parenthesis_is_refused(secured: Secured, injected: str) -> None:
    for bookmark in ("", "now", "1"):  # current, and a historical snapshot (Spark's bookmark option)
        with pytest.raises(InvalidArgumentError) as err:
            await open_snapshot(secured, "reader", topic="orders", filter=injected, bookmark=bookmark)
        assert err.value.field == "filter"
    async with secured.client("reader") as c:
        with pytest.raises(InvalidArgumentError):
            await c.sow("orders", filter=injected).records()


async def test_a_snapshot_holds_the_entitled_rows_only(secured: Secured) -> None:
    for flt in ("", "/qty > 0", "/desk = 'B'", "/desk = 'B' OR /desk = 'A'", "NOT (/desk = 'A')"):
        for bookmark in ("", "1"):
            snap, rows = await open_snapshot(secured, "reader", topic="orders", filter=flt, bookmark=bookmark)
            assert all(r["desk"] == "A" for r in rows), (flt, bookmark)
            assert snap.record_count == len(rows)
    _, rows = await open_snapshot(secured, "reader", topic="orders")
    assert sorted(r["orderId"] for r in rows) == [r["orderId"] for r in DESK_A_ROWS]


# 2. records_scanned as an oracle


async def figures(s: Secured, user: str, **query: Any) -> tuple[int, int, int]:
    """(records_scanned, records_matched, records returned) of a query as ``user``."""
    async with s.client(user) as c:
        result = c.sow("orders", **query)
        rows = await result.records()
    end = result.group_end
    assert end is not None
    return end.records_scanned, end.records_matched, len(rows)


PROBES: list[
    tuple[dict[str, Any], dict[str, Any]]
] = [  # pairs of queries that differ only in what they ask about desk B's rows
    ({"filter": "/secret = 's-20'"}, {"filter": "/secret = 'nope'"}),  # the index on /secret
    ({"filter": "/orderId = 20"}, {"filter": "/orderId = 999"}),  # a key lookup: existence
    ({"sow_keys": ["20"]}, {"sow_keys": ["999"]}),
    ({"filter": "/orderId = 20", "bookmark": "now"}, {"filter": "/orderId = 999", "bookmark": "now"}),
    ({"filter": "/orderId = 20", "bookmark": "10"}, {"filter": "/orderId = 999", "bookmark": "10"}),
]


@pytest.mark.parametrize(("hit", "miss"), PROBES)
async def test_query_figures_say_nothing_about_hidden_rows(
    start_secured: Any, hit: dict[str, Any], miss: dict[str, Any]
) -> None:
    s = await start_secured(
        topics={"topic": [{"name": "orders", "key": ["/orderId"], "indexes": ["/secret"], "history": {"window": "1d"}}]}
    )
    # the probe tells an admin, whom it may tell (so the test can fail)
    assert (await figures(s, "admin", **hit))[0] != (await figures(s, "admin", **miss))[0]
    for user in ("reader", "trader"):
        assert await figures(s, user, **hit) == await figures(s, user, **miss)


async def test_a_bisection_on_the_columns_recovers_no_hidden_field(
    secured: Secured, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue's attack: ``/pin > N`` served by the columns; records_scanned, halving N each
    query, would recover desk B's pins in ~20 queries."""
    monkeypatch.setattr(cols, "MIN_RECORDS", 5)
    engine = secured.server.engine
    assert engine is not None
    await figures(secured, "admin", filter="/pin > 0")  # wants the column
    while engine.topics.build_columns():
        pass

    async def bisect(user: str) -> int:
        low, high = 0, 1 << 20  # the largest pin is in (low, high]
        while high - low > 1:
            mid = (low + high) // 2
            low, high = (mid, high) if (await figures(secured, user, filter=f"/pin > {mid}"))[0] else (low, mid)
        return high

    assert await bisect("admin") == max(r["pin"] for r in DESK_B_ROWS)  # the oracle, for an admin
    assert await bisect("reader") == 1  # tells nothing


async def test_snapshot_figures_say_nothing_about_hidden_rows(start_secured: Any) -> None:
    s = await start_secured(
        topics={"topic": [{"name": "orders", "key": ["/orderId"], "indexes": ["/secret"], "history": {"window": "1d"}}]}
    )
    for hit, miss in PROBES:
        if "sow_keys" in hit:
            continue
        a, _ = await open_snapshot(s, "reader", topic="orders", **hit)
        b, _ = await open_snapshot(s, "reader", topic="orders", **miss)
        assert (a.records_scanned, a.record_count) == (b.records_scanned, b.record_count), hit
    a, _ = await open_snapshot(s, "admin", topic="orders", filter="/orderId = 20")
    assert a.records_scanned == 1


# 3. writes onto hidden rows


async def test_a_delta_cannot_pull_a_hidden_row_into_view(secured: Secured) -> None:
    before = await secured.state()
    async with secured.client("trader") as c:
        with pytest.raises(PublishError) as err:
            await c.publish("orders", [{"orderId": 20, "desk": "A"}], delta=True)
        assert err.value.code == grpc.StatusCode.PERMISSION_DENIED
        assert err.value.message_index == 0
        assert err.value.stored == 0
        assert await c.sow("orders", filter="/orderId = 20").records() == []
    assert await secured.state() == before


@pytest.mark.parametrize(
    "messages",
    [
        [{"orderId": 21, "desk": "A", "qty": 1}],  # replaces a hidden row
        [{"orderId": 1, "desk": "B", "qty": 1}],  # moves a visible row out of sight
        [{"orderId": 50, "desk": "B"}],  # makes a row it could not see
        [{"orderId": 60, "desk": "A"}, {"orderId": 22, "desk": "A"}],  # one bad message refuses the batch
    ],
)
async def test_a_row_filtered_writer_writes_inside_its_rows_only(secured: Secured, messages: list[Any]) -> None:
    before = await secured.state()
    async with secured.client("trader") as c:
        for delta in (False, True):
            with pytest.raises(PublishError) as err:
                await c.publish("orders", messages, delta=delta)
            assert err.value.code == grpc.StatusCode.PERMISSION_DENIED
            assert err.value.stored == 0
    assert await secured.state() == before


async def test_a_row_filtered_writer_still_writes_its_own_rows(secured: Secured) -> None:
    async with secured.client("trader") as c:
        await c.publish("orders", [{"orderId": 2, "desk": "A", "qty": 7}, {"orderId": 60, "desk": "A"}])
        await c.publish("orders", [{"orderId": 3, "qty": 8}], delta=True)
        rows = {r.sow_key: r.json() for r in await c.sow("orders", filter="/orderId IN (2, 3, 60)").records()}
    assert rows == {
        "2": {"orderId": 2, "desk": "A", "qty": 7},
        "3": {"orderId": 3, "desk": "A", "qty": 8},
        "60": {"orderId": 60, "desk": "A"},
    }


async def test_sow_delete_reaches_visible_rows_only(secured: Secured) -> None:
    async with secured.client("trader") as c:
        assert await c.sow_delete("orders", sow_keys=["20", "21"]) == 0
        assert await c.sow_delete("orders", filter="/secret = 's-22'") == 0
        assert await c.sow_delete("orders", filter="/qty > 0") == len(DESK_A_ROWS)
    async with secured.client("admin") as c:
        assert sorted(r.json()["desk"] for r in await c.sow("orders").records()) == ["B"] * 5


async def test_a_write_only_role_deletes_by_key_only(secured: Secured) -> None:
    before = await secured.state()
    async with secured.client("writer") as c:
        with pytest.raises(PermissionDeniedError) as err:
            await c.sow_delete("orders", filter="/secret = 's-20'")  # 1 or 0 would answer it
        assert "delete by filter" in str(err.value)
        assert await secured.state() == before
        assert await c.sow_delete("orders", sow_keys=["20"]) == 1
        assert await c.sow_delete("orders", data={"orderId": 21}) == 1


# 4. names and counts


async def test_an_unknown_topic_names_only_the_callers_topics(start_secured: Any) -> None:
    roles = [*ROLES, {"name": "ord", "read": ["^ord"]}]
    s = await start_secured(roles=roles, users={**USERS, "ordfan": ["ord"]})
    for user in ("reader", "trader", "norights"):  # a name it may not read: the same answer, found or not
        async with s.client(user) as c:
            for topic in ("audit", "nope"):
                with pytest.raises(PermissionDeniedError) as denied:
                    await c.sow(topic).records()
                if topic == "nope":
                    assert "audit" not in denied.value.message
    async with s.client("writer") as c:
        with pytest.raises(PermissionDeniedError):
            await c.sow_delete("nope", sow_keys=["1"])
    async with s.client("ordfan") as c:  # may read every name starting with ord: told which exist
        with pytest.raises(FailedPreconditionError) as err:
            await c.sow("ordersx").records()
        assert "orders" in err.value.message
        assert "audit" not in err.value.message
    with pytest.raises(FailedPreconditionError) as err:
        await open_snapshot(s, "ordfan", topic="ordersx")
    assert "audit" not in err.value.message
    async with s.client("admin") as c:  # an admin is told every topic
        with pytest.raises(FailedPreconditionError) as err:
            await c.sow("ordersx").records()
        assert "audit" in err.value.message


async def test_topic_counts_cover_no_hidden_rows(secured: Secured) -> None:
    async with secured.client("admin") as c:
        assert {t.name: t.record_count for t in await c.list_topics()} == {"orders": 10, "audit": 1}
        assert (await c.stats("orders", topics_only=True)).topics[0].records == 10
    async with secured.client("reader") as c:
        assert {t.name: t.record_count for t in await c.list_topics()} == {"orders": 0}
        (figures_,) = (await c.stats("orders", topics_only=True)).topics
    counts = (figures_.records, figures_.bytes_stored, figures_.publishes, figures_.bytes_published)
    assert counts == (0, 0, 0, 0)


def scrape(port: int, token: str | None = None) -> tuple[int, str]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/metrics")
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@pytest.mark.parametrize("metrics_user", ["", "prom"])
async def test_metrics_name_no_user_and_may_ask_for_a_token(start_secured: Any, metrics_user: str) -> None:
    s = await start_secured(
        users={**USERS, "prom": []},
        server={"metrics_listen": "127.0.0.1:0"},
        security={"metrics_user": metrics_user} if metrics_user else {},
    )
    assert s.server.metrics is not None
    port = s.server.metrics.port
    async with s.client("reader") as c:
        stream = c.subscribe("orders")
        await take(stream, 1)  # subscribed
        if metrics_user:
            for token in (None, "wrong", TOKENS["reader"], TOKENS["admin"]):
                status, body = await asyncio.to_thread(scrape, port, token)
                assert status == 401, token
                assert "sowdb_" not in body
        status, body = await asyncio.to_thread(scrape, port, TOKENS["prom"] if metrics_user else None)
        stream.cancel()
    assert status == 200
    assert 'sowdb_subscription_queued_events{sub_id="' in body
    assert "reader" not in body
    assert "user=" not in body


async def test_staged_writes_commit_inside_the_committers_rows_only(secured: Secured) -> None:
    """The Spark write path (StageWrite, CommitStages) under the same rule as a publish."""
    before = await secured.state()
    meta = (("authorization", f"Bearer {TOKENS['trader']}"),)
    docs = [{"orderId": 61, "desk": "A"}, {"orderId": 23, "desk": "A", "qty": 0}]  # the second replaces a hidden row

    async def requests() -> AsyncIterator[dpb.StageWriteRequest]:
        messages = [pb.PublishMessage(data=orjson.dumps(d)) for d in docs]
        yield dpb.StageWriteRequest(stage_id="job-1", topic="orders", messages=messages, complete=True)

    async with grpc.aio.insecure_channel(secured.target) as channel:
        stub = data_pb2_grpc.DataServiceStub(channel)
        await stub.StageWrite(requests(), metadata=meta)
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.CommitStages(dpb.CommitStagesRequest(topic="orders", stage_ids=["job-1"]), metadata=meta)
    assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "message 1" in (err.value.details() or "")
    assert await secured.state() == before


def test_metrics_user_must_be_a_user_of_the_users_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="metrics_user: 'ghost' is not a user of the users file"):
        secured_config(tmp_path, security={"metrics_user": "ghost"})
