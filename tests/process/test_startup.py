"""``sowd`` start-up as a new user meets it: refusals in one line before any work, flags, the demo config."""

from __future__ import annotations

import socket
import time
from importlib.metadata import version
from pathlib import Path

from sowdb_client import Client
from tests.support import Process, start_sowd
from tests.support import sowd_command as sowd


def test_a_port_in_use_is_one_line_before_recovery_runs(tmp_path: Path) -> None:
    """The demo config's transient topic is rebuilt at start (a log line); a port in use must be
    reported before that work, as one line and no traceback."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        run = sowd("--data-dir", str(tmp_path / "d"), "--listen", f"127.0.0.1:{port}")
    assert run.returncode == 1
    assert run.stdout == ""
    assert run.stderr.splitlines() == [f"sowd: cannot listen on 127.0.0.1:{port}: the address is already in use"]


def test_a_data_directory_locked_by_another_sowd_is_one_line_before_recovery_runs(tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = start_sowd(data)
    try:
        with Client(first.target) as c:  # something for the second one to load, were it to try
            c.publish("quotes", [{"symbol": f"S{i}"} for i in range(100)])
        start = time.perf_counter()
        run = sowd("--data-dir", str(data), "--listen", "127.0.0.1:0")
        took = time.perf_counter() - start
    finally:
        first.stop()
    assert run.returncode == 1
    assert run.stdout == ""
    assert run.stderr.splitlines() == [f"sowd: the data directory {data} is in use by another sowd (its lock is held)"]
    assert took < 10


def test_log_level_is_case_insensitive_and_listed_in_help(tmp_path: Path) -> None:
    helped = sowd("--help")
    assert helped.returncode == 0
    assert "--log-level" in helped.stdout
    assert "debug" in helped.stdout.lower()
    p = start_sowd(tmp_path / "data", "--log-level", "debug")
    try:
        with Client(p.target) as c:
            assert c.ping() >= 0
    finally:
        p.stop()
    bad = sowd("--log-level", "loud")
    assert bad.returncode == 2
    assert "loud" in bad.stderr.lower()


def test_sowd_version() -> None:
    run = sowd("--version")
    assert run.returncode == 0
    assert run.stdout.strip() == f"sowd {version('sowdb')}"


def test_the_demo_config_has_the_view_and_conflated_topic_of_the_tour(sowd_process: Process) -> None:
    with Client(sowd_process.target) as c:
        topics = {t.name: t for t in c.list_topics()}
        assert topics["orders_by_symbol"].underlying == "orders"
        assert topics["orders_5s"].underlying == "orders"
        assert topics["orders_5s"].kind == 3  # TOPIC_KIND_CONFLATED
        c.publish("orders", [{"orderId": i, "symbol": f"SYM{i % 2}", "qty": 10} for i in range(5)])
        groups = {r.sow_key: r.json() for r in c.sow("orders_by_symbol")}
    assert groups == {
        '["SYM0"]': {"symbol": "SYM0", "total_qty": 30, "orders": 3},
        '["SYM1"]': {"symbol": "SYM1", "total_qty": 20, "orders": 2},
    }
