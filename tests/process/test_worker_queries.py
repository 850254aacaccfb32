"""``sowd --workers N`` readers answering queries from the record arena (issue 41).

With ``record_store = "arena"`` a reader answers a SOW query from the writer's arena, mapped
read-only, at the writer's last commit: the test stops the writer (SIGSTOP) and the readers
still answer, so what it checks was not relayed. A query sees one point of the total order (a
publish's batch whole or not at all), and the caller's own acknowledged writes. Each connection
is a client's own (``grpc.use_local_subchannel_pool``); which process holds it is read from
``/proc`` (the helpers of ``test_workers``).
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import grpc
import orjson
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from sowdb.auth import hash_token
from sowdb.testing import Sowd, start
from sowdb.testing.holders import OWN_CONNECTION, connections, group_pids, holder
from sowdb_api.v1 import sow_pb2 as pb
from sowdb_client import Client, records_of
from tests.process.test_workers import Subscriber, group_of

ARENA = """
[server]
record_store = "arena"

[[topic]]
name = "orders"
key = ["/id"]
"""
SOW = "/sowdb.v1.SowService/Sow"
SOW_AND_SUBSCRIBE = "/sowdb.v1.SowService/SowAndSubscribe"
REPLACE = "/sowdb.v1.SowService/ReplaceSubscription"
KEYS = 100


class Querier:
    """A client with a connection of its own; ``holder``: the process that holds it."""

    def __init__(self, sowd: Sowd, token: str = "") -> None:
        port = int(sowd.target.rsplit(":", 1)[1])
        mine = connections(port)
        self.channel = grpc.insecure_channel(sowd.target, options=OWN_CONNECTION)
        grpc.channel_ready_future(self.channel).result(timeout=30)
        self.metadata = (("authorization", f"Bearer {token}"),) if token else None
        self.call = self.channel.unary_stream(
            SOW, request_serializer=pb.SowRequest.SerializeToString, response_deserializer=pb.SowResponse.FromString
        )
        new = connections(port) - mine
        assert len(new) == 1, new
        writer, readers = group_pids(sowd.banner)
        self.holder = holder(port, new.pop(), [writer, *readers])

    def sow(self, topic: str = "orders", flt: str = "", timeout: float = 30) -> list[dict[str, object]]:
        out: list[dict[str, object]] = []
        for response in self.call(pb.SowRequest(topic=topic, filter=flt), metadata=self.metadata, timeout=timeout):
            out.extend(orjson.loads(r.data) for r in response.records.records)
        return out

    def batches(self, topic: str = "orders", *, packed: bool = True) -> list[pb.RecordBatch]:
        """The record batches of a query of ``topic`` (``packed``: asking for packed batches)."""
        layout = pb.RECORD_LAYOUT_PACKED if packed else pb.RECORD_LAYOUT_RECORDS
        request = pb.SowRequest(topic=topic, batch_size=40, record_layout=layout)
        return [r.records for r in self.call(request, metadata=self.metadata, timeout=30) if r.HasField("records")]

    def mirror(self, flt: str, sub_id: str) -> Mirror:
        return Mirror(self.channel, flt, sub_id)

    def replace(self, sub_id: str, flt: str, *, oof: bool = True) -> int:
        call = self.channel.unary_unary(
            REPLACE,
            request_serializer=pb.ReplaceSubscriptionRequest.SerializeToString,
            response_deserializer=pb.ReplaceSubscriptionResponse.FromString,
        )
        request = pb.ReplaceSubscriptionRequest(sub_id=sub_id, filter=flt, options=pb.SubscriptionOptions(oof=oof))
        return int(call(request, timeout=30).bookmark)

    def close(self) -> None:
        self.channel.close()


class Mirror:
    """A ``sow_and_subscribe`` with oof, read on a thread into the records it holds."""

    def __init__(self, channel: grpc.Channel, flt: str, sub_id: str) -> None:
        request = pb.SowAndSubscribeRequest(
            query=pb.SowRequest(topic="orders", filter=flt), options=pb.SubscriptionOptions(oof=True), sub_id=sub_id
        )
        self.call = channel.unary_stream(
            SOW_AND_SUBSCRIBE,
            request_serializer=pb.SowAndSubscribeRequest.SerializeToString,
            response_deserializer=pb.SowAndSubscribeResponse.FromString,
        )(request)
        self.held: dict[str, bytes] = {}
        self.point = 0  # the query's bookmark
        self.live: list[int] = []  # the bookmarks of the live records and oofs, as they came
        self.versions: dict[str, int] = {}  # the bookmark of each key's version received last
        self.stale: list[tuple[str, int]] = []  # versions received after a newer one of their key
        self.queried = threading.Event()
        self.changed = threading.Condition()
        self.error: grpc.RpcError | None = None
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        try:
            for r in self.call:
                kind = r.WhichOneof("event")
                with self.changed:
                    if kind == "group_begin":
                        self.point = r.group_begin.bookmark
                    elif kind in ("records", "publish"):
                        batch = r.records if kind == "records" else r.publish
                        for rec in batch.records:
                            if rec.bookmark <= self.versions.get(rec.sow_key, 0):
                                self.stale.append((rec.sow_key, rec.bookmark))  # older than what it holds
                            self.versions[rec.sow_key] = rec.bookmark
                            self.held[rec.sow_key] = orjson.loads(rec.data)
                            if kind == "publish":
                                self.live.append(rec.bookmark)
                    elif kind == "oof":
                        self.held.pop(r.oof.record.sow_key, None)
                        self.live.append(r.oof.record.bookmark)
                    elif kind == "group_end":
                        self.queried.set()
                    self.changed.notify_all()
        except grpc.RpcError as exc:
            self.error = exc
        self.queried.set()

    def wait_for(self, expected: dict[str, object], timeout: float = 60) -> dict[str, object]:
        with self.changed:
            self.changed.wait_for(lambda: self.held == expected, timeout)
            return dict(self.held)

    def close(self) -> None:
        self.call.cancel()


def _on_readers(sowd: Sowd, n: int = 2, token: str = "") -> tuple[list[Querier], list[Querier]]:
    """(queriers whose connection a reader holds, those the writer holds): at least ``n`` of the
    first kind."""
    writer, _ = group_pids(sowd.banner)
    here: list[Querier] = []
    there: list[Querier] = []
    while len(here) < n and len(here) + len(there) < 64:
        q = Querier(sowd, token)
        (there if q.holder == writer else here).append(q)
    assert len(here) >= n, "the kernel never gave a reader a connection"
    return here, there


@pytest.fixture
def group(tmp_path: Path) -> Iterator[Sowd]:
    yield from group_of(tmp_path, ARENA)


@contextmanager
def _writer_stopped(sowd: Sowd, caught_up: Sequence[Querier] = ()) -> Iterator[None]:
    """The group's writer stopped (SIGSTOP), as one long step holds its event loop, once each
    reader of ``caught_up`` has applied the writer's last commit (a query a reader answers
    waits for that: stopped before, the writer might not have sent it)."""
    for q in caught_up:
        q.sow()
    writer, _ = group_pids(sowd.banner)
    os.kill(writer, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(writer, signal.SIGCONT)


def test_a_reader_answers_queries_from_the_arena_while_the_writer_is_stopped(group: Sowd) -> None:
    readers_q, writer_q = _on_readers(group)
    with Client(group.target) as c:
        c.publish("orders", [{"id": i, "qty": i % 10} for i in range(KEYS)])
        c.publish("orders", [{"id": 7, "qty": 70}])
        c.sow_delete("orders", sow_keys=["8"])
        expected = sorted((r.json()["id"], r.json()["qty"]) for r in c.sow("orders", filter="/qty >= 5"))
    with _writer_stopped(group, readers_q):
        for q in readers_q:  # answered with the writer stopped: from the arena, not relayed
            got = sorted((r["id"], r["qty"]) for r in q.sow(flt="/qty >= 5"))
            assert got == expected
            assert len(q.sow()) == KEYS - 1
    for q in [*readers_q, *writer_q]:
        q.close()


def test_a_reader_sends_packed_batches_when_asked_and_a_relay_passes_the_layout_on(group: Sowd) -> None:
    """A reader's own answer (the writer stopped: not relayed) and a query it relays to the
    writer (a topic pattern) are packed when the query asks, with the records of the default
    layout."""
    readers_q, writer_q = _on_readers(group, n=1)
    q = readers_q[0]
    with Client(group.target) as c:
        c.publish("orders", [{"id": i, "note": f"é{i}"} for i in range(KEYS)])
    expected = sorted(r for b in q.batches(packed=False) for r in records_of(b))
    assert len(expected) == KEYS
    with _writer_stopped(group, [q]):
        answered = q.batches()
    relayed = q.batches("^ord.*$")
    for batches in (answered, relayed):
        assert [len(b.packed.sow_keys) for b in batches] == [40, 40, 20]
        assert not any(b.records for b in batches)
        assert sorted(r for b in batches for r in records_of(b)) == expected
    for other in [*readers_q, *writer_q]:
        other.close()


def test_a_query_on_a_reader_sees_whole_batches_and_the_callers_own_writes(group: Sowd) -> None:
    readers_q, writer_q = _on_readers(group)
    stop = threading.Event()
    acked = [0]

    def publish() -> None:
        with Client(group.target) as c:
            v = 0
            while not stop.is_set():
                v += 1
                c.publish("orders", [{"id": i, "v": v} for i in range(KEYS)])  # one batch: one point
                acked[0] = v

    with Client(group.target) as c:
        c.publish("orders", [{"id": i, "v": 0} for i in range(KEYS)])
    publisher = threading.Thread(target=publish)
    publisher.start()
    try:
        seen = set()
        for _ in range(40):
            for q in readers_q:
                floor = acked[0]
                got = q.sow()
                versions = {int(str(r["v"])) for r in got}
                assert len(got) == KEYS
                assert len(versions) == 1, versions  # never half a batch
                assert versions.pop() >= floor  # what was acknowledged before the query
                seen.add(got[0]["v"])
        assert len(seen) > 1  # the queries ran while publishes went on
    finally:
        stop.set()
        publisher.join(60)
    with Client(group.target) as c:  # a caller's own write, then its query on a reader
        for q in readers_q:
            c.publish("orders", [{"id": KEYS, "v": -1}])
            assert [r for r in q.sow(flt=f"/id = {KEYS}")] == [{"id": KEYS, "v": -1}]
            c.sow_delete("orders", sow_keys=[str(KEYS)])
    for q in [*readers_q, *writer_q]:
        q.close()


def test_a_reader_answers_a_readers_rows_and_refuses_as_the_writer(tmp_path: Path) -> None:
    config = tmp_path / "sowd.toml"
    config.write_text(
        ARENA
        + """
[security]
users_file = "users.toml"

[[role]]
name = "trader"
read = [".*"]
write = ["orders"]

[[role]]
name = "desk"
read = ["orders"]
filter = "/desk = 'a'"
"""
    )
    (tmp_path / "users.toml").write_text(
        f'[[user]]\nname = "tess"\ntoken_sha256 = "{hash_token("t-1")}"\nroles = ["trader"]\n\n'
        f'[[user]]\nname = "dee"\ntoken_sha256 = "{hash_token("d-2")}"\nroles = ["desk"]\n'
    )
    with start(tmp_path / "data", "--workers", "2", config=config) as sowd:
        with Client(sowd.target, token="t-1") as c:
            c.publish("orders", [{"id": i, "desk": "ab"[i % 2]} for i in range(50)])
        readers_q, writer_q = _on_readers(sowd, 1, token="d-2")
        with _writer_stopped(sowd, readers_q):
            q = readers_q[0]
            assert sorted(int(str(r["id"])) for r in q.sow()) == list(range(0, 50, 2))
            with pytest.raises(grpc.RpcError) as refused:
                q.sow(flt="/desk = ")
            assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        with pytest.raises(grpc.RpcError) as denied:
            readers_q[0].sow(topic="prices")  # not readable: refused as the writer refuses it
        assert denied.value.code() == grpc.StatusCode.PERMISSION_DENIED
        for q in [*readers_q, *writer_q]:
            q.close()


def test_a_subscription_held_by_a_reader_alone_gets_every_change(group: Sowd) -> None:
    writer, readers = group_pids(group.banner)
    subs: list[Subscriber] = []
    while not any(s.holder in readers for s in subs) and len(subs) < 32:
        subs.append(Subscriber(group))
    for s in subs:  # the writer follows nothing itself: its readers still get every change
        if s.holder == writer:
            s.close()
    on_reader = next(s for s in subs if s.holder in readers)
    with Client(group.target) as c:
        c.publish("orders", [{"id": i} for i in range(300)])
        expected = sorted(r.bookmark for r in c.sow("orders"))
    assert on_reader.wait_for(300) == expected
    for s in subs:
        s.close()


def test_sow_and_subscribe_on_a_reader_mirrors_the_state_with_no_gap_and_no_duplicate(group: Sowd) -> None:
    with Client(group.target) as c:
        c.publish("orders", [{"id": i, "qty": i % 10} for i in range(KEYS)])
    readers_q, writer_q = _on_readers(group)
    with _writer_stopped(group, readers_q):  # placed and queried by the reader, from the arena
        mirrors = [q.mirror("/qty >= 5", f"m{i}") for i, q in enumerate(readers_q)]
        for m in mirrors:
            assert m.queried.wait(30)
            assert m.error is None, m.error
            assert len(m.held) == KEYS // 2
    with Client(group.target) as c:  # updates moving records in and out of the filter
        for step in range(1, 30):
            c.publish("orders", [{"id": i, "qty": (i * 7 + step) % 10} for i in range(0, KEYS, 3)])
            c.sow_delete("orders", sow_keys=[str(step)])
        expected = {r.sow_key: r.json() for r in c.sow("orders", filter="/qty >= 5")}
    for m in mirrors:
        assert m.wait_for(expected) == expected  # the query and the changes after it: no gap
        assert m.live == sorted(set(m.live))  # in order, none twice
        assert all(b > m.point for b in m.live)
    for i, (q, m) in enumerate(zip(readers_q, mirrors, strict=True)):  # R-1 on the reader that holds it
        assert q.replace(f"m{i}", "/qty < 5") >= m.point
        with Client(group.target) as c:
            now = {r.sow_key: r.json() for r in c.sow("orders", filter="/qty < 5")}
        assert m.wait_for(now) == now  # the records now in scope came, those out of it left (oof)
        m.close()
    for q in [*readers_q, *writer_q]:
        q.close()


def test_a_reader_answers_health_checks_while_the_writer_is_held(group: Sowd) -> None:
    readers_q, writer_q = _on_readers(group)

    def check(q: Querier, service: str = "") -> health_pb2.HealthCheckResponse:
        stub: Any = health_pb2_grpc.HealthStub(q.channel)
        response: health_pb2.HealthCheckResponse = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
        return response

    assert check(readers_q[0]).status == health_pb2.HealthCheckResponse.SERVING
    with _writer_stopped(group):  # as a long commit holds its event loop
        for q in readers_q:
            assert check(q).status == health_pb2.HealthCheckResponse.SERVING
            assert check(q, "sowdb.v1.SowService").status == health_pb2.HealthCheckResponse.SERVING
    with pytest.raises(grpc.RpcError) as unknown:  # a service it does not watch: the writer's answer
        check(readers_q[0], "no.such.Service")
    assert unknown.value.code() == grpc.StatusCode.NOT_FOUND
    for q in [*readers_q, *writer_q]:
        q.close()


def test_a_relayed_subscription_is_its_callers_not_its_readers(group: Sowd) -> None:
    readers_q, writer_q = _on_readers(group, 3)  # two readers: two of three share one
    a, b = next((x, y) for x in readers_q for y in readers_q if x is not y and x.holder == y.holder)
    placed = a.channel.unary_stream(
        "/sowdb.v1.SowService/Subscribe",
        request_serializer=pb.SubscribeRequest.SerializeToString,
        response_deserializer=pb.SubscribeResponse.FromString,
    )(pb.SubscribeRequest(topic="orders", bookmark="0", sub_id="mine"))  # a replay: relayed to the writer
    assert next(iter(placed)).HasField("subscribed")
    with pytest.raises(grpc.RpcError) as refused:  # another client of the same reader: not its subscription
        b.replace("mine", "/qty > 1", oof=False)
    assert refused.value.code() == grpc.StatusCode.NOT_FOUND
    assert a.replace("mine", "/qty > 1", oof=False) >= 0  # its own caller's, relayed the same way
    placed.cancel()
    for q in [*readers_q, *writer_q]:
        q.close()


def test_sow_and_subscribe_placed_on_readers_while_publishes_go_on_misses_nothing(group: Sowd) -> None:
    with Client(group.target) as c:
        c.publish("orders", [{"id": i, "qty": 0} for i in range(KEYS)])
    readers_q, writer_q = _on_readers(group, 3)
    stop = threading.Event()

    def publish() -> None:
        with Client(group.target) as c:
            step = 0
            while not stop.is_set():
                step += 1
                c.publish("orders", [{"id": (step * 13 + i) % KEYS, "qty": step} for i in range(7)])

    publisher = threading.Thread(target=publish)
    publisher.start()
    try:
        mirrors = []
        for i, q in enumerate(readers_q):  # placed one after another, each at its own point
            mirrors.append(q.mirror("", f"p{i}"))
            assert mirrors[-1].queried.wait(30)
    finally:
        stop.set()
        publisher.join(60)
    with Client(group.target) as c:
        expected = {r.sow_key: r.json() for r in c.sow("orders")}
    for m in mirrors:
        assert m.error is None, m.error
        assert m.wait_for(expected) == expected  # the query at its point and every change after it
        assert m.live == sorted(set(m.live))
        assert all(b > m.point for b in m.live)  # nothing the query had, sent again
        assert m.stale == []  # no key's version older than the one the query gave
        m.close()
    for q in [*readers_q, *writer_q]:
        q.close()
