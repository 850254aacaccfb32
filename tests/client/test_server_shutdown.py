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
from sowdb_client import Client, SowdbError, UnavailableError
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
            # the server asked core for its next health check before its loop was held: this
            # takes it (a connection's calls reach the server in the order they were sent)
            check = health(channel).Check.future(health_pb2.HealthCheckRequest(), timeout=30)
            yield target, channel
            for call in (held, check):
                with pytest.raises(grpc.RpcError):
                    call.result()
        assert proc.wait(timeout=HOLD_S + 20) == 0
    finally:
        proc.kill()
        proc.wait()


def test_a_call_a_stopping_server_dropped_is_unavailable_with_what_to_do(stopping: tuple[str, grpc.Channel]) -> None:
    target, channel = stopping
    errors: list[BaseException] = []
    with Client(target) as c:

        def publish() -> None:
            try:
                c.publish("orders", [{"orderId": 1}], timeout=30)
            except BaseException as exc:
                errors.append(exc)

        # one connection: the first of these publishes takes the one Publish the server asked
        # core for before its loop was held (it ends UNAVAILABLE with the server's GOAWAY); the
        # three others wait in core
        writers = [threading.Thread(target=publish) for _ in range(4)]
        for w in writers:
            w.start()
            time.sleep(HOLD_S / 16)
        raw = health(channel).Check.future(health_pb2.HealthCheckRequest(), timeout=30)
        for w in writers:
            w.join(timeout=HOLD_S + 20)
    with pytest.raises(grpc.RpcError) as dropped:
        raw.result()
    # what gRPC core does (if this fails, grpc/grpc#41785 is fixed: the mapping may go)
    assert (dropped.value.code(), dropped.value.details()) == (grpc.StatusCode.CANCELLED, "CANCELLED")
    assert len(errors) == 4, errors
    assert not [e for e in errors if isinstance(e, SowdbError) and e.code == grpc.StatusCode.CANCELLED], errors
    dropped_here = [e for e in errors if isinstance(e, UnavailableError) and SHUT_DOWN_UNDER_THE_CALL in e.message]
    assert len(dropped_here) >= 3, errors


def test_a_call_cancelled_by_its_caller_stays_cancelled(stopping: tuple[str, grpc.Channel]) -> None:
    _, channel = stopping
    call = sow_pb2_grpc.SowServiceStub(channel).Subscribe(pb.SubscribeRequest(topic="orders"), timeout=30)
    call.cancel()
    with pytest.raises(grpc.RpcError) as cancelled:
        next(call)
    e = from_rpc_error(cancelled.value)
    assert (e.code, e.message) == (grpc.StatusCode.CANCELLED, "Locally cancelled by application!")
