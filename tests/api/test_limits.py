"""One request cannot stall the server or fail for its own size (issue 15): documented limits on
what a query may compute per record, responses bounded by bytes whatever batch_size says, and a
heavy query that leaves room for everyone else — through the real server."""

from __future__ import annotations

import json
import multiprocessing
import statistics
import threading
import time
from pathlib import Path
from typing import Any

import grpc
import pytest

from sowdb_api.v1 import sow_pb2 as pb
from sowdb_api.v1 import sow_pb2_grpc
from sowdb_client import Client, InvalidArgumentError
from tests.support import Running, make_config, serving, start_sowd, take


@pytest.mark.parametrize(
    ("options", "field", "words"),
    [
        ({"order_by": ", ".join(f"/f{i}" for i in range(17))}, "order_by", "17 fields; a query may have at most 16"),
        ({"grouping": [f"/g{i}" for i in range(17)], "projection": ["COUNT(/x) AS /n"]}, "grouping", "at most 16"),
        ({"grouping": ["/g"], "projection": [f"/p{i} AS /p{i}" for i in range(257)]}, "projection", "at most 256"),
        ({"select": "[" + ",".join(f"+/s{i}" for i in range(257)) + "]"}, "select", "at most 256"),
    ],
)
async def test_what_a_query_may_compute_per_record_is_bounded(
    sowd: Running, options: dict[str, object], field: str, words: str
) -> None:
    with pytest.raises(InvalidArgumentError) as err:
        await sowd.client.sow("orders", **options).records()  # type: ignore[arg-type]
    assert err.value.field == field
    assert words in err.value.message
    with pytest.raises(InvalidArgumentError):  # the same limits for a subscription's query
        async for _ in sowd.client.sow_and_subscribe("orders", **options):  # type: ignore[arg-type]
            pass


async def test_responses_are_bounded_by_bytes_whatever_batch_size_says(tmp_path: Path) -> None:
    """batch_size 10,000 over ~2 KB records would be a 20 MB response; the server's message
    limit is 256 KB here, and the client's receive limit too: every response fits."""
    limit = 256 * 1024
    async with serving(make_config(tmp_path / "data", max_message_bytes=limit, max_document_bytes=8192)) as server:
        target = f"127.0.0.1:{server.port}"
        pad = "x" * 2000
        options = [("grpc.max_receive_message_length", limit)]
        async with grpc.aio.insecure_channel(target, options=options) as channel:
            stub = sow_pb2_grpc.SowServiceStub(channel)
            live = stub.Subscribe(pb.SubscribeRequest(topic="orders"))
            first = await live.read()
            assert isinstance(first, pb.SubscribeResponse)
            assert first.WhichOneof("event") == "subscribed"
            for start in range(0, 1000, 100):  # one request of 100 records: a live backlog of ~200 KB a request
                docs = [
                    pb.PublishMessage(data=json.dumps({"orderId": i, "pad": pad}).encode())
                    for i in range(start, start + 100)
                ]
                (ack,) = [r async for r in stub.Publish(iter([pb.PublishRequest(topic="orders", messages=docs)]))]
                assert not ack.HasField("error")
            got = 0
            largest = 0
            async for resp in stub.Sow(pb.SowRequest(topic="orders", batch_size=10_000)):
                if resp.WhichOneof("event") == "records":
                    got += len(resp.records.records)
                    largest = max(largest, resp.ByteSize())
            assert got == 1000
            assert largest <= limit // 2 + 4096
            received = 0
            while received < 1000:  # the live part: the same bound
                event = await live.read()
                assert isinstance(event, pb.SubscribeResponse)
                if event.WhichOneof("event") == "publish":
                    received += len(event.publish.records)
                    assert event.ByteSize() <= limit // 2 + 4096
            live.cancel()


def _small_query_latencies(target: str, stop: threading.Event) -> list[float]:
    out = []
    with grpc.insecure_channel(target) as channel:
        stub = sow_pb2_grpc.SowServiceStub(channel)
        while not stop.is_set():
            start = time.perf_counter()
            list(stub.Sow(pb.SowRequest(topic="orders", sow_keys=["5"]), timeout=10))
            out.append(time.perf_counter() - start)
            time.sleep(0.002)
    return out


HEAVY = pb.SowRequest(
    topic="orders",
    filter="REGEXP_REPLACE(UPPER(/symbol), 'SYM', 'S') LIKE '^S' AND CONCAT(/trader, /symbol) IS NOT NULL",
    order_by="/price DESC, /trader, /qty DESC, /symbol",
    batch_size=1000,
)
SPAWN = multiprocessing.get_context("spawn")  # a forked child would inherit live gRPC state


def _heavy_queries(target: str, out: Any) -> None:
    """Two heavy queries, each received whole; puts the seconds they took into ``out``."""
    with grpc.insecure_channel(target) as channel:
        stub = sow_pb2_grpc.SowServiceStub(channel)
        started = time.perf_counter()
        for _ in range(2):
            assert sum(len(r.records.records) for r in stub.Sow(HEAVY, timeout=120)) == 100_000
        out.put(time.perf_counter() - started)


def test_a_heavy_query_leaves_room_for_small_ones(tmp_path: Path) -> None:
    """A query that sorts 100k records by four fields, with a costly filter, takes seconds; small
    queries meanwhile are answered at once: their p99 is a small fraction of the heavy query's
    time (under 1/5, or 50 ms), where a server that did not yield would hold them for the whole of it.
    A ratio, not a wall-clock bound, so that a loaded machine slows both sides alike."""
    sowd = start_sowd(tmp_path / "data")
    try:
        docs = [
            {"orderId": i, "symbol": f"SYM{i % 500}", "price": i % 97, "qty": i % 1000, "trader": f"t{i % 50}"}
            for i in range(100_000)
        ]
        with Client(sowd.target) as c:
            c.publish("orders", docs)
        stop = threading.Event()
        latencies: list[float] = []
        probe = threading.Thread(target=lambda: latencies.extend(_small_query_latencies(sowd.target, stop)))
        # the heavy client is another process: decoding 100k records must not hold this one's GIL,
        # which would be counted in the small queries' latencies as if it were the server's
        took_q: Any = SPAWN.Queue()
        heavy_client = SPAWN.Process(target=_heavy_queries, args=(sowd.target, took_q))
        probe.start()
        heavy_client.start()
        took = took_q.get(timeout=240)
        heavy_client.join(timeout=30)
        stop.set()
        probe.join()
        with grpc.insecure_channel(sowd.target) as channel, pytest.raises(grpc.RpcError) as err:
            list(sow_pb2_grpc.SowServiceStub(channel).Sow(HEAVY, timeout=0.3))  # a client's deadline stops the work
        assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        assert took > 1.0, "the heavy query did not take long enough to tell anything"
        assert len(latencies) > 50
        p99 = statistics.quantiles(latencies, n=100)[98]
        assert p99 < max(0.050, took / 2 / 5), (
            f"small queries p99 {p99 * 1000:.1f} ms while a heavy query ran ({took:.1f} s)"
        )
    finally:
        sowd.stop()


async def test_a_page_of_large_records_is_sent_in_bounded_responses(tmp_path: Path) -> None:
    limit = 128 * 1024
    async with serving(make_config(tmp_path / "data", max_message_bytes=limit, max_document_bytes=8192)) as server:
        from sowdb_client import AsyncClient

        async with AsyncClient(f"127.0.0.1:{server.port}", max_message_bytes=limit) as c:
            await c.publish("orders", [{"orderId": i, "pad": "y" * 3000} for i in range(200)], batch_size=20)
            page = c.sow_and_subscribe("orders", order_by="/orderId", top_n=200, skip_n=0, batch_size=10_000)
            events = await take(page, 3)  # subscribed, group_begin, then at least one sow batch
            assert events[2].kind == "sow"
            assert len(events[2].records) < 200
            page.cancel()
