"""What the cluster's tests share: a node's config, a journal of election events across nodes
that a test can wait on, the check that no two nodes' acknowledge windows overlap, and a
cluster of real ``sowd`` processes (:class:`Cluster`) with the waits and reads its tests use."""

from __future__ import annotations

import asyncio
import itertools
import os
import re
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc

from sowdb import testing
from sowdb.auth import hash_token
from sowdb.cluster.election import Election, ElectionEvent, Eligible
from sowdb.cluster.etcd import Etcd
from sowdb.cluster.syncset import SyncRecord
from sowdb.config.cluster import ClusterConfig
from sowdb.storage import Store
from sowdb_api.v1 import admin_pb2, admin_pb2_grpc
from sowdb_client import Client, PublishAck, SowdbError

if TYPE_CHECKING:
    from tests.cluster.conftest import EtcdServer
    from tests.support import Certs

TTL = 2  # seconds: etcd's shortest lease, so that the tests stay quick


def cluster_config(etcd_url: str, node: str, name: str = "t") -> ClusterConfig:
    return ClusterConfig(
        name=name, node=node, advertise=f"127.0.0.1:{9000 + len(node)}", etcd=(etcd_url,), lease_ttl_s=TTL
    )


@dataclass
class Journal:
    """Every node's election events in order, on the shared monotonic clock."""

    events: list[ElectionEvent] = field(default_factory=list)
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    def __call__(self, event: ElectionEvent) -> None:
        self.events.append(event)
        self._changed.set()

    def of(self, kind: str, node: str | None = None, after: float = 0.0) -> list[ElectionEvent]:
        return [e for e in self.events if e.kind == kind and (node is None or e.node == node) and e.at >= after]

    async def wait(self, condition: Callable[[], object], within: float = 20.0) -> None:
        """Until ``condition()`` holds (checked at each event), failing after ``within`` s."""
        give_up = time.monotonic() + within
        while not condition():
            self._changed.clear()
            left = give_up - time.monotonic()
            if left <= 0:
                raise AssertionError(f"not reached within {within}s; events: {self.events}")
            with suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), min(left, 0.2))

    def windows(self) -> list[tuple[str, int, float, float]]:
        """(node, epoch, from, to) of every span in which a node could acknowledge."""
        spans: list[tuple[str, int, float, float]] = []
        open_: dict[str, tuple[int, float]] = {}
        for e in self.events:
            if e.kind == "lead":
                open_[e.node] = (e.epoch, e.at)
            elif e.kind == "fenced" and e.node in open_:
                epoch, start = open_.pop(e.node)
                spans.append((e.node, epoch, start, e.at))
        spans.extend((node, epoch, start, float("inf")) for node, (epoch, start) in open_.items())
        return spans

    def assert_no_overlap(self) -> None:
        spans = sorted(self.windows(), key=lambda s: s[2])
        for a, b in itertools.pairwise(spans):
            assert a[3] <= b[2], f"two primaries acknowledging at once: {a} and {b}"
            # a new primary has a higher epoch; one node may resume its own (an abandoned switchover)
            assert a[1] < b[1] or (a[0], a[1]) == (b[0], b[1]), f"the epoch did not rise: {a} then {b}"


async def _always() -> bool:
    return True


class Node:
    """An :class:`Election` running as a task of the test's loop."""

    def __init__(self, config: ClusterConfig, journal: Journal, eligible: Eligible | None = None) -> None:
        self.election = Election(config, listener=journal, eligible=eligible or _always)
        self.task = asyncio.get_running_loop().create_task(self.election.run())

    async def stop(self, *, resign: bool = True) -> None:
        self.task.cancel()
        with suppress(asyncio.CancelledError):
            await self.task
        await self.election.close(resign=resign)


# --- a cluster of real processes -------------------------------------------------------------

TOPICS = """
[[topic]]
name = "orders"
key = ["/id"]
"""


def node_config(tmp_path: Path, etcd: EtcdServer, ack: str = "sync") -> Path:
    (tmp_path / "alone.toml").write_text(TOPICS)  # the same topics without [cluster]
    path = tmp_path / "node.toml"
    path.write_text(
        TOPICS
        + f"""
[cluster]
name = "t"
etcd = ["{etcd.url}"]
ack = "{ack}"
sync_replicas = 1
lease_ttl = "{TTL}s"
"""
    )
    return path


def secure_config(config: Path, certs: Certs, token: str, *, ca: str = "ca.pem") -> None:
    """Add TLS (a server certificate the test CA signed), a users file with one admin user of
    ``token`` beside ``config``, and ``certs[ca]`` as ``[cluster] ca`` to a node's config."""
    users = config.parent / "users.toml"
    users.write_text(f'[[user]]\nname = "repl"\ntoken_sha256 = "{hash_token(token)}"\nroles = ["ops"]\n')
    text = re.sub(r'(?m)^(lease_ttl = "\d+s")$', rf'\1\nca = "{certs[ca]}"', config.read_text(), count=1)
    config.write_text(
        text
        + f"""
[security]
tls_cert = "{certs["server.pem"]}"
tls_key = "{certs["server.key"]}"
users_file = "{users}"

[[role]]
name = "ops"
read = [".*"]
write = [".*"]
admin = true
"""
    )


CREATED: list[Cluster] = []
"""Every :class:`Cluster` the running test made (tests/cluster/conftest.py shows their nodes'
output when the test fails)."""


class Cluster:
    """Three nodes n1..n3 on one etcd."""

    def __init__(self, tmp_path: Path, etcd: EtcdServer, ack: str = "sync") -> None:
        self.tmp_path = tmp_path
        self.config = node_config(tmp_path, etcd, ack)
        self.channel: Callable[[str], grpc.Channel] = grpc.insecure_channel
        """How the tests dial a node (TLS once :meth:`secure` ran)."""
        self.metadata: tuple[tuple[str, str], ...] = ()
        """What the tests' raw calls carry (the token once :meth:`secure` ran)."""
        self.env: dict[str, str] | None = None  # the nodes' environment (None: the test's)
        self.nodes: dict[str, testing.Sowd] = {}
        self.started: list[tuple[str, testing.Sowd]] = []
        """Every start of a node, in order (a restart replaces it in :attr:`nodes`, not here)."""
        CREATED.append(self)

    def secure(self, certs: Certs, token: str, *, ca: str = "ca.pem") -> None:
        """Secure the nodes not started yet: TLS with the certificate ``certs`` made, an admin
        user of ``token`` that the nodes also follow with (``SOWDB_CLUSTER_TOKEN``), and
        ``certs[ca]`` as ``[cluster] ca``; the tests' own calls go over TLS with the token."""
        secure_config(self.config, certs, token, ca=ca)
        credentials = grpc.ssl_channel_credentials(Path(certs["ca.pem"]).read_bytes())
        self.channel = lambda target: grpc.secure_channel(target, credentials)
        self.metadata = (("authorization", f"Bearer {token}"),)
        self.env = {**os.environ, "SOWDB_CLUSTER_TOKEN": token}

    def start(self, name: str) -> testing.Sowd:
        sowd = testing.start(
            self.tmp_path / name, "--node", name, "--advertise", "127.0.0.1:0", config=self.config, env=self.env
        )
        self.nodes[name] = sowd
        self.started.append((name, sowd))
        return sowd

    def outputs(self, lines: int = 60) -> str:
        """The last ``lines`` lines of every start of every node: what a failed test shows, so
        that a step-down or a fork on a loaded machine says itself."""
        parts = []
        for number, (name, sowd) in enumerate(self.started, start=1):
            tail = "".join(sowd.lines[-lines:])
            parts.append(f"--- start {number}: {name} (exit {sowd.proc.poll()}) ---\n{tail}")
        return "\n".join(parts)

    def primary_and_replica(self) -> str:
        """n1 started and leading, then n2 started and following it; n1's address."""
        self.start("n1")
        assert self.primary() == "n1"
        self.start("n2")
        until(lambda: len(self.status("n1")) == 2)
        return self.nodes["n1"].target

    def status(self, name: str) -> list[admin_pb2.ClusterNode]:
        with self.channel(self.nodes[name].target) as channel:
            reply = admin_pb2_grpc.AdminServiceStub(channel).ClusterStatus(
                admin_pb2.ClusterStatusRequest(), timeout=5, metadata=self.metadata
            )
        return list(reply.nodes)

    def primary(self, among: list[str] | None = None, within: float = 20.0) -> str:
        """The node that says it is the primary (waiting until one does)."""
        names = among or list(self.nodes)
        return str(until(lambda: next((n for n in names if self.own(n).role == "primary"), None), within))

    def own(self, name: str) -> admin_pb2.ClusterNode:
        try:
            return self.status(name)[0]
        except grpc.RpcError:
            return admin_pb2.ClusterNode(node=name, role="down")

    def stop(self) -> None:
        for sowd in self.nodes.values():
            sowd.stop()


def until(probe: Callable[[], object], within: float = 20.0) -> object:
    give_up = time.monotonic() + within
    while not (found := probe()):
        if time.monotonic() > give_up:
            raise AssertionError(f"not reached within {within}s")
        time.sleep(0.05)
    return found


def journal(data_dir: Path) -> list[tuple[int, int, int, str, str, bytes]]:
    store = Store(data_dir)
    try:
        return [(e.seq, e.timestamp_us, e.op, e.topic, e.sow_key, e.payload) for e in store.iter_journal(0)]
    finally:
        store.close()


def digest(data_dir: Path) -> tuple[int, list[tuple[str, str, object]], dict[str, int]]:
    """A stopped node's last bookmark, ``current`` (every record with its bookmark, timestamp,
    expiry and data) and producer state (J-4): what two nodes that agree hold alike."""
    store = Store(data_dir)
    try:
        return store.last_sequence(), list(store.load_current()), store.producer_seqs()
    finally:
        store.close()


def publish_acknowledged(target: str, topic: str, docs: list[dict[str, Any]], **options: Any) -> PublishAck:
    """Publish until acknowledged: a primary that the loaded test machine delayed past its
    fencing deadline answers UNAVAILABLE for a while (HA-1), and a request sent again is safe
    with a J-4 producer id in ``options`` (a duplicate then) or with keyed documents."""
    give_up = time.monotonic() + 30
    while True:
        try:
            with Client(target) as c:
                return c.publish(topic, docs, **options)
        except SowdbError as exc:
            if exc.code != grpc.StatusCode.UNAVAILABLE or time.monotonic() > give_up:
                raise
            time.sleep(0.05)


def sync_record(etcd_url: str, name: str = "t") -> SyncRecord | None:
    """The cluster's sync set as etcd holds it (``/sowdb/NAME/sync``; None: never written)."""

    async def read() -> SyncRecord | None:
        client = Etcd([etcd_url], 5.0)
        try:
            found = await client.get(f"/sowdb/{name}/sync".encode())
        finally:
            await client.close()
        return SyncRecord.decode(found.value) if found is not None else None

    return asyncio.run(read())
