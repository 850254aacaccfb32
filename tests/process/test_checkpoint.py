"""Backups (issue 15): ``sowd checkpoint DIR`` writes a consistent copy of the store while the
server serves and a publisher keeps writing; a server started on the copy holds exactly the
state at the checkpoint's bookmark. With the server stopped, the copy is taken directly."""

from __future__ import annotations

import re
import threading
from pathlib import Path

from sowdb_client import Client
from tests.support import sowd_command, start_sowd


def _state(target: str, topic: str, bookmark: str = "") -> dict[str, bytes]:
    with Client(target) as c:
        return {r.sow_key: r.data for r in c.sow(topic, bookmark=bookmark, batch_size=10_000)}


def test_a_checkpoint_while_serving_restores_the_state_at_its_bookmark(tmp_path: Path) -> None:
    sowd = start_sowd(tmp_path / "data")
    stop = threading.Event()

    def publish() -> None:  # prices keeps history: the original can be asked as of the bookmark
        with Client(sowd.target) as c:
            n = 0
            while not stop.is_set():
                c.publish("prices", [{"symbol": f"S{i}", "px": n + i} for i in range(50)])
                n += 1

    try:
        with Client(sowd.target) as c:
            c.publish("orders", [{"orderId": i, "symbol": f"SYM{i % 7}"} for i in range(5000)])
        publisher = threading.Thread(target=publish)
        publisher.start()
        copy = tmp_path / "backup"
        done = sowd_command("checkpoint", str(copy), "--server", sowd.target)
        stop.set()
        publisher.join()
        assert done.returncode == 0, done.stderr
        found = re.search(r"bookmarks up to (\d+)", done.stdout)
        assert found is not None, done.stdout
        bookmark = found.group(1)
        at_checkpoint = _state(sowd.target, "prices", bookmark)
        orders = _state(sowd.target, "orders")
        again = sowd_command("checkpoint", str(copy), "--server", sowd.target)
        assert again.returncode == 1
        assert "exists already" in again.stderr
    finally:
        stop.set()
        sowd.stop()
    restored = start_sowd(copy)  # the copy is a whole data directory
    try:
        assert _state(restored.target, "prices") == at_checkpoint
        assert _state(restored.target, "orders") == orders
        with Client(restored.target) as c:
            last = next(iter(c.subscribe("prices"))).bookmark  # subscribed: the latest bookmark
        assert last == int(bookmark)
    finally:
        restored.stop()
    assert sowd_command("verify", "--data-dir", str(copy)).returncode == 0


def test_a_checkpoint_of_a_stopped_server_copies_the_store(tmp_path: Path) -> None:
    data = tmp_path / "data"
    sowd = start_sowd(data)
    with Client(sowd.target) as c:
        c.publish("orders", [{"orderId": i} for i in range(100)])
    sowd.stop()
    done = sowd_command("checkpoint", str(tmp_path / "copy"), "--data-dir", str(data), "--listen", "127.0.0.1:1")
    assert done.returncode == 0, done.stderr
    assert "the server is stopped" in done.stdout
    restored = start_sowd(tmp_path / "copy")
    try:
        assert len(_state(restored.target, "orders")) == 100
    finally:
        restored.stop()
