#!/usr/bin/env python3
"""Failover soak (SPEC §13, issue 31): kill -9 whichever node is the primary, under acknowledged
load, cycle after cycle, and check what Jepsen's set checker checks.

etcd and three ``sowd`` (``[cluster] ack = "sync"``, or ``--ack async``) run as processes. Writer
threads publish batches of new ids with raw gRPC stubs: each finds the primary through
``ClusterStatus`` and, when a publish fails (the primary died, was fenced, or is a replica now),
finds it again and goes on with new ids. Every id sent is *attempted*; every id in an answered
publish is *acknowledged*. Each cycle kills the primary with SIGKILL, waits for the first
acknowledgement by its successor (the **failover time**: kill to that answer), restarts the
killed node (twice, when it stopped to cut a forked journal: HA-4) and waits until it has caught
up. At the end, with the load stopped and every node caught up:

- *lost* = acknowledged - final read; *unexpected* = final read - attempted;
- every node has the same last bookmark and the same digest of its journal and ``current``.

Under ``sync`` nothing may be lost; under ``async`` what is lost is counted, and each lost id
must be in a node's ``lost-writes.jsonl``, that is after the last bookmark its successor held
(HA-3, HA-4). Prints a table (cycle, failover time, lost, unexpected); exit status 1 on an
unexpected id, on a lost one under ``sync`` (or one not in a lost-writes file under ``async``),
on nodes that differ, or on a line of :data:`LOG_ERRORS` in a node's log (a task or a stream
left behind, an exception nobody handled).

etcd is secured as docs/cluster.md sets it up (TLS, client certificates, etcd's authentication
with a role limited to the cluster's keys: :func:`sowdb.testing.etcd.start_etcd`), unless
``--plain-etcd``. With ``--secured`` the nodes serve TLS and ask for tokens, and have node
certificates (issue 40): the replicas follow over mutual TLS on the peer port, with no token;
the soak's own calls carry the token.

Usage: ``.venv/bin/python tools/soak/failover_soak.py --cycles 20 [--ack async] [--secured] [--plain-etcd]``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from sowdb.testing.cluster import Cluster, fingerprint, until
from sowdb.testing.etcd import start_etcd
from sowdb.testing.pki import Certs
from sowdb_api.v1 import sow_pb2, sow_pb2_grpc

NODES = ("n1", "n2", "n3")
BATCH = 10
"""Ids per publish."""
TOKEN = "soak-replication-token"
"""With ``--secured``: the admin token the soak calls with."""
RESTART_TRIES = 3
"""Starts of a killed node before it follows: the first may stop to cut a forked journal (HA-4)."""


@dataclass
class Ledger:
    """What the writers sent and what was acknowledged, by whom and when (thread-safe)."""

    attempted: dict[int, int] = field(default_factory=dict)  # id -> cycle it was sent in
    acknowledged: dict[int, int] = field(default_factory=dict)  # id -> cycle it was acknowledged in
    acks: list[tuple[float, str, int]] = field(default_factory=list)  # (monotonic time, node, last bookmark)
    cycle: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def attempt(self, ids: range) -> None:
        with self._lock:
            self.attempted.update(dict.fromkeys(ids, self.cycle))

    def acknowledge(self, ids: range, node: str, bookmark: int) -> None:
        with self._lock:
            self.acknowledged.update(dict.fromkeys(ids, self.cycle))
            self.acks.append((time.monotonic(), node, bookmark))

    def first_ack(self, after: float, not_by: str) -> float | None:
        """When a node other than ``not_by`` first acknowledged after ``after`` (None: not yet)."""
        with self._lock:
            return next((t for t, node, _ in self.acks if t > after and node != not_by), None)

    def count(self) -> int:
        with self._lock:
            return len(self.acks)


class Primary:
    """Finds the primary through ClusterStatus: the node whose own row says ``primary``."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def find(self) -> tuple[str, str] | None:
        for name, sowd in list(self.cluster.nodes.items()):
            if sowd.proc.poll() is not None:
                continue
            with suppress(grpc.RpcError):
                if self.cluster.status(name)[0].role == "primary":
                    return name, sowd.target
        return None


class Load:
    """Writer threads publishing new ids to whichever node is the primary, until stopped."""

    def __init__(self, cluster: Cluster, ledger: Ledger, writers: int = 2) -> None:
        self.primary = Primary(cluster)
        self.cluster = cluster
        self.ledger = ledger
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._write, args=(w,), daemon=True) for w in range(writers)]

    def __enter__(self) -> Load:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=30)

    def _write(self, writer: int) -> None:
        ids = itertools.count(writer * 1_000_000_000, BATCH)
        channels: dict[str, grpc.Channel] = {}
        found: tuple[str, str] | None = None
        while not self.stop.is_set():
            if found is None:
                found = self.primary.find()
                if found is None:
                    self.stop.wait(0.05)  # no primary yet: ask again
                    continue
            node, target = found
            first = next(ids)
            batch = range(first, first + BATCH)
            request = sow_pb2.PublishRequest(
                topic="orders",
                messages=[sow_pb2.PublishMessage(data=json.dumps({"id": i, "w": writer}).encode()) for i in batch],
            )
            self.ledger.attempt(batch)
            channel = channels.get(target) or channels.setdefault(target, self.cluster.channel(target))
            try:
                publish = sow_pb2_grpc.SowServiceStub(channel).Publish
                reply = next(iter(publish(iter([request]), timeout=5, metadata=self.cluster.metadata)))
            except grpc.RpcError:
                found = None
                continue
            if reply.error.code:  # refused: a replica now, fenced, or no primary known
                found = None
                continue
            self.ledger.acknowledge(batch, node, reply.last_bookmark)
        for channel in channels.values():
            channel.close()


def read_ids(cluster: Cluster, name: str) -> set[int]:
    """Every id the node's ``orders`` holds (a Sow query over a raw stub)."""
    with cluster.channel(cluster.nodes[name].target) as channel:
        sow = sow_pb2_grpc.SowServiceStub(channel).Sow
        frames = sow(sow_pb2.SowRequest(topic="orders"), timeout=60, metadata=cluster.metadata)
        return {int(json.loads(r.data)["id"]) for f in frames if f.HasField("records") for r in f.records.records}


def following(cluster: Cluster, name: str, bookmark: int) -> bool:
    """``name`` follows the primary and has applied ``bookmark`` (a node with a forked journal
    is refused as a follower, so its own bookmark is not enough)."""
    with suppress(grpc.RpcError, AssertionError):
        rows = cluster.status(cluster.primary(within=1))
        return any(r.node == name and r.applied_bookmark >= bookmark for r in rows[1:])
    return False


def restart(cluster: Cluster, name: str, within: float = 60.0) -> None:
    """Start ``name`` again until it follows and has applied what the primary had at its start:
    a node whose journal forked stops to cut it (HA-4), and is started again."""
    for _ in range(RESTART_TRIES):
        bookmark = cluster.own(cluster.primary(within=within)).applied_bookmark
        sowd = cluster.start(name)
        until(lambda s=sowd, b=bookmark: s.proc.poll() is not None or following(cluster, name, b), within)
        if sowd.proc.poll() is None:
            return
        sowd.stop(timeout=30)
    raise RuntimeError(f"node {name} did not rejoin after {RESTART_TRIES} starts:\n{cluster.nodes[name].output}")


def caught_up(cluster: Cluster, within: float = 60.0) -> int:
    """With the load stopped: wait until every node has applied the primary's last bookmark;
    that bookmark. The primary and its bookmark are read again at each probe: a write still in
    flight when the load stopped may land after the first read, and the primary may change.

    Raises:
        AssertionError: not within ``within`` s, with each node's role, bookmark and output.
    """

    def same() -> int:
        rows = {n: cluster.own(n) for n in cluster.nodes}
        leaders = [r for r in rows.values() if r.role == "primary"]
        if len(leaders) != 1:
            return 0
        last = leaders[0].applied_bookmark
        return last if all(r.applied_bookmark == last for r in rows.values()) else 0

    try:
        return int(str(until(same, within)))
    except AssertionError as exc:
        own = {n: cluster.own(n) for n in cluster.nodes}
        rows = ", ".join(f"{n} {r.role} at {r.applied_bookmark}" for n, r in own.items())
        raise AssertionError(f"{exc}: the nodes did not catch up ({rows})\n{cluster.outputs()}") from None


@dataclass
class Cycle:
    """One kill of the primary: the node, the failover time (s), the ids lost and unexpected."""

    node: str
    failover_s: float
    lost: int = 0
    unexpected: int = 0


def supervise(cluster: Cluster) -> None:
    """Start again, as its supervisor would, a node that stopped on its own: a replica that had
    applied entries its next primary never got (not acknowledged: the sync member lacked them)
    finds its journal forked after a failover and stops, to cut it at its next start (HA-4)."""
    for name, sowd in list(cluster.nodes.items()):
        if sowd.proc.poll() is not None and sowd.proc.returncode == 0:
            restart(cluster, name)


def kill_primary(cluster: Cluster, ledger: Ledger, within: float = 30.0) -> Cycle:
    """SIGKILL the primary under load; once its successor acknowledges, start it again (and
    any node that stopped to cut its forked journal)."""
    supervise(cluster)
    start = ledger.count()
    until(lambda: ledger.count() >= start + 20, within)  # the load runs on this primary
    old = cluster.primary(within=within)
    cluster.nodes[old].kill()
    killed = time.monotonic()
    first = until(lambda: ledger.first_ack(killed, not_by=old), cluster.ttl + within)
    cycle = Cycle(old, float(str(first)) - killed)
    restart(cluster, old)
    supervise(cluster)
    return cycle


@contextmanager
def running_cluster(
    work: Path, ack: str, ttl: int, nodes: Sequence[str] = NODES, *, secured: bool = False, plain_etcd: bool = False
) -> Iterator[Cluster]:
    """etcd and ``nodes`` (the first one primary, every other following it), stopped after;
    ``secured``: TLS and tokens, the replicas following over mutual TLS with node certificates;
    ``plain_etcd``: etcd over ``http://`` without authentication (else TLS and auth)."""
    etcd = start_etcd(work, secured=not plain_etcd)
    cluster = Cluster(work, etcd, ack=ack, ttl=ttl)
    if secured:
        cluster.secure(Certs(work / "pki"), TOKEN)
    try:
        cluster.start(nodes[0])
        cluster.primary()
        for name in nodes[1:]:
            cluster.start(name)
        until(lambda: len(cluster.status(cluster.primary())) == len(nodes), 30)
        yield cluster
    finally:
        cluster.stop()
        etcd.stop()


LOG_ERRORS = (
    "Task was destroyed but it is pending",
    "Task exception was never retrieved",
    "asynchronous generator is already running",
    "Abort already called",
    "Traceback (most recent call last)",
)
"""Lines no node's log may hold: each is a bug (a task or a stream left behind, an exception
nobody handled), however harmless the run's outcome."""


def log_errors(cluster: Cluster) -> list[str]:
    """The lines of :data:`LOG_ERRORS` in the output of every start of every node."""
    lines = ((name, line) for name, sowd in cluster.started for line in sowd.lines)
    return [f"{name}: {line.strip()}" for name, line in lines if any(e in line for e in LOG_ERRORS)]


def lost_writes(work: Path) -> set[int]:
    """The ids every node set aside when it cut its forked journal (``lost-writes.jsonl``)."""
    ids: set[int] = set()
    for name in NODES:
        path = work / name / "lost-writes.jsonl"
        if path.exists():
            ids.update(json.loads(json.loads(line)["data"])["id"] for line in path.read_text().splitlines())
    return ids


def run(
    cycles: int,
    work: Path,
    ack: str = "sync",
    ttl: int = 2,
    report: bool = True,
    *,
    secured: bool = False,
    plain_etcd: bool = False,
) -> int:
    """The soak; its exit status (0: nothing wrong)."""
    ledger = Ledger()
    rows: list[Cycle] = []
    with running_cluster(work, ack, ttl, secured=secured, plain_etcd=plain_etcd) as cluster:
        with Load(cluster, ledger):
            for n in range(1, cycles + 1):
                ledger.cycle = n
                rows.append(kill_primary(cluster, ledger))
                if report:
                    print(f"cycle {n}: killed {rows[-1].node}, failover {rows[-1].failover_s:.2f} s", flush=True)
        supervise(cluster)
        last = caught_up(cluster)
        read = read_ids(cluster, cluster.primary())
        cluster.stop()
        digests = {name: fingerprint(work / name) for name in NODES}
        noise = log_errors(cluster)
    lost = set(ledger.acknowledged) - read
    unexpected = read - set(ledger.attempted)
    for i in lost:
        rows[max(ledger.acknowledged[i], 1) - 1].lost += 1
    for i in unexpected:
        rows[max(ledger.attempted[i], 1) - 1].unexpected += 1
    print(f"{'cycle':>5}  {'killed':>6}  {'failover s':>10}  {'lost':>6}  {'unexpected':>10}")
    for n, c in enumerate(rows, 1):
        print(f"{n:>5}  {c.node:>6}  {c.failover_s:>10.2f}  {c.lost:>6}  {c.unexpected:>10}")
    times = [c.failover_s for c in rows]
    how = ("TLS, tokens and node certificates" if secured else "plaintext") + (
        ", etcd plain" if plain_etcd else ", etcd TLS + auth"
    )
    print(f"failover: median {statistics.median(times):.2f} s, max {max(times):.2f} s (lease_ttl {ttl} s, {how})")
    print(f"acknowledged {len(ledger.acknowledged)}, attempted {len(ledger.attempted)}, read {len(read)}")
    print(f"lost {len(lost)}, unexpected {len(unexpected)}, last bookmark {last}")
    failed = []
    if unexpected:
        failed.append(f"{len(unexpected)} ids read that were never sent")
    if lost and ack != "async":
        failed.append(f"{len(lost)} acknowledged ids lost under ack = {ack}")
    if ack == "async" and (stray := lost - lost_writes(work)):
        failed.append(f"{len(stray)} lost ids are in no lost-writes.jsonl: {sorted(stray)[:10]}")
    if noise:
        failed.append(f"{len(noise)} error lines in the nodes' logs, the first: {noise[:3]}")
    if len(set(digests.values())) != 1 or any(b != last for b, _ in digests.values()):
        failed.append(f"the nodes differ (last bookmark, digest): {digests}")
    else:
        print(f"every node: bookmark {last}, digest {next(iter(digests.values()))[1][:16]}")
    print(json.dumps(Counter(c.node for c in rows)), "kills by node")
    for reason in failed:
        print(f"FAILED: {reason}")
    return 1 if failed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=20)
    parser.add_argument("--ack", choices=("sync", "async"), default="sync")
    parser.add_argument("--lease-ttl", type=int, default=2, help="[cluster] lease_ttl in seconds (at least 2)")
    parser.add_argument("--work-dir", help="where etcd's and the nodes' data go (default: a temporary directory)")
    parser.add_argument(
        "--secured", action="store_true", help="TLS, tokens and node certificates; the replicas follow over mTLS"
    )
    parser.add_argument("--plain-etcd", action="store_true", help="etcd over http:// without authentication")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.work_dir or tmp)
        work.mkdir(parents=True, exist_ok=True)
        return run(args.cycles, work, args.ack, args.lease_ttl, secured=args.secured, plain_etcd=args.plain_etcd)


if __name__ == "__main__":
    sys.exit(main())
