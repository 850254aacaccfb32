"""Faults against real processes (SPEC §13, HA-1/HA-3; issue 31): etcd and three ``sowd``, with
the TCP fault proxy (:mod:`sowdb.testing.faultproxy`) between them where a partition is needed.
``tests/cluster/test_election.py`` checks the same faults on in-process elections; these check
what a client of the real servers sees.

Every test keeps a Jepsen-style history (:mod:`tests.cluster.history`): each write attempted, and
each acknowledgement with the node and epoch that gave it and when it was sent and received on the
test's monotonic clock. Checked against the final read of the primary: *lost* = acknowledged -
read and *unexpected* = read - attempted are empty; no acknowledgement by a fenced primary after
its deadline; no two epochs acknowledging at once; and every node, stopped at the end, holds the
same journal, ``current`` and producer state (:func:`fingerprint`).

The fault is aimed at whichever node leads once loaded: on a loaded machine an etcd round can
outlast a 2 s lease, and the first primary may step down before the test gets to it.

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
from contextlib import contextmanager, suppress
from pathlib import Path

import grpc
import pytest

from sowdb import testing
from sowdb.testing.cluster import Cluster, fingerprint
from sowdb.testing.etcd import free_ports
from sowdb.testing.faultproxy import FaultProxy
from sowdb_client import Client, SowdbError
from tests.cluster.conftest import EtcdServer
from tests.cluster.history import REFUSED, Ack, History, Refusal, Writer
from tests.cluster.support import TTL, publish_acknowledged, sync_record, until

pytestmark = pytest.mark.timeout(120)

MARGIN = 1.0  # seconds: a reply written right before a deadline (or a SIGSTOP) still travels to the client


class Rig:
    """Three nodes on one etcd, each started again (after a fork stop) as before. ``proxied``:
    each node dials etcd through a fault proxy of its own and advertises another in front of
    itself (what replicas dial), while the test's clients dial its own port."""

    def __init__(self, tmp_path: Path, etcd: EtcdServer, proxied: bool = False) -> None:
        self.nodes = Cluster(tmp_path / "nodes", etcd)
        self.etcd, self.proxied = etcd, proxied
        self.flags: dict[str, tuple[str, ...]] = {}
        self.configs: dict[str, Path] = {}
        self.proxies: dict[str, tuple[FaultProxy, FaultProxy]] = {}  # node: (to etcd, to the node)

    def start(self, name: str) -> testing.Sowd:
        if name not in self.flags:
            self.flags[name], self.configs[name] = ("--advertise", "127.0.0.1:0"), self.nodes.config
        if self.proxied and name not in self.proxies:
            port = free_ports(1)[0]
            to_etcd, to_node = FaultProxy("127.0.0.1", self.etcd.port), FaultProxy("127.0.0.1", port)
            self.proxies[name] = (to_etcd, to_node)
            to_etcd.start(), to_node.start()
            self.configs[name] = self.nodes.tmp_path / f"{name}.toml"
            proxied = self.etcd.url.replace(str(self.etcd.port), str(to_etcd.port))
            self.configs[name].write_text(self.nodes.config.read_text().replace(self.etcd.url, proxied))
            self.flags[name] = ("--listen", f"127.0.0.1:{port}", "--advertise", f"127.0.0.1:{to_node.port}")
        sowd = testing.start(self.nodes.tmp_path / name, "--node", name, *self.flags[name], config=self.configs[name])
        self.nodes.nodes[name] = sowd
        return sowd

    def target(self, name: str) -> str:
        return self.nodes.nodes[name].target

    def advertised(self, name: str) -> str:
        """What ``name`` advertises: the proxy before it, if any; else where it serves."""
        return f"127.0.0.1:{self.proxies[name][1].port}" if name in self.proxies else self.target(name)

    def three(self) -> None:
        """n1, n2 and n3 started, a primary followed by the two others."""
        for name in ("n1", "n2", "n3"):
            self.start(name)
        until(lambda: len(self.nodes.status(self.nodes.primary(within=30))) == 3, within=30)

    def load(self, history: History) -> tuple[str, int, list[Writer]]:
        """Two writers publishing to the primary until it has acknowledged 20 batches at one
        epoch: (the primary, its epoch, the writers). On a loaded machine an etcd round may
        take longer than a 2 s lease allows and the primary step down before: then its writers
        are stopped, their acknowledgements kept without an epoch, and the next primary loaded."""
        for attempt in range(3):
            primary = str(self.nodes.primary(within=30))
            epoch = int(self.nodes.own(primary).epoch)
            start = attempt * 100_000
            writers = [Writer(history, self.target(primary), primary, epoch, start + w * 1_000_000) for w in range(2)]
            until(lambda: self.loaded(history, primary, epoch), within=30)  # noqa: B023
            if self.leads(primary, epoch):
                return primary, epoch, writers
            for w in writers:
                w.join()
            history.unlabel(primary, epoch)
        raise AssertionError("no primary kept its lease long enough to be loaded")

    def loaded(self, history: History, name: str, epoch: int) -> bool:
        """``name`` acknowledged 20 batches, or stopped leading at ``epoch``."""
        return len(history.acknowledged(name)) >= 20 or not self.leads(name, epoch)

    def leads(self, name: str, epoch: int) -> bool:
        own = self.nodes.own(name)
        return own.role == "primary" and own.epoch == epoch

    def converge(self, within: float = 60) -> str:
        """Until a primary leads and every node has applied its last bookmark; returns the
        primary. A node that stopped because its journal forked (it cuts the fork at its next
        start) is started again, as its supervisor would (``test_replication``'s fork test)."""

        def settled() -> str | None:
            for name, sowd in self.nodes.nodes.items():
                if sowd.proc.poll() is not None:
                    assert "forked after bookmark" in sowd.output, sowd.output[-3000:]
                    self.start(name)
            own = {n: self.nodes.own(n) for n in self.nodes.nodes}
            primary = next((n for n, o in own.items() if o.role == "primary"), None)
            if primary is None or any(o.applied_bookmark < own[primary].applied_bookmark for o in own.values()):
                return None
            return primary

        return str(until(settled, within=within))

    def read(self, name: str) -> set[int]:
        with Client(self.target(name)) as c:
            return {r.json()["id"] for r in c.sow("orders").records()}

    def assert_identical(self) -> None:
        self.nodes.stop()
        prints = {name: fingerprint(self.nodes.tmp_path / name) for name in self.nodes.nodes}
        assert len(set(prints.values())) == 1, f"the nodes differ: {prints}"


@contextmanager
def started(tmp_path: Path, etcd: EtcdServer, proxied: bool) -> Iterator[Rig]:
    r = Rig(tmp_path, etcd, proxied)
    try:
        yield r
    finally:
        r.nodes.stop()
        for proxies in r.proxies.values():
            for proxy in proxies:
                proxy.stop()
        for name, sowd in r.nodes.nodes.items():  # shown when the test fails
            print(f"--- {name}\n" + "".join(sowd.lines[-30:]), file=sys.stderr)


@pytest.fixture
def rig(tmp_path: Path, etcd: EtcdServer) -> Iterator[Rig]:
    with started(tmp_path, etcd, proxied=False) as r:
        yield r


@pytest.fixture
def proxied(tmp_path: Path, etcd: EtcdServer) -> Iterator[Rig]:
    """A :class:`Rig` with a fault proxy before each node's etcd and before each node."""
    with started(tmp_path, etcd, proxied=True) as r:
        yield r


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
    proxied: Rig,
) -> None:
    proxied.three()
    history = History()
    old, epoch, writers = proxied.load(history)
    others = [n for n in proxied.nodes.nodes if n != old]
    blackholed, partitioned = partition(*proxied.proxies[old])  # its etcd, and its replicas' Follow
    new, new_epoch = new_primary(proxied, others, above=epoch)
    writers.append(Writer(history, proxied.target(new), new, new_epoch, 5_000_000))
    until(lambda: len(history.acknowledged(new)) >= 10, within=30)
    until(lambda: time.monotonic() > blackholed + TTL + 1)  # the partition held past the old lease
    late = [a for a in history.acknowledged(old) if a.received > blackholed + TTL]
    assert not late, f"the partitioned primary acknowledged after its deadline: {late}"

    for proxy in proxied.proxies[old]:
        proxy.set("forward")
    deposed(proxied, history, old, epoch, since=blackholed)
    for w in writers:
        w.join()
    new = proxied.converge()
    late = [a for a in history.acknowledged(old) if a.received > blackholed + TTL]
    assert not late, f"the old primary acknowledged after its deadline: {late}"
    alone = [a for a in history.acknowledged(old) if a.sent > partitioned]  # no replica can hold it
    assert not alone, f"the partitioned primary acknowledged a write its replicas never got: {alone}"
    history.check(proxied.read(new))
    proxied.assert_identical()


def partition(*proxies: FaultProxy) -> tuple[float, float]:
    """Blackhole ``proxies``; the moments it began and was in effect on every one."""
    began = time.monotonic()
    for proxy in proxies:
        proxy.set("blackhole")
    return began, time.monotonic()


def test_with_etcd_stopped_writes_stop_within_the_lease_and_reads_go_on_everywhere(rig: Rig, etcd: EtcdServer) -> None:
    rig.three()
    history = History()
    _, _, writers = rig.load(history)
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
    for w in writers:
        w.join()
    leader = str(rig.nodes.primary(within=TTL + 20))
    after = publish_acknowledged(rig.target(leader), "orders", [{"id": -1}])
    history.attempted.add(-1)
    history.acks.append(Ack((-1,), leader, int(rig.nodes.own(leader).epoch), resumed, time.monotonic()))
    assert after.count == 1
    history.check(rig.read(rig.converge()))
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


def test_a_primary_stopped_past_its_lease_acknowledges_nothing_after_it_resumes(proxied: Rig) -> None:
    """The publish in flight when the primary stops is one it cannot have decided before: its
    replicas' ``Follow`` connections are blackholed first, so no replica can have reported
    holding it; the link heals while the primary is stopped, so on SIGCONT the reports wait in
    its socket and only its fencing deadline stands between the write and an acknowledgement."""
    proxied.three()
    history = History()
    old, epoch, writers = proxied.load(history)
    for w in writers:
        w.join()
    before = int(proxied.nodes.own(old).applied_bookmark)
    to_old = proxied.proxies[old][1]
    to_old.set("blackhole")
    outcome: list[Ack | Refusal] = []
    in_flight = threading.Thread(
        target=lambda: outcome.append(history.publish(proxied.target(old), old, epoch, range(9_000_000, 9_000_005)))
    )
    in_flight.start()
    until(lambda: proxied.nodes.own(old).applied_bookmark == before + 5)  # journaled, waiting for replicas
    sowd = proxied.nodes.nodes[old]
    stopped = time.monotonic()
    sowd.proc.send_signal(signal.SIGSTOP)
    try:
        to_old.set("forward")  # the replicas get the entries; their reports wait for the primary
        new, new_epoch = new_primary(proxied, [n for n in proxied.nodes.nodes if n != old], above=epoch)
        writers = [Writer(history, proxied.target(new), new, new_epoch, 5_000_000)]
        until(lambda: len(history.acknowledged(new)) >= 10, within=30)
        until(lambda: time.monotonic() > stopped + TTL + 1)  # held stopped past its lease
    finally:
        sowd.proc.send_signal(signal.SIGCONT)
    resumed = time.monotonic()
    in_flight.join(timeout=TTL + 20)
    assert not in_flight.is_alive()
    deposed(proxied, history, old, epoch, since=stopped)
    for w in writers:
        w.join()
    late = [a for a in history.acknowledged(old) if a.received > stopped + MARGIN]
    assert not late, f"the old primary acknowledged after it stopped ({stopped=}, {resumed=}): {late}"
    assert isinstance(outcome[0], Refusal), f"the publish in flight was acknowledged: {outcome}"
    assert outcome[0].code in REFUSED, outcome
    new = proxied.converge()
    history.check(proxied.read(new))
    proxied.assert_identical()


def deposed(rig: Rig, history: History, old: str, epoch: int, since: float) -> str:
    """After its fault ends, ``old`` refuses every write: UNAVAILABLE while it knows no primary,
    FAILED_PRECONDITION naming the primary once it follows one (the new primary; on a loaded
    machine its lease may even pass to a third node), unless it stopped because its journal
    forked; then, started again, it follows and refuses naming the primary. Checked for every
    write sent to it since ``since``, the fault's start. Returns the primary the cluster settled on."""
    others = {rig.advertised(n) for n in rig.nodes.nodes if n != old}
    probe = itertools.count(8_000_000, 5)

    def names(refusal: Refusal, primaries: set[str]) -> bool:
        return refusal.code == grpc.StatusCode.FAILED_PRECONDITION and any(p in refusal.message for p in primaries)

    def refuses_naming_another() -> bool:
        if rig.nodes.nodes[old].proc.poll() is not None:
            return True  # stopped at a fork: rig.converge starts it again
        outcome = history.publish(rig.target(old), old, epoch, range(n := next(probe), n + 5))
        assert isinstance(outcome, Refusal), f"the deposed primary acknowledged: {outcome}"
        return names(outcome, others)

    until(refuses_naming_another, within=TTL + 30)
    primary = rig.converge()
    if primary != old:  # it may lead again (a new epoch) once it holds everything
        outcome = history.publish(rig.target(old), old, epoch, range(n := next(probe), n + 5))
        assert isinstance(outcome, Refusal), f"a replica acknowledged: {outcome}"
        assert names(outcome, {rig.advertised(primary)}), outcome
    for r in history.refusals:
        if r.node == old and r.sent > since:
            assert r.code in REFUSED, r
            assert r.code != grpc.StatusCode.FAILED_PRECONDITION or names(r, others), r
    return primary


def test_a_replica_that_applies_slowly_keeps_sync(proxied: Rig) -> None:
    """A loaded machine can leave the sync replica seconds behind while it still applies: the
    primary waits for it (a write is UNAVAILABLE after two leases, and sent again) rather than
    mark it stalled and fall back to acknowledging alone, which would let a failover lose what it
    acknowledged. Here the link from the primary passes one 64 KiB chunk per 0.15 s, so one
    batch of 8,000 records reaches the replica over about 3 s (past one lease), a frame of 2,000
    entries every 0.8 s or so: it applies and reports all the while."""
    proxied.start("n1")
    assert proxied.nodes.primary(within=30) == "n1"
    proxied.start("n2")
    until(lambda: len(proxied.nodes.status("n1")) == 2, within=30)
    until(lambda: (record := sync_record(proxied.etcd)) is not None and record.nodes == ("n2",), within=30)
    publish_acknowledged(proxied.target("n1"), "orders", [{"id": 0}])
    seen = len(proxied.nodes.nodes["n1"].output)  # before n2 came, n1 may have acknowledged alone
    proxied.proxies["n1"][1].set("forward", delay=0.15)
    docs = [{"id": i, "pad": "x" * 60} for i in range(1, 8001)]
    began = time.monotonic()
    assert publish_acknowledged(proxied.target("n1"), "orders", docs, batch_size=8000, timeout=30).count == 8000
    assert time.monotonic() - began > TTL  # it did wait past one lease for the replica
    output = proxied.nodes.nodes["n1"].output[seen:]
    assert "has applied nothing" not in output, output[-3000:]
    assert "acknowledging alone" not in output, output[-3000:]
    assert proxied.nodes.own("n2").applied_bookmark == proxied.nodes.own("n1").applied_bookmark
