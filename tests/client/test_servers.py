"""The failover core of a server list (``sowdb_client.servers``), without a server: where a call
goes, what a failure means, what a publish sends again and what a resumed subscription shows.
The same decisions against real processes: ``tests/cluster/test_clients.py``."""

from __future__ import annotations

import time

import grpc
import pytest

from sowdb_api.v1 import sow_pb2 as pb
from sowdb_client import Client, DataLossError, InvalidArgumentError, SowdbError, UnavailableError
from sowdb_client.errors import FailedPreconditionError
from sowdb_client.events import Event
from sowdb_client.publishing import PublishTally, publish_requests
from sowdb_client.servers import Outbox, Resume, Servers
from sowdb_client.types import Record

UNAVAILABLE = UnavailableError(grpc.StatusCode.UNAVAILABLE, "gone")


def test_a_list_is_split_and_checked_and_one_address_is_its_own_primary() -> None:
    assert Servers("a:1, b:2,,c:3").addresses == ["a:1", "b:2", "c:3"]
    assert Servers(["a:1", "b:2"]).many
    assert Servers("a:1").primary == "a:1"
    assert Servers("ipv4:127.0.0.1:1,127.0.0.1:2").addresses == ["ipv4:127.0.0.1:1,127.0.0.1:2"]  # gRPC's own list
    for bad in ("", " , ", "a:1,b:0", "a:1,b:x"):
        with pytest.raises(ValueError, match=r"server|port|address"):
            Servers(bad)
    with pytest.raises(ValueError, match="read_from"):
        Servers("a:1,b:2", read_from="nearest")  # type: ignore[arg-type]


def test_a_replica_s_refusal_sends_the_write_to_the_primary_it_names() -> None:
    servers = Servers("a:1,b:2,c:3")
    f = servers.failover(write=True)
    assert f.address() == "a:1"
    refusal = FailedPreconditionError(grpc.StatusCode.FAILED_PRECONDITION, "replica", metadata={"primary": "c:3"})
    assert f.failed("a:1", refusal) == 0.0
    assert f.address() == "c:3"
    f.confirmed("c:3", "primary")
    assert servers.primary == "c:3"
    assert servers.failover(write=True).address() == "c:3"  # kept for the next call


def test_unavailable_moves_on_pauses_after_a_round_and_gives_up_after_the_timeout() -> None:
    servers = Servers("a:1,b:2", failover_timeout=0.05)
    servers.primary = "a:1"
    f = servers.failover(write=True)
    assert f.address() == "a:1"
    assert f.failed("a:1", UNAVAILABLE) == 0.0
    assert servers.primary == ""  # found again
    assert f.address() == "b:2"
    assert 0 < f.failed("b:2", UNAVAILABLE) <= 0.2  # a whole round failed
    time.sleep(0.06)
    with pytest.raises(UnavailableError, match="failover_timeout"):
        f.failed(f.address(), UNAVAILABLE)
    with pytest.raises(InvalidArgumentError):  # the caller's error is raised as it is
        servers.failover(write=True).failed("a:1", InvalidArgumentError(grpc.StatusCode.INVALID_ARGUMENT, "bad"))


def test_read_from_any_takes_each_server_in_turn_and_a_replica_is_not_the_primary() -> None:
    servers = Servers("a:1,b:2,c:3", read_from="any")
    assert [servers.failover(write=False).address() for _ in range(4)] == ["a:1", "b:2", "c:3", "a:1"]
    primary = Servers("a:1,b:2").failover(write=False)
    assert primary.needs_confirm("a:1")
    with pytest.raises(SowdbError, match="not the primary"):
        primary.confirmed("a:1", "replica")


def test_an_attempt_sends_again_exactly_the_requests_not_acknowledged() -> None:
    tally = PublishTally()
    options = {"batch_size": 2, "producer_id": "p", "producer_seq": 7}
    outbox = Outbox(publish_requests("t", [{"i": i} for i in range(5)], options, tally))
    first = outbox.attempt()
    sent = [next(first), next(first)]
    assert [r.producer_seq for r in sent] == [7, 8]
    outbox.acknowledged()  # seq 7; 8 was sent, its ack lost
    again = list(outbox.attempt())
    assert [r.producer_seq for r in again] == [8, 9]  # 8 again, then the rest
    assert list(first) == []  # the abandoned attempt draws nothing more
    assert tally.sizes == [2, 2, 1]


def test_a_client_s_producer_serves_one_call_at_a_time_and_its_sequence_rises() -> None:
    servers = Servers("a:1,b:2")
    with servers.producing({}, [1, 1]) as one, servers.producing({}, [1]) as two:
        assert one["producer_id"] != two["producer_id"]
    with servers.producing({}, []) as again:
        assert again["producer_id"] in (one["producer_id"], two["producer_id"])
        assert again["producer_seq"] in (3, 2)
    with servers.producing({"producer_id": "mine"}, []) as given:
        assert given == {"producer_id": "mine"}


def record(bookmark: int, timestamp_us: int = 0) -> Record:
    return Record("t", str(bookmark), bookmark, timestamp_us, b"{}")


def test_a_resumed_subscription_shows_nothing_twice_and_refuses_a_node_behind() -> None:
    resume = Resume(pb.SubscribeRequest(topic="t"))
    assert resume.admit(Event("subscribed", bookmark=5)) is not None
    assert resume.admit(Event("publish", (record(6), record(7)))) is not None
    assert resume.resumed_request().bookmark == "6"  # one earlier: record 7 must come again
    with pytest.raises(UnavailableError, match="before 7"):
        resume.admit(Event("subscribed", bookmark=6))
    assert resume.admit(Event("subscribed", bookmark=9)) is None  # not shown again
    shown = resume.admit(Event("publish", (record(7), record(8))))
    assert shown is not None
    assert [r.bookmark for r in shown.records] == [8]
    behind = InvalidArgumentError(
        grpc.StatusCode.INVALID_ARGUMENT, "after the latest", field_violations=[("bookmark", "")]
    )
    assert resume.judged(behind).code == grpc.StatusCode.UNAVAILABLE
    timed = Resume(pb.SubscribeRequest(topic="t"), deadline=True)
    with pytest.raises(SowdbError):
        timed.judged(SowdbError(grpc.StatusCode.DEADLINE_EXCEEDED, "its timeout"))


def test_a_resumed_subscription_ends_when_the_new_node_holds_another_record_there() -> None:
    """After a failover the new node's entry at the last delivered bookmark is another write (an
    async primary showed what no replica had): DATA_LOSS, never a silent skip of its writes."""
    resume = Resume(pb.SubscribeRequest(topic="t"))
    resume.admit(Event("subscribed", bookmark=5))
    resume.admit(Event("publish", (record(6, 100), record(7, 100))))
    assert resume.resumed_request().bookmark == "6"
    resume.admit(Event("subscribed", bookmark=9))
    with pytest.raises(DataLossError, match="delivered bookmark 7") as caught:
        resume.admit(Event("publish", (record(7, 250), record(8, 250))))
    assert caught.value.reason == "SUBSCRIPTION_FORKED"
    again = Resume(pb.SubscribeRequest(topic="t"))  # the same record again: it goes on after it
    again.admit(Event("subscribed", bookmark=5))
    again.admit(Event("publish", (record(7, 100),)))
    again.resumed_request()
    again.admit(Event("subscribed", bookmark=9))
    shown = again.admit(Event("publish", (record(7, 100), record(8, 250))))
    assert shown is not None
    assert [r.bookmark for r in shown.records] == [8]


def test_a_keepalive_faster_than_the_server_accepts_is_refused() -> None:
    with pytest.raises(ValueError, match="keepalive"):
        Client("a:1", keepalive=0.1)
