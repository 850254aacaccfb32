"""Faults against real processes (SPEC §13, HA-1/HA-3; issue 31): etcd and three ``sowd``, with
the TCP fault proxy (:mod:`tests.cluster.faultproxy`) between them where a partition is needed.
``tests/cluster/test_election.py`` checks the same faults on in-process elections; these check
what a client of the real servers sees.

Every test records, Jepsen-style, each write attempted (its ids) and each acknowledgement (the
ids, when it was sent and received on the test's monotonic clock, the node and the epoch that
acknowledged it), then checks against the final read of the new primary: *lost* = acknowledged -
read must be empty, *unexpected* = read - attempted must be empty; no acknowledgement by a fenced
primary after its deadline; no two epochs acknowledging at once; and every node, stopped at the
end, holds the same journal, ``current`` and producer state (:func:`fingerprint`).

Faults:
- the primary partitioned from etcd and from its replicas (its etcd connection and the replicas'
  ``Follow`` connections blackholed through proxies) while the test's clients still reach it;
- etcd SIGSTOPped: writes stop within ``lease_ttl``, reads go on on every node;
- the primary SIGSTOPped past its lease, then SIGCONT: it acknowledges nothing after it resumes.
"""

from __future__ import annotations

import itertools
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import pytest

from sowdb import testing
from sowdb_client import Client, SowdbError
from tests.cluster.conftest import EtcdServer
from tests.cluster.faultproxy import FaultProxy, fault_proxy
from tests.cluster.processes import Nodes, fingerprint, free_ports
from tests.cluster.support import TTL, publish_acknowledged, until

pytestmark = pytest.mark.timeout(120)

MARGIN = 1.0  # seconds: a reply written right before a deadline (or a SIGSTOP) still travels to the client


@dataclass(frozen=True)
class Ack:
    """One acknowledged publish: its ids, the node and epoch that acknowledged it, and when the
    request was sent and its answer received (the decision lies between)."""

    ids: tuple[int, ...]
    node: str
    epoch: int
    sent: float
    received: float
    bookmark: int = 0  # the last one it gave


@dataclass(frozen=True)
class Refusal:
    node: str
    code: grpc.StatusCode
    message: str
    sent: float
    received: float


@dataclass
class History:
    """Every write attempted, acknowledged and refused, by any writer thread."""

    attempted: set[int] = field(default_factory=set)
    acks: list[Ack] = field(default_factory=list)
    refusals: list[Refusal] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def publish(self, target: str, node: str, epoch: int, ids: range, timeout: float = TTL + 8) -> Ack | Refusal:
        with self.lock:
            self.attempted.update(ids)
        sent = time.monotonic()
        try:
            with Client(target) as c:
                bookmark = c.publish("orders", [{"id": i} for i in ids], timeout=timeout).last_bookmark
        except SowdbError as exc:
            refusal = Refusal(node, exc.code, exc.message, sent, time.monotonic())
            with self.lock:
                self.refusals.append(refusal)
            return refusal
        ack = Ack(tuple(ids), node, epoch, sent, time.monotonic(), bookmark)
        with self.lock:
            self.acks.append(ack)
        return ack

    def acknowledged(self, node: str | None = None) -> list[Ack]:
        with self.lock:
            return [a for a in self.acks if node is None or a.node == node]

    def check(self, read: set[int]) -> None:
        """Jepsen's set check, and no two epochs acknowledging at once: every acknowledgement of a
        lower epoch was sent before any of a higher epoch was received."""
        acknowledged = {i for a in self.acks for i in a.ids}
        lost, unexpected = acknowledged - read, read - self.attempted
        assert not lost, f"{len(lost)} acknowledged writes lost: {sorted(lost)[:20]}"
        assert not unexpected, f"{len(unexpected)} writes read that nobody attempted: {sorted(unexpected)[:20]}"
        epochs = sorted({a.epoch for a in self.acks})
        for lower, higher in itertools.pairwise(epochs):
            last = max((a for a in self.acks if a.epoch == lower), key=lambda a: a.sent)
            first = min((a for a in self.acks if a.epoch == higher), key=lambda a: a.received)
            assert last.sent < first.received, f"epoch {lower} acknowledged after epoch {higher}: {last}, {first}"


class Writer:
    """A thread publishing batches of fresh ids to one node until stopped; a refusal is recorded
    and the next batch follows (paced, so that a node that is down is not dialled in a tight loop)."""

    def __init__(self, history: History, target: str, node: str, epoch: int, start: int) -> None:
        self.history, self.target, self.node, self.epoch = history, target, node, epoch
        self.next = start
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"writer-{node}", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            ids = range(self.next, self.next + 5)
            self.next += 5
            if isinstance(self.history.publish(self.target, self.node, self.epoch, ids), Refusal):
                self.stop.wait(0.05)

    def join(self) -> None:
        self.stop.set()
        self.thread.join(timeout=TTL + 20)
        assert not self.thread.is_alive()


class Rig:
    """Three nodes on one etcd, each started again (after a fork stop) with its own flags."""

    def __init__(self, tmp_path: Path, etcd: EtcdServer) -> None:
        self.nodes = Nodes(tmp_path / "nodes", etcd)
        self.flags: dict[str, tuple[str, ...]] = {}
        self.configs: dict[str, Path] = {}

    def start(self, name: str, *flags: str, config: Path | None = None) -> testing.Sowd:
        self.flags[name] = flags or ("--advertise", "127.0.0.1:0")
        self.configs[name] = config or self.nodes.config
        sowd = testing.start(self.nodes.tmp_path / name, "--node", name, *self.flags[name], config=self.configs[name])
        self.nodes.nodes[name] = sowd
        return sowd

    def target(self, name: str) -> str:
        return self.nodes.nodes[name].target

    def three(self) -> str:
        """n1 the primary, n2 and n3 following it; returns n1."""
        if "n1" not in self.nodes.nodes:
            self.start("n1")
        until(lambda: self.nodes.own("n1").role == "primary", within=30)
        self.start("n2")
        self.start("n3")
        until(lambda: len(self.nodes.status("n1")) == 3, within=30)
        return "n1"

    def converge(self, primary: str, within: float = 60) -> None:
        """Every node follows ``primary`` and has applied its last bookmark; a node that stopped
        because its journal forked (HA: it cut nothing yet, a supervisor restarts it) is started
        again, as in ``test_replication``'s fork test."""
        last = self.nodes.own(primary).applied_bookmark

        def settled() -> bool:
            for name, sowd in self.nodes.nodes.items():
                if sowd.proc.poll() is not None:
                    assert "forked after bookmark" in sowd.output, sowd.output[-3000:]
                    self.start(name, *self.flags[name], config=self.configs[name])
            return all(self.nodes.own(n).applied_bookmark >= last for n in self.nodes.nodes)

        until(settled, within=within)

    def read(self, name: str) -> set[int]:
        with Client(self.target(name)) as c:
            return {r.json()["id"] for r in c.sow("orders").records()}

    def assert_identical(self) -> None:
        self.nodes.stop()
        prints = {name: fingerprint(self.nodes.tmp_path / name) for name in self.nodes.nodes}
        assert len(set(prints.values())) == 1, f"the nodes differ: {prints}"


@pytest.fixture
def rig(tmp_path: Path, etcd: EtcdServer) -> Iterator[Rig]:
    r = Rig(tmp_path, etcd)
    try:
        yield r
    finally:
        r.nodes.stop()
        for name, sowd in r.nodes.nodes.items():  # shown when the test fails
            print(f"--- {name}\n" + "".join(sowd.lines[-30:]), file=sys.stderr)


def new_primary(rig: Rig, among: list[str], above: int, within: float = TTL + 20) -> tuple[str, int]:
    """The node of ``among`` that leads at an epoch above ``above`` (waiting until one does)."""

    def found() -> tuple[str, int] | None:
        for name in among:
            own = rig.nodes.own(name)
            if own.role == "primary" and own.epoch > above:
                return name, int(own.epoch)
        return None

    leader = until(found, within=within)
    assert isinstance(leader, tuple)
    return leader


def test_a_primary_partitioned_from_etcd_and_its_replicas_acknowledges_nothing_after_its_deadline(
    rig: Rig, etcd: EtcdServer
) -> None:
    port = free_ports(1)[0]
    with fault_proxy("127.0.0.1", etcd.port) as to_etcd, fault_proxy("127.0.0.1", port) as to_n1:
        n1_config = rig.nodes.tmp_path / "n1.toml"  # n1's etcd is the proxy; replicas dial it through one
        n1_config.write_text(rig.nodes.config.read_text().replace(etcd.url, f"http://127.0.0.1:{to_etcd.port}"))
        rig.start("n1", "--listen", f"127.0.0.1:{port}", "--advertise", f"127.0.0.1:{to_n1.port}", config=n1_config)
        rig.three()
        epoch = int(rig.nodes.own("n1").epoch)
        history = History()
        writers = [Writer(history, rig.target("n1"), "n1", epoch, w * 1_000_000) for w in range(2)]
        until(lambda: len(history.acknowledged("n1")) >= 20, within=30)

        blackholed, partitioned = partition(to_etcd, to_n1)
        new, new_epoch = new_primary(rig, ["n2", "n3"], above=epoch)
        writers.append(Writer(history, rig.target(new), new, new_epoch, 5_000_000))
        until(lambda: len(history.acknowledged(new)) >= 10, within=30)
        until(lambda: time.monotonic() > blackholed + TTL + 1)  # the partition held past n1's lease
        late = [a for a in history.acknowledged("n1") if a.received > blackholed + TTL]
        assert not late, f"the partitioned primary acknowledged after its deadline: {late}"

        to_etcd.set("forward")
        to_n1.set("forward")
        deposed(rig, history, "n1", epoch, new)
        for w in writers:
            w.join()
        rig.converge(new)
        read = rig.read(new)
    late = [a for a in history.acknowledged("n1") if a.received > blackholed + TTL]
    assert not late, f"the old primary acknowledged after its deadline: {late}"
    alone = [a for a in history.acknowledged("n1") if a.sent > partitioned]  # no replica can hold it
    assert not alone, f"the partitioned primary acknowledged a write its replicas never got: {alone}"
    history.check(read)
    rig.assert_identical()


def partition(*proxies: FaultProxy) -> tuple[float, float]:
    """Blackhole ``proxies``; the moments it began and was in effect on every one."""
    began = time.monotonic()
    for proxy in proxies:
        proxy.set("blackhole")
    return began, time.monotonic()


def test_with_etcd_stopped_writes_stop_within_the_lease_and_reads_go_on_everywhere(rig: Rig, etcd: EtcdServer) -> None:
    primary = rig.three()
    epoch = int(rig.nodes.own(primary).epoch)
    history = History()
    writer = Writer(history, rig.target(primary), primary, epoch, 0)
    until(lambda: len(history.acknowledged()) >= 20, within=30)
    etcd.pause()
    try:
        paused = time.monotonic()
        refused = lambda: [  # noqa: E731
            r for r in history.refusals if r.sent > paused + TTL and r.code == grpc.StatusCode.UNAVAILABLE
        ]
        until(refused, within=TTL + 20)
        late = [a for a in history.acknowledged() if a.received > paused + TTL + MARGIN]
        assert not late, f"acknowledged with etcd stopped, after the lease: {late}"
        acknowledged = history.acknowledged()
        last = max(a.bookmark for a in acknowledged)
        for name in rig.nodes.nodes:  # reads go on: a query, and a subscription replaying the journal
            until(lambda: rig.read(name) >= {i for a in acknowledged for i in a.ids})  # noqa: B023
            replayed = replay(rig.target(name), last)
            assert replayed == list(range(1, len(replayed) + 1)), f"{name} replayed a gap or a duplicate"
            assert replayed[-1] >= last, f"{name} replayed up to {replayed[-1:]}, not {last}"
        until(lambda: time.monotonic() > paused + TTL + 1)  # etcd held stopped past the lease
    finally:
        etcd.resume()
    resumed = time.monotonic()
    writer.join()
    leader = str(rig.nodes.primary(within=TTL + 20))
    after = publish_acknowledged(rig.target(leader), "orders", [{"id": -1}])
    history.attempted.add(-1)
    history.acks.append(Ack((-1,), leader, int(rig.nodes.own(leader).epoch), resumed, time.monotonic()))
    assert after.count == 1
    rig.converge(leader)
    history.check(rig.read(leader))
    rig.assert_identical()


def replay(target: str, upto: int) -> list[int]:
    """The bookmarks a subscription replaying the journal from the start delivers, until it
    delivers ``upto`` (or, failing that, within 15 s)."""
    seen: list[int] = []
    with suppress(SowdbError), Client(target) as c:
        for event in c.subscribe("orders", bookmark="0", timeout=15):
            seen.extend(r.bookmark for r in event.records)
            if seen and seen[-1] >= upto:
                break
    return seen


def test_a_primary_stopped_past_its_lease_acknowledges_nothing_after_it_resumes(rig: Rig) -> None:
    """The publish in flight when the primary stops is one it cannot have decided before: its
    replicas' ``Follow`` connections are blackholed first, so no replica can have reported
    holding it; the link heals while the primary is stopped, so on SIGCONT the reports wait in
    its socket and only its fencing deadline stands between the write and an acknowledgement."""
    port = free_ports(1)[0]
    with fault_proxy("127.0.0.1", port) as to_n1:
        rig.start("n1", "--listen", f"127.0.0.1:{port}", "--advertise", f"127.0.0.1:{to_n1.port}")
        old = rig.three()
        epoch = int(rig.nodes.own(old).epoch)
        history = History()
        writers = [Writer(history, rig.target(old), old, epoch, w * 1_000_000) for w in range(2)]
        until(lambda: len(history.acknowledged(old)) >= 20, within=30)
        for w in writers:
            w.join()
        before = int(rig.nodes.own(old).applied_bookmark)
        to_n1.set("blackhole")
        in_flight = threading.Thread(
            target=history.publish, args=(rig.target(old), old, epoch, range(9_000_000, 9_000_005))
        )
        in_flight.start()
        until(lambda: rig.nodes.own(old).applied_bookmark == before + 5)  # journaled, waiting for replicas
        sowd = rig.nodes.nodes[old]
        stopped = time.monotonic()
        sowd.proc.send_signal(signal.SIGSTOP)
        try:
            to_n1.set("forward")  # the replicas get the entries; their reports wait for the primary
            new, new_epoch = new_primary(rig, ["n2", "n3"], above=epoch)
            writers = [Writer(history, rig.target(new), new, new_epoch, 5_000_000)]
            until(lambda: len(history.acknowledged(new)) >= 10, within=30)
            until(lambda: time.monotonic() > stopped + TTL + 1)  # held stopped past its lease
        finally:
            sowd.proc.send_signal(signal.SIGCONT)
        resumed = time.monotonic()
        in_flight.join(timeout=TTL + 20)
        assert not in_flight.is_alive()
        deposed(rig, history, old, epoch, new)
        for w in writers:
            w.join()
        late = [a for a in history.acknowledged(old) if a.received > stopped + MARGIN]
        assert not late, f"the old primary acknowledged after it stopped ({stopped=}, {resumed=}): {late}"
        assert [r.code for r in history.refusals if r.sent < stopped] in (
            [grpc.StatusCode.UNAVAILABLE],
            [grpc.StatusCode.DEADLINE_EXCEEDED],
        ), "the publish in flight was not refused"
        rig.converge(new)
        read = rig.read(new)
    history.check(read)
    rig.assert_identical()


def deposed(rig: Rig, history: History, old: str, epoch: int, new: str) -> None:
    """After its fault ends, ``old`` refuses every write (UNAVAILABLE while it knows no primary,
    FAILED_PRECONDITION naming ``new`` once it follows it), unless it stopped because its
    journal forked; then, started again and following ``new``, it refuses naming ``new``."""
    named = rig.target(new)
    probe = itertools.count(8_000_000, 5)

    def refuses_naming_new() -> bool:
        if rig.nodes.nodes[old].proc.poll() is not None:
            return True  # stopped at a fork: rig.converge starts it again
        outcome = history.publish(rig.target(old), old, epoch, range(n := next(probe), n + 5))
        assert isinstance(outcome, Refusal), f"the deposed primary acknowledged: {outcome}"
        return outcome.code == grpc.StatusCode.FAILED_PRECONDITION and named in outcome.message

    until(refuses_naming_new, within=TTL + 30)
    rig.converge(new)
    outcome = history.publish(rig.target(old), old, epoch, range(n := next(probe), n + 5))
    assert isinstance(outcome, Refusal)
    assert outcome.code == grpc.StatusCode.FAILED_PRECONDITION, outcome
    assert named in outcome.message, outcome
    for r in history.refusals:
        if r.node == old:
            assert r.code in REFUSED, r
            if r.code == grpc.StatusCode.FAILED_PRECONDITION:
                assert named in r.message, r


REFUSED = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.DEADLINE_EXCEEDED)
"""How a fenced or deposed primary may answer a write: refused, or not answered in time (a
request that waited for replicas the partition held)."""
