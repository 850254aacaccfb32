"""The data service through a real server (SPEC §9): pinned snapshots read in slices under a
concurrent publisher, journal range reads, staged writes committed atomically, J-4 producers."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sowdb_api.v1 import data_pb2 as dpb
from sowdb_api.v1 import data_pb2_grpc, sow_pb2_grpc
from sowdb_api.v1 import sow_pb2 as pb
from sowdb_client import AsyncClient, InvalidArgumentError, Message, NotFoundError, OutOfRangeError, PublishError
from sowdb_client.errors import SowdbError, from_rpc_error
from tests.support import Process, Running, make_config, serving

Row = tuple[str, str, int, Any]


def data_stub(sowd: Running) -> tuple[grpc.aio.Channel, Any]:
    channel = grpc.aio.insecure_channel(sowd.target)
    return channel, data_pb2_grpc.DataServiceStub(channel)


async def call(coro: Any) -> Any:
    """Await a unary call, raising the SDK's typed error for a refusal."""
    try:
        return await coro
    except grpc.RpcError as exc:
        raise from_rpc_error(exc) from None


async def read_all(stream: Any) -> list[Row]:
    out: list[Row] = []
    try:
        async for resp in stream:
            cols = resp.records if isinstance(resp, dpb.ReadSnapshotResponse) else resp.entries
            out.extend(
                (t, k, b, json.loads(d))
                for t, k, b, d in zip(cols.topics, cols.sow_keys, cols.bookmarks, cols.data, strict=True)
            )
    except grpc.RpcError as exc:
        raise from_rpc_error(exc) from None
    return out


async def keep_publishing(c: AsyncClient, topic: str, stop: asyncio.Event) -> int:
    n = 0
    while not stop.is_set():
        await c.publish(topic, [{"id": i % 300, "v": n} for i in range(n, n + 50)])
        n += 50
        await asyncio.sleep(0)
    return n


async def test_partitions_of_a_snapshot_are_one_sow_at_its_bookmark_under_a_publisher(sowd: Running) -> None:
    c = sowd.client
    await c.publish("book", [{"id": i, "v": -1} for i in range(300)])
    channel, stub = data_stub(sowd)
    stop = asyncio.Event()
    publisher = asyncio.create_task(keep_publishing(c, "book", stop))
    try:
        await asyncio.sleep(0.05)
        snap = await call(stub.OpenSnapshot(dpb.OpenSnapshotRequest(topic="book", filter="/id < 200")))
        await asyncio.sleep(0.05)  # the publisher goes on changing every record
        parts = [
            await read_all(
                stub.ReadSnapshot(dpb.ReadSnapshotRequest(snapshot_id=snap.snapshot_id, partition=i, partitions=3))
            )
            for i in range(3)
        ]
        again = await read_all(
            stub.ReadSnapshot(dpb.ReadSnapshotRequest(snapshot_id=snap.snapshot_id, partition=1, partitions=3))
        )
    finally:
        stop.set()
        assert await publisher > 0
    expected = await c.sow("book", filter="/id < 200", bookmark=str(snap.bookmark), batch_size=1000).records()
    union = [r for part in parts for r in part]
    assert snap.record_count == len(union) == 200
    assert sorted((r.sow_key, r.bookmark) for r in expected) == sorted((k, b) for _, k, b, _ in union)
    assert all(b <= snap.bookmark for _, _, b, _ in union)
    assert again == parts[1]  # a retried reader reads exactly the same rows
    assert [len(p) for p in parts] == [66, 67, 67]
    await channel.close()


async def test_a_snapshot_as_of_a_bookmark_and_of_a_regex(sowd: Running) -> None:
    c = sowd.client
    first = await c.publish("book", [{"id": i, "v": 0} for i in range(10)])
    await c.publish("book", [{"id": i, "v": 1} for i in range(5)])
    await c.sow_delete("book", filter="/id = 9")
    await c.publish("markers", [{"id": 1}])
    channel, stub = data_stub(sowd)
    snap = await call(stub.OpenSnapshot(dpb.OpenSnapshotRequest(topic="book", bookmark=str(first.last_bookmark))))
    rows = await read_all(stub.ReadSnapshot(dpb.ReadSnapshotRequest(snapshot_id=snap.snapshot_id)))
    assert snap.bookmark == first.last_bookmark
    assert sorted((k, d["v"]) for _, k, _, d in rows) == sorted((str(i), 0) for i in range(10))
    snap = await call(stub.OpenSnapshot(dpb.OpenSnapshotRequest(topic="^(book|markers)$")))
    rows = [
        row
        for i in range(2)
        for row in await read_all(
            stub.ReadSnapshot(dpb.ReadSnapshotRequest(snapshot_id=snap.snapshot_id, partition=i, partitions=2))
        )
    ]
    assert sorted((t, k) for t, k, _, _ in rows) == [("book", str(i)) for i in range(9)] + [("markers", "1")]
    await channel.close()


async def test_snapshot_errors_are_clear(sowd: Running) -> None:
    channel, stub = data_stub(sowd)
    with pytest.raises(InvalidArgumentError) as bad:
        await call(stub.OpenSnapshot(dpb.OpenSnapshotRequest(topic="orders", filter="/price >")))
    assert bad.value.field == "filter"
    assert bad.value.column == 9
    with pytest.raises(SowdbError, match="not a SOW topic"):
        await call(stub.OpenSnapshot(dpb.OpenSnapshotRequest(topic="nowhere")))
    with pytest.raises(NotFoundError, match="open a new one"):
        await read_all(stub.ReadSnapshot(dpb.ReadSnapshotRequest(snapshot_id="nope")))
    snap = await call(stub.OpenSnapshot(dpb.OpenSnapshotRequest(topic="orders", lease_seconds=0.01)))
    with pytest.raises(InvalidArgumentError, match="partition must be between 0 and 1"):
        await read_all(
            stub.ReadSnapshot(dpb.ReadSnapshotRequest(snapshot_id=snap.snapshot_id, partition=2, partitions=2))
        )
    async with asyncio.timeout(10):  # its 10 ms lease ends; this call (what the upkeep does), or the upkeep, ends it
        while len(sowd.engine.snapshots):
            await asyncio.sleep(0.01)
            sowd.engine.snapshots.expire()
    with pytest.raises(NotFoundError):
        await read_all(stub.ReadSnapshot(dpb.ReadSnapshotRequest(snapshot_id=snap.snapshot_id)))
    snap = await call(stub.OpenSnapshot(dpb.OpenSnapshotRequest(topic="orders")))
    assert (await call(stub.CloseSnapshot(dpb.CloseSnapshotRequest(snapshot_id=snap.snapshot_id)))).closed
    assert len(sowd.engine.snapshots) == 0
    await channel.close()


async def test_the_journal_range_holds_every_operation_with_the_whole_record(sowd: Running) -> None:
    c = sowd.client
    await c.publish("orders", [{"orderId": 1, "symbol": "A", "qty": 5}, {"orderId": 2, "symbol": "B", "qty": 6}])
    await c.publish("orders", [{"orderId": 1, "qty": 7}], delta=True)
    await c.publish("notes", [Message({"text": "x"}, sow_key="n1", expiration=0.05)])
    await c.sow_delete("orders", sow_keys=["2"])
    await c.publish("unconfigured", [{"a": 1}])
    for _ in range(100):
        await asyncio.sleep(0.02)
        if not (await c.sow("notes").records()):
            break
    channel, stub = data_stub(sowd)
    rows = await read_all(stub.ReadJournal(dpb.ReadJournalRequest()))
    entries: list[tuple[int, str, str, int, Any]] = []
    async for resp in stub.ReadJournal(dpb.ReadJournalRequest(topic="^(orders|notes)$")):
        e = resp.entries
        entries.extend(zip(e.bookmarks, e.topics, e.sow_keys, e.operations, map(json.loads, e.data), strict=True))
    assert [(t, k, op, d) for _, t, k, op, d in entries] == [
        ("orders", "1", dpb.JOURNAL_OPERATION_PUBLISH, {"orderId": 1, "symbol": "A", "qty": 5}),
        ("orders", "2", dpb.JOURNAL_OPERATION_PUBLISH, {"orderId": 2, "symbol": "B", "qty": 6}),
        # the delta's entry is the merged record: the as-of job's latest-per-key relies on it
        ("orders", "1", dpb.JOURNAL_OPERATION_PUBLISH, {"orderId": 1, "symbol": "A", "qty": 7}),
        ("notes", "n1", dpb.JOURNAL_OPERATION_PUBLISH, {"text": "x"}),
        ("orders", "2", dpb.JOURNAL_OPERATION_DELETE, {"orderId": 2, "symbol": "B", "qty": 6}),
        ("notes", "n1", dpb.JOURNAL_OPERATION_EXPIRE, {"text": "x"}),
    ]
    assert len(rows) == 7
    assert [b for b, *_ in entries] == sorted(b for b, *_ in entries)
    # a range, operations, a filter over the data
    dels = await read_all(
        stub.ReadJournal(
            dpb.ReadJournalRequest(operations=[dpb.JOURNAL_OPERATION_DELETE, dpb.JOURNAL_OPERATION_EXPIRE])
        )
    )
    assert [(t, k) for t, k, _, _ in dels] == [("orders", "2"), ("notes", "n1")]
    ranged = await read_all(stub.ReadJournal(dpb.ReadJournalRequest(from_bookmark=1, to_bookmark=3, topic="orders")))
    assert [b for _, _, b, _ in ranged] == [2, 3]
    filtered = await read_all(stub.ReadJournal(dpb.ReadJournalRequest(topic="orders", filter="/qty > 5")))
    assert [b for _, _, b, _ in filtered] == [2, 3, 5]
    described = await call(
        stub.DescribeJournal(dpb.DescribeJournalRequest(after_bookmark=1, max_entries=2, topic="orders"))
    )
    assert (described.trimmed_bookmark, described.last_bookmark, described.end_bookmark, described.entries) == (
        0,
        7,
        3,
        2,
    )
    await channel.close()


async def test_a_journal_read_from_before_retention_is_out_of_range(sowd: Running) -> None:
    await sowd.client.publish("orders", [{"orderId": i} for i in range(10)])
    sowd.engine.store.trim_journal(4)
    channel, stub = data_stub(sowd)
    with pytest.raises(OutOfRangeError) as err:
        await read_all(stub.ReadJournal(dpb.ReadJournalRequest(from_bookmark=2)))
    assert err.value.oldest_bookmark == 4
    assert [b for _, _, b, _ in await read_all(stub.ReadJournal(dpb.ReadJournalRequest()))] == list(range(5, 11))
    d = await call(stub.DescribeJournal(dpb.DescribeJournalRequest()))
    assert (d.trimmed_bookmark, d.last_bookmark) == (4, 10)
    with pytest.raises(InvalidArgumentError, match="regular expression"):
        await read_all(stub.ReadJournal(dpb.ReadJournalRequest(topic="^(orders")))
    await channel.close()


async def stage(stub: Any, stage_id: str, topic: str, docs: list[Any], per_request: int = 100) -> Any:
    async def requests() -> AsyncIterator[dpb.StageWriteRequest]:
        for i in range(0, len(docs), per_request):
            msgs = [pb.PublishMessage(data=json.dumps(d).encode()) for d in docs[i : i + per_request]]
            last = i + per_request >= len(docs)
            yield dpb.StageWriteRequest(stage_id=stage_id, topic=topic, messages=msgs, complete=last)

    return await call(stub.StageWrite(requests()))


async def test_committed_stages_are_one_batch_at_one_place_in_the_total_order(sowd: Running) -> None:
    c = sowd.client
    channel, stub = data_stub(sowd)
    assert (await stage(stub, "job/0/0", "orders", [{"orderId": i} for i in range(0, 250)])).message_count == 250
    await stage(stub, "job/1/0", "orders", [{"orderId": i, "bad": True} for i in range(250, 260)])  # attempt 0 ...
    await stage(stub, "job/1/1", "orders", [{"orderId": i} for i in range(250, 500)])  # ... and the retry
    stop = asyncio.Event()
    publisher = asyncio.create_task(keep_publishing(c, "markers", stop))
    await asyncio.sleep(0.02)
    done = await call(stub.CommitStages(dpb.CommitStagesRequest(topic="orders", stage_ids=["job/0/0", "job/1/1"])))
    stop.set()
    await publisher
    assert (done.message_count, done.last_bookmark - done.first_bookmark + 1, done.duplicate) == (500, 500, False)
    records = await c.sow("orders", batch_size=1000).records()
    assert sorted(r.bookmark for r in records) == list(range(done.first_bookmark, done.last_bookmark + 1))
    assert not any("bad" in r.json() for r in records)
    assert (await call(stub.AbortStages(dpb.AbortStagesRequest(stage_id_prefix="job/")))).aborted == 1
    assert len(sowd.engine.stages) == 0
    assert sowd.engine.stages.staged_bytes == 0
    await channel.close()


async def test_aborted_unknown_and_bad_stages_leave_the_topic_unchanged(sowd: Running) -> None:
    c = sowd.client
    channel, stub = data_stub(sowd)
    await stage(stub, "a", "orders", [{"orderId": 1}])
    assert (await call(stub.AbortStages(dpb.AbortStagesRequest(stage_ids=["a", "b"])))).aborted == 1
    await stage(stub, "c", "orders", [{"orderId": 2}])
    with pytest.raises(NotFoundError, match="nothing was committed"):
        await call(stub.CommitStages(dpb.CommitStagesRequest(topic="orders", stage_ids=["c", "a"])))
    with pytest.raises(InvalidArgumentError) as bad:  # validated as staged, naming the message in the stage
        await stage(stub, "d", "orders", [{"orderId": i} for i in range(150)] + [{"noKey": 1}], per_request=100)
    assert bad.value.message == "message 150: lacks the key field /orderId"
    assert bad.value.field == "messages[150].data"
    with pytest.raises(SowdbError, match="read-only"):
        await stage(stub, "e", "orders_by_symbol", [{"symbol": "X"}])
    assert await c.sow("orders").records() == []
    assert set(sowd.engine.stages._held) == {("", "c")}
    await channel.close()


async def test_a_stage_whose_call_failed_is_not_kept(sowd: Running) -> None:
    channel, stub = data_stub(sowd)
    hold = asyncio.Event()

    async def requests() -> AsyncIterator[dpb.StageWriteRequest]:
        yield dpb.StageWriteRequest(stage_id="x", topic="orders", messages=[pb.PublishMessage(data=b'{"orderId": 1}')])
        await hold.wait()

    staging = stub.StageWrite(requests())
    for _ in range(100):
        await asyncio.sleep(0.01)
        if len(sowd.engine.stages):
            break
    assert len(sowd.engine.stages) == 1  # held, not yet complete
    with pytest.raises(SowdbError) as still:  # a stage still being written cannot be committed
        await call(stub.CommitStages(dpb.CommitStagesRequest(topic="orders", stage_ids=["x"])))
    assert "still being written" in still.value.message
    staging.cancel()  # the task died
    for _ in range(100):
        if not len(sowd.engine.stages):
            break
        await asyncio.sleep(0.01)
    assert len(sowd.engine.stages) == 0
    hold.set()
    await channel.close()


async def test_a_commit_with_a_producer_sequence_applies_once(sowd: Running) -> None:
    channel, stub = data_stub(sowd)
    await stage(stub, "s1", "orders", [{"orderId": 1}])
    req = dpb.CommitStagesRequest(topic="orders", stage_ids=["s1"], producer_id="query-1", producer_seq=0)
    assert not (await call(stub.CommitStages(req))).duplicate
    await stage(stub, "s1-replay", "orders", [{"orderId": 1, "again": True}])
    again = dpb.CommitStagesRequest(topic="orders", stage_ids=["s1-replay"], producer_id="query-1", producer_seq=0)
    done = await call(stub.CommitStages(again))
    assert (done.duplicate, done.message_count, done.first_bookmark) == (True, 0, 0)
    assert [r.json() for r in await sowd.client.sow("orders").records()] == [{"orderId": 1}]
    assert len(sowd.engine.stages) == 0  # a duplicate's stages are dropped
    await channel.close()


async def publish_raw(target: str, requests: list[pb.PublishRequest]) -> list[pb.PublishResponse]:
    async with grpc.aio.insecure_channel(target) as channel:
        stub = sow_pb2_grpc.SowServiceStub(channel)
        return [r async for r in stub.Publish(iter(requests))]


def order(i: int, topic: str = "orders") -> pb.PublishMessage:
    return pb.PublishMessage(data=json.dumps({"orderId": i}).encode())


async def test_j4_a_producer_request_is_applied_once_also_across_a_restart(tmp_path: Path) -> None:
    cfg = make_config(tmp_path / "data")

    def req(seq: int, i: int, producer: str = "p1") -> pb.PublishRequest:
        return pb.PublishRequest(topic="orders", messages=[order(i)], producer_id=producer, producer_seq=seq)

    async with serving(cfg) as server:
        target = f"127.0.0.1:{server.port}"
        acks = await publish_raw(target, [req(1, 1), req(2, 2), req(2, 99), req(1, 98), req(3, 3), req(1, 4, "p2")])
        assert [(a.first_bookmark, a.duplicate) for a in acks] == [
            (1, False),
            (2, False),
            (0, True),
            (0, True),
            (3, False),
            (4, False),
        ]
    async with serving(cfg) as server:  # again on the same data directory
        target = f"127.0.0.1:{server.port}"
        acks = await publish_raw(
            target, [req(3, 97), req(4, 5), pb.PublishRequest(topic="orders", messages=[order(6)])]
        )
        assert [(a.first_bookmark, a.duplicate) for a in acks] == [(0, True), (5, False), (6, False)]
        async with AsyncClient(target) as c:
            keys = sorted(int(r.sow_key) for r in await c.sow("orders", batch_size=100).records())
            assert keys == [1, 2, 3, 4, 5, 6]
            # the SDK numbers a call's requests producer_seq, producer_seq + 1, ...: a retry is idempotent
            docs = [{"orderId": i} for i in range(100, 125)]
            first = await c.publish("orders", docs, batch_size=10, producer_id="loader", producer_seq=7)  # seqs 7, 8, 9
            retry = await c.publish("orders", docs, batch_size=10, producer_id="loader", producer_seq=7)
            more = await c.publish("orders", [{"orderId": 125}], producer_id="loader", producer_seq=10)
            assert (first.count, first.duplicates, first.last_bookmark - first.first_bookmark) == (25, 0, 24)
            assert (retry.count, retry.duplicates, retry.first_bookmark) == (25, 25, 0)
            assert (more.count, more.duplicates, more.first_bookmark) == (1, 0, first.last_bookmark + 1)
            with pytest.raises(PublishError, match="producer_id must be at most 256") as refused:
                await c.publish("orders", [{"orderId": 1}], producer_id="x" * 300)
            assert refused.value.code == grpc.StatusCode.INVALID_ARGUMENT


_TEXT = st.text(max_size=40) | st.sampled_from(["orders", "^(orders|book)$", "/orderId > 1", "now", "0", "(", ""])
_U64 = st.integers(0, 2**64 - 1)
_DATA_REQUESTS = st.one_of(
    st.builds(dpb.OpenSnapshotRequest, topic=_TEXT, filter=_TEXT, bookmark=_TEXT, lease_seconds=st.floats(-1e9, 1e9)),
    st.builds(
        dpb.ReadSnapshotRequest,
        snapshot_id=_TEXT,
        partition=st.integers(0, 2**32 - 1),
        batch_size=st.integers(0, 2**32 - 1),
    ),
    st.builds(
        dpb.ReadJournalRequest,
        from_bookmark=_U64,
        to_bookmark=_U64,
        topic=_TEXT,
        filter=_TEXT,
        operations=st.lists(st.integers(0, 5), max_size=3),
        batch_size=st.integers(0, 2**32 - 1),
    ),
    st.builds(dpb.DescribeJournalRequest, after_bookmark=_U64, max_entries=_U64, topic=_TEXT),
    st.builds(
        dpb.CommitStagesRequest,
        topic=_TEXT,
        stage_ids=st.lists(_TEXT, max_size=3),
        producer_id=_TEXT,
        producer_seq=_U64,
    ),
    st.builds(dpb.AbortStagesRequest, stage_ids=st.lists(_TEXT, max_size=3), stage_id_prefix=_TEXT),
)


def _data_call(stub: Any, req: Any) -> tuple[grpc.StatusCode, str]:
    method = getattr(stub, type(req).__name__.removesuffix("Request"))
    try:
        result = method(req, timeout=30)
        if type(req) in (dpb.ReadSnapshotRequest, dpb.ReadJournalRequest):
            for _ in result:
                pass
    except grpc.RpcError as err:
        return err.code(), err.details() or ""
    return grpc.StatusCode.OK, ""


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])  # one server for all
@given(requests=st.lists(_DATA_REQUESTS, min_size=1, max_size=3))
def test_the_data_service_never_answers_internal_or_unknown(sowd_process: Process, requests: list[Any]) -> None:
    with grpc.insecure_channel(sowd_process.target) as channel:
        stub = data_pb2_grpc.DataServiceStub(channel)
        for req in requests:
            code, details = _data_call(stub, req)
            assert code not in {grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN}, (req, details)
    assert sowd_process.proc.poll() is None
