"""A ``sowd`` that is still loading its state answers at once, and says how far it has come
(issue 36): ``sow ping`` and every call UNAVAILABLE with ``starting: N of M records loaded``,
health NOT_SERVING, ``/metrics`` ``sowdb_ready 0``, the console's ``/status`` 503 and its page's
calls the same UNAVAILABLE; then, loaded, all of them serve.

The load is held (``SOWDB_TEST_HOLD_LOAD``, a file the load waits on before its first record)
so that the test sees the start-up in progress however fast the machine loads.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from sowdb.engine.starting import HOLD_ENV
from sowdb.testing import spawn
from sowdb_client import Client
from tests.support import sow

RECORDS = 1000


def _store_with_orders(data: Path, n: int) -> None:
    """A data directory whose ``orders`` hold ``n`` records (written by a sowd, then stopped)."""
    with spawn(data) as sowd:
        sowd.wait_serving()
        with Client(sowd.target) as c:
            c.publish("orders", [{"orderId": i, "symbol": f"S{i % 10}", "price": i} for i in range(n)], batch_size=1000)


def _get(url: str, data: bytes | None = None, headers: dict[str, str] | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url, data=data, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _health(target: str) -> int:
    with grpc.insecure_channel(target) as channel:
        stub: Any = health_pb2_grpc.HealthStub(channel)  # its stubs omit Check
        reply = stub.Check(health_pb2.HealthCheckRequest(), timeout=10)
    return int(reply.status)


def test_a_server_loading_its_state_answers_at_once_with_its_progress(tmp_path: Path) -> None:
    data = tmp_path / "data"
    _store_with_orders(data, RECORDS)
    hold = tmp_path / "hold"
    hold.touch()
    env = {**os.environ, HOLD_ENV: str(hold)}
    with spawn(data, "--http-listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", env=env) as sowd:
        line = sowd.wait_line("starting on ")
        assert line, sowd.output
        target = line.split("starting on ")[1].split(":", 2)
        address = f"{target[0]}:{target[1]}"
        console = line.split("; console ")[1].split(";")[0].strip()
        metrics = line.split("; metrics ")[1].strip()
        starting = f"starting: 0 of {RECORDS} records loaded"  # ``orders`` only: the other topics are empty
        # the journal's recovery comes first ("starting: recovering the journal"), then the load,
        # held before its first record: wait for that, as a loaded machine may still be recovering
        give_up = time.monotonic() + 30
        while f"sowdb_start_records_total {float(RECORDS)}" not in _get(metrics)[1]:
            assert time.monotonic() < give_up, "the load did not start within 30 s"
            time.sleep(0.05)

        took = time.perf_counter()
        ping = sow("ping", "-server", address)
        took = time.perf_counter() - took
        assert ping.returncode != 0
        assert starting in ping.stderr, ping.stderr
        assert "Traceback" not in ping.stderr
        assert took < 10  # at once: not a wait for a deadline
        query = sow("sow", "-server", address, "-topic", "orders")
        assert query.returncode != 0
        assert starting in query.stderr, query.stderr
        assert _health(address) == health_pb2.HealthCheckResponse.NOT_SERVING

        status, body = _get(f"{metrics}")
        assert status == 200
        assert "sowdb_ready 0.0" in body
        assert f"sowdb_start_records_total {float(RECORDS)}" in body
        assert "sowdb_start_records_loaded 0.0" in body
        status, body = _get(f"{console}status")
        assert status == 503
        assert json.loads(body) == {
            "status": "starting",
            "message": starting,
            "records_loaded": 0,
            "records_total": RECORDS,
        }
        # what the page asks first: its topics table shows the error's code and message
        status, body = _get(f"{console}sowdb.v1.SowService/ListTopics", b"{}", {"Content-Type": "application/json"})
        assert status == 503
        assert json.loads(body) == {"code": "unavailable", "message": starting}

        hold.unlink()
        sowd.wait_serving()
        assert sowd.target == address
        ping = sow("ping", "-server", address)
        assert ping.returncode == 0, ping.stderr
        assert _health(address) == health_pb2.HealthCheckResponse.SERVING
        with Client(address) as c:
            assert len(c.sow("orders").records()) == RECORDS
        status, body = _get(f"{metrics}")
        assert "sowdb_ready 1.0" in body
        assert f"sowdb_start_records_loaded {float(RECORDS)}" in body
        assert "sowdb_topic_records" in body
        status, body = _get(f"{console}status")
        assert status == 200
        assert json.loads(body)["status"] == "ready"
