"""``sowd --workers N`` (issue 41) as an operator runs it: real processes on one port.

Each subscriber opens a connection of its own (``grpc.use_local_subchannel_pool``), as separate
clients do, so the kernel spreads them over the writer and the readers; which process holds a
connection is read from ``/proc``. The invariants: every process delivers a subscription the
same sequence, in bookmark order, with no gap and no duplicate; a reader killed with ``kill -9``
is started again and its clients resume (by bookmark) with no gap; a writer killed ends the
readers' streams UNAVAILABLE and the group starts again; a revocation reaches every reader.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from grpc_status import rpc_status

from sowdb.auth import hash_token
from sowdb.config import ConfigError, config_from_dict, with_overrides
from sowdb.testing import Sowd, command, run, start, takes_workers
from sowdb.testing.holders import OWN_CONNECTION, connections, group_pids, holder
from sowdb_api.v1 import sow_pb2 as pb
from sowdb_client import Client

CONFIG = """
[[topic]]
name = "orders"
key = ["/id"]
"""

SECURED = """
[[topic]]
name = "orders"
key = ["/id"]

[security]
users_file = "users.toml"

[[role]]
name = "trader"
read = [".*"]
write = ["orders"]
admin = true

[[role]]
name = "viewer"
read = [{viewer_reads}]
"""
TRADER, VIEWER = "trader-token-1", "viewer-token-2"
SUBSCRIBE = "/sowdb.v1.SowService/Subscribe"


def _pids(sowd: Sowd) -> tuple[int, list[int]]:
    """(writer, readers) from the group's banner."""
    return group_pids(sowd.banner)


class Subscriber:
    """A raw Subscribe on a connection of its own, read on a thread; ``holder``: the process."""

    def __init__(self, sowd: Sowd, flt: str = "", bookmark: str = "", token: str = "") -> None:
        port = int(sowd.target.rsplit(":", 1)[1])
        mine = connections(port)
        self.channel = grpc.insecure_channel(sowd.target, options=OWN_CONNECTION)
        request = pb.SubscribeRequest(topic="orders", filter=flt, bookmark=bookmark)
        metadata = (("authorization", f"Bearer {token}"),) if token else None
        self.call = self.channel.unary_stream(
            SUBSCRIBE,
            request_serializer=pb.SubscribeRequest.SerializeToString,
            response_deserializer=pb.SubscribeResponse.FromString,
        )(request, metadata=metadata)
        self.bookmarks: list[int] = []
        self.error: grpc.RpcError | None = None
        self.subscribed = threading.Event()
        self.changed = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()
        assert self.subscribed.wait(30), "no subscribed event"
        writer, readers = _pids(sowd)
        new = connections(port) - mine  # this subscriber's connection: the one that came
        assert len(new) == 1, new
        self.holder = holder(port, new.pop(), [writer, *readers])

    def _read(self) -> None:
        try:
            for response in self.call:
                if response.HasField("subscribed"):
                    self.subscribed.set()
                with self.changed:
                    self.bookmarks.extend(r.bookmark for r in response.publish.records)
                    self.changed.notify_all()
        except grpc.RpcError as exc:
            with self.changed:
                self.error = exc
                self.changed.notify_all()
        self.subscribed.set()

    def wait_for(self, n: int, timeout: float = 60) -> list[int]:
        with self.changed:
            self.changed.wait_for(lambda: len(self.bookmarks) >= n or self.error is not None, timeout)
            return list(self.bookmarks)

    def wait_error(self, timeout: float = 60) -> grpc.RpcError:
        with self.changed:
            self.changed.wait_for(lambda: self.error is not None, timeout)
        assert self.error is not None, "the stream did not end"
        return self.error

    def close(self) -> None:
        self.call.cancel()
        self.channel.close()


def _spread(sowd: Sowd, n: int, flt: str = "", token: str = "") -> list[Subscriber]:
    """``n`` subscribers, more until the writer and every reader hold at least one."""
    writer, readers = _pids(sowd)
    subs = [Subscriber(sowd, flt, token=token) for _ in range(n)]
    while not {s.holder for s in subs} >= {writer, *readers} and len(subs) < 64:
        subs.append(Subscriber(sowd, flt, token=token))
    assert {s.holder for s in subs} >= {writer, *readers}, "the kernel never spread the connections"
    return subs


def group_of(tmp_path: Path, config_text: str, workers: int = 3) -> Iterator[Sowd]:
    """A group of ``workers`` processes on a fresh data directory, with ``config_text``."""
    config = tmp_path / "sowd.toml"
    config.write_text(config_text)
    with start(tmp_path / "data", "--workers", str(workers), config=config) as sowd:
        yield sowd


@pytest.fixture
def group(tmp_path: Path) -> Iterator[Sowd]:
    yield from group_of(tmp_path, CONFIG)


def test_every_process_delivers_a_subscription_the_same_sequence(group: Sowd) -> None:
    subs = _spread(group, 8, "/qty > 5")
    orders = [{"id": i, "qty": i % 10} for i in range(3000)]

    def publish() -> None:
        with Client(group.target) as c:
            for i in range(0, len(orders), 50):
                c.publish("orders", orders[i : i + 50])

    publisher = threading.Thread(target=publish)
    publisher.start()
    publisher.join(120)
    with Client(group.target) as c:
        expected = sorted(r.bookmark for r in c.sow("orders", filter="/qty > 5"))
    assert len(expected) == 1200
    for sub in subs:
        got = sub.wait_for(len(expected))
        assert sub.error is None, sub.error
        assert got == expected, f"process {sub.holder}: {len(got)} of {len(expected)}, in order: {got == sorted(got)}"
        sub.close()


def test_a_reader_killed_is_started_again_and_its_clients_resume_by_bookmark(group: Sowd) -> None:
    _, readers = _pids(group)
    subs = _spread(group, 6)
    on_reader = next(s for s in subs if s.holder in readers)
    with Client(group.target) as c:
        c.publish("orders", [{"id": i} for i in range(500)])
    before = on_reader.wait_for(500)
    assert len(before) == 500
    os.kill(on_reader.holder or 0, signal.SIGKILL)
    assert on_reader.wait_error().code() == grpc.StatusCode.UNAVAILABLE
    restarted = group.wait_line(f"(pid {on_reader.holder}) ended")
    assert restarted, group.output
    with Client(group.target) as c:
        c.publish("orders", [{"id": i} for i in range(500, 1000)])
        journal = sorted(r.bookmark for r in c.sow("orders"))
    resumed = Subscriber(group, bookmark=str(before[-1]))  # replayed from the last one received
    after = resumed.wait_for(500)
    assert before + after == journal  # no gap, no duplicate
    for s in [*subs, resumed]:
        s.close()


def test_a_writer_killed_ends_the_readers_streams_and_the_group_starts_again(group: Sowd) -> None:
    writer, readers = _pids(group)
    subs = _spread(group, 6)
    with Client(group.target) as c:
        c.publish("orders", [{"id": i} for i in range(100)])
    os.kill(writer, signal.SIGKILL)
    for sub in subs:
        if sub.holder in readers:
            assert sub.wait_error().code() == grpc.StatusCode.UNAVAILABLE
        sub.close()
    deadline = time.monotonic() + 60
    while sum("sowd listening on" in line for line in group.lines) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert sum("sowd listening on" in line for line in group.lines) == 2, group.output
    with Client(group.target) as c:  # the same port, the same data
        c.publish("orders", [{"id": 100}])
        assert sum(1 for _ in c.sow("orders")) == 101


def test_a_revocation_reaches_the_subscriptions_of_every_reader(tmp_path: Path) -> None:
    config = tmp_path / "sowd.toml"
    config.write_text(SECURED.replace("{viewer_reads}", '"orders"'))
    (tmp_path / "users.toml").write_text(
        f'[[user]]\nname = "tess"\ntoken_sha256 = "{hash_token(TRADER)}"\nroles = ["trader"]\n\n'
        f'[[user]]\nname = "vic"\ntoken_sha256 = "{hash_token(VIEWER)}"\nroles = ["viewer"]\n'
    )
    with start(tmp_path / "data", "--workers", "3", config=config) as sowd:
        subs = _spread(sowd, 6, token=VIEWER)
        config.write_text(SECURED.replace("{viewer_reads}", '"^prices"'))  # the viewer loses orders
        sowd.proc.send_signal(signal.SIGHUP)
        for sub in subs:
            assert sub.wait_error().code() == grpc.StatusCode.PERMISSION_DENIED, sub.holder
            sub.close()


def test_a_port_in_use_is_refused_before_anything_starts(group: Sowd, tmp_path: Path) -> None:
    done = run("--data-dir", str(tmp_path / "other"), "--listen", group.target, "--workers", "2")
    assert done.returncode == 1
    assert "already in use" in done.stderr


def test_a_writer_that_cannot_start_ends_the_group_with_its_status(group: Sowd, tmp_path: Path) -> None:
    """A data directory another sowd holds: the writer refuses it, and so does the group, with
    the writer's one line and nothing else, as a single process refuses it."""
    data = tmp_path / "data"
    done = run("--data-dir", str(data), "--listen", "127.0.0.1:0", "--workers", "2")
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr.splitlines() == [f"sowd: the data directory {data} is in use by another sowd (its lock is held)"]
    assert done.stdout == ""  # no reader was started, no "sowd stopped" of a group that never served


def test_a_group_that_served_says_it_stopped(group: Sowd) -> None:
    status, output = group.stop()
    assert status == 0, output
    assert output.splitlines()[-1] == "sowd stopped", output


def _on_a_reader(sowd: Sowd, reader: bool = True) -> grpc.Channel:
    """A channel whose connection a reader holds (the writer: ``reader`` False), connections
    opened until one lands there."""
    port = int(sowd.target.rsplit(":", 1)[1])
    writer, readers = _pids(sowd)
    for _ in range(64):
        mine = connections(port)
        channel = grpc.insecure_channel(sowd.target, options=OWN_CONNECTION)
        grpc.channel_ready_future(channel).result(timeout=30)
        new = connections(port) - mine
        if new and (holder(port, new.pop(), [writer, *readers]) in readers) == reader:
            return channel
        channel.close()
    raise AssertionError("no connection landed where it was wanted")


def test_a_reader_answers_as_the_writer_does(group: Sowd) -> None:
    """What a reader relays ends as the writer ends it (status, message, rich details), and what
    it serves itself is refused as the writer refuses it."""
    with Client(group.target) as c:
        c.publish("orders", [{"id": i, "qty": i} for i in range(10)])
    channel = _on_a_reader(group)
    sow = channel.unary_stream(
        "/sowdb.v1.SowService/Sow",
        request_serializer=pb.SowRequest.SerializeToString,
        response_deserializer=pb.SowResponse.FromString,
    )
    found = [r for resp in sow(pb.SowRequest(topic="orders", filter="/qty > 6")) for r in resp.records.records]
    assert sorted(r.sow_key for r in found) == ["7", "8", "9"]
    subscribe = channel.unary_stream(
        SUBSCRIBE,
        request_serializer=pb.SubscribeRequest.SerializeToString,
        response_deserializer=pb.SubscribeResponse.FromString,
    )

    def relayed() -> object:
        return list(sow(pb.SowRequest(topic="orders", filter="/qty = ")))

    def served() -> object:
        return list(subscribe(pb.SubscribeRequest(topic="orders", filter="/qty = ")))

    for call in (relayed, served):  # a query the writer answers; a subscription the reader places itself
        with pytest.raises(grpc.RpcError) as refused:
            call()
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "expected an operand" in (refused.value.details() or "")
        status = rpc_status.from_call(refused.value)  # type: ignore[arg-type]  # the error is the call
        assert status is not None
        assert status.details, "the rich error details were lost"
    channel.close()


def test_a_users_max_subscriptions_counts_every_process(tmp_path: Path) -> None:
    """The quota holds across the group: the readers count their subscriptions at the writer."""
    config = tmp_path / "sowd.toml"
    config.write_text(SECURED.replace("{viewer_reads}", '"orders"') + "max_subscriptions = 3\n")
    (tmp_path / "users.toml").write_text(
        f'[[user]]\nname = "vic"\ntoken_sha256 = "{hash_token(VIEWER)}"\nroles = ["viewer"]\n'
    )
    metadata = (("authorization", f"Bearer {VIEWER}"),)
    with start(tmp_path / "data", "--workers", "3", config=config) as sowd:
        calls = []

        def subscribe(on_reader: bool) -> Iterator[pb.SubscribeResponse]:
            channel = _on_a_reader(sowd, on_reader)
            call = channel.unary_stream(
                SUBSCRIBE,
                request_serializer=pb.SubscribeRequest.SerializeToString,
                response_deserializer=pb.SubscribeResponse.FromString,
            )(pb.SubscribeRequest(topic="orders"), metadata=metadata)
            calls.append((channel, call))
            return call

        held = [subscribe(True), subscribe(True), subscribe(False)]
        for call in held:
            assert next(call).HasField("subscribed")
        for on_reader in (False, True):  # the quota is full, wherever the next one lands
            with pytest.raises(grpc.RpcError) as refused:
                next(subscribe(on_reader))
            assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, refused.value.details()
            assert "max_subscriptions" in (refused.value.details() or "")
        calls[0][1].cancel()  # a reader's subscription ends: its place is free again
        deadline = time.monotonic() + 30
        while True:
            try:
                assert next(subscribe(False)).HasField("subscribed")
                break
            except grpc.RpcError:
                assert time.monotonic() < deadline, "the reader's subscription still counted"
                time.sleep(0.2)
        for channel, call in calls:
            call.cancel()
            channel.close()


def _default_sowd(tmp_path: Path, cpus: set[int], *args: str) -> Sowd:
    """``sowd`` as a user starts it (no ``--workers``: the demo config's ``"auto"``), on ``cpus``."""
    proc = subprocess.Popen(
        command("--data-dir", str(tmp_path / "data"), "--listen", "127.0.0.1:0", *args),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        preexec_fn=lambda: os.sched_setaffinity(0, cpus),
    )
    sowd = Sowd(proc)
    sowd.wait_serving()
    return sowd


def test_by_default_one_process_serves_each_core_it_may_run_on(tmp_path: Path) -> None:
    """``workers = "auto"`` (the default): the CPUs the process may run on, as ``taskset`` or a
    container's cpuset leave them: one CPU is one process, two are a writer and a reader."""
    cpus = sorted(os.sched_getaffinity(0))
    with _default_sowd(tmp_path / "one", {cpus[0]}) as sowd:
        assert "workers:" not in sowd.banner, sowd.banner  # a single process's banner
        children = Path(f"/proc/{sowd.proc.pid}/task/{sowd.proc.pid}/children").read_text().split()
        assert children == [], children  # and no group under it
    if len(cpus) < 2:
        pytest.skip("one CPU here: the group of the default cannot be shown")
    with _default_sowd(tmp_path / "two", set(cpus[:2]), "--http-listen", "127.0.0.1:0") as sowd:
        _writer, readers = _pids(sowd)
        assert "(2 workers:" in sowd.banner, sowd.banner
        assert len(readers) == 1, sowd.banner
        assert "; console http://127.0.0.1:" in sowd.banner, sowd.banner  # the writer's console, as one's
        with Client(sowd.target) as client:  # and it serves: a write, then a query of it
            client.publish("orders", [{"orderId": 1, "symbol": "A"}])
            assert [r.json()["orderId"] for r in client.sow("orders")] == [1]


def test_workers_is_auto_or_a_count_and_anything_else_is_refused(tmp_path: Path) -> None:
    topics = {"topic": [{"name": "orders", "key": ["/id"]}]}
    auto = config_from_dict(topics, source="t")
    assert auto.server.workers == 0
    assert auto.server.processes == len(os.sched_getaffinity(0))
    assert config_from_dict({**topics, "server": {"workers": "auto"}}, source="t").server.processes >= 1
    assert config_from_dict({**topics, "server": {"workers": 3}}, source="t").server.processes == 3
    for bad in (0, 257, True, "all", 2.0):
        with pytest.raises(ConfigError, match=r'workers: "auto" \(the cores available\) or 1'):
            config_from_dict({**topics, "server": {"workers": bad}}, source="t")
    assert with_overrides(auto, listen=None, data_dir=None, workers="2").server.processes == 2
    assert with_overrides(auto, listen=None, data_dir=None, workers="auto").server.workers == 0
    with pytest.raises(ConfigError, match="--workers: auto"):
        with_overrides(auto, listen=None, data_dir=None, workers="0")
    printed = run("--print-config", "--data-dir", str(tmp_path))
    assert 'workers = "auto"' in printed.stdout, printed.stdout


def test_the_launcher_asks_one_process_of_a_build_that_has_the_flag_only(tmp_path: Path) -> None:
    """A benchmark's baseline from before ``--workers`` is one process and refuses the flag."""
    old, new = tmp_path / "old", tmp_path / "new"
    for build, text in ((old, 'parser.add_argument("--listen")'), (new, 'parser.add_argument("--workers")')):
        (build / "sowdb").mkdir(parents=True)
        (build / "sowdb" / "main.py").write_text(text)
    assert not takes_workers({"PYTHONPATH": str(old)})
    assert takes_workers({"PYTHONPATH": os.pathsep.join([str(new), str(old)])})
    assert takes_workers(None)  # this checkout's
