"""A call that a stopping server dropped reaches the caller as UNAVAILABLE, not CANCELLED.

gRPC core ends the calls that have reached a server but no handler yet with CANCELLED when the
server stops (grpc/grpc#41785): a call sent as a node of a cluster stopped (its journal forked,
a rolling restart) looked to the caller like a cancellation of its own, which no retry policy
and no server list retries. Found by ``tests/cluster/test_faults.py`` in CI: a write to a deposed
primary that stopped at its fork was refused with CANCELLED. The server here
(:mod:`tests.client.stopping_server`) drops calls that way every time.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from sowdb_api.v1 import sow_pb2 as pb
from sowdb_api.v1 import sow_pb2_grpc
from sowdb_client import Client, UnavailableError
from sowdb_client.errors import SHUT_DOWN_UNDER_THE_CALL, from_rpc_error
from tests.client.stopping_server import HOLD_S


def health(channel: grpc.Channel) -> Any:
    return health_pb2_grpc.HealthStub(channel)  # its stubs omit Check


@pytest.fixture
def stopping() -> Iterator[tuple[str, grpc.Channel]]:
    """The stopping server's address and a channel to it, its loop held (the calls sent now wait
    in core until it stops)."""
    proc = subprocess.Popen([sys.executable, "-m", "tests.client.stopping_server"], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        target = f"127.0.0.1:{int(proc.stdout.readline())}"
        with grpc.insecure_channel(target) as channel:
            held = health(channel).Check.future(health_pb2.HealthCheckRequest(), timeout=30)
            assert proc.stdout.readline().strip() == "holding"
            # the server asked core for its next call of each method before its loop was held
            check = health(channel).Check.future(health_pb2.HealthCheckRequest(), timeout=30)
            publish = sow_pb2_grpc.SowServiceStub(channel).Publish(iter(()), timeout=30)
            time.sleep(HOLD_S / 4)
            yield target, channel
            for call in (held, check):
                with pytest.raises(grpc.RpcError):
                    call.result()
            with pytest.raises(grpc.RpcError):
                next(publish)
        assert proc.wait(timeout=HOLD_S + 20) == 0
    finally:
        proc.kill()
        proc.wait()


def test_a_call_a_stopping_server_dropped_is_unavailable_with_what_to_do(stopping: tuple[str, grpc.Channel]) -> None:
    target, channel = stopping
    errors: list[BaseException] = []

    def publish() -> None:
        try:
            with Client(target) as c:
                c.publish("orders", [{"orderId": 1}], timeout=30)
        except BaseException as exc:
            errors.append(exc)

    writers = [threading.Thread(target=publish) for _ in range(3)]
    for w in writers:
        w.start()
    raw = health(channel).Check.future(health_pb2.HealthCheckRequest(), timeout=30)
    for w in writers:
        w.join(timeout=HOLD_S + 20)
    with pytest.raises(grpc.RpcError) as dropped:
        raw.result()
    # what gRPC core does (if this fails, grpc/grpc#41785 is fixed: the mapping may go)
    assert (dropped.value.code(), dropped.value.details()) == (grpc.StatusCode.CANCELLED, "CANCELLED")
    assert len(errors) == 3, errors
    for e in errors:
        assert isinstance(e, UnavailableError), repr(e)
        assert e.code == grpc.StatusCode.UNAVAILABLE
        assert SHUT_DOWN_UNDER_THE_CALL in e.message, e


def test_a_call_cancelled_by_its_caller_stays_cancelled(stopping: tuple[str, grpc.Channel]) -> None:
    _, channel = stopping
    call = sow_pb2_grpc.SowServiceStub(channel).Subscribe(pb.SubscribeRequest(topic="orders"), timeout=30)
    call.cancel()
    with pytest.raises(grpc.RpcError) as cancelled:
        next(call)
    e = from_rpc_error(cancelled.value)
    assert (e.code, e.message) == (grpc.StatusCode.CANCELLED, "Locally cancelled by application!")
