"""A cluster of real ``sowd`` processes on one etcd (SPEC §13; secured, as
:func:`sowdb.testing.etcd.start_etcd` starts it by default), as plain code: the one harness
of the cluster's tests, the failover soak (``tools/soak/failover_soak.py``) and ``make
bench-replication``, so that a cluster is started, asked and checked one way everywhere.

:class:`Cluster` writes the nodes' shared config (the topics, ``[cluster]`` with the ``ack``,
``lease_ttl`` and ``[server]`` lines chosen), starts nodes ``n1``, ``n2``, ... on free ports under
one directory, asks them ``ClusterStatus``, and shows what each printed when something fails.
:func:`fingerprint` says whether stopped nodes hold the same journal and state.
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import grpc

from sowdb import testing
from sowdb.auth import hash_token
from sowdb.storage import Store
from sowdb.testing.etcd import EtcdServer
from sowdb.testing.pki import Certs
from sowdb_api.v1 import admin_pb2, admin_pb2_grpc

TTL = 2
"""Seconds: etcd's shortest lease, so that tests stay quick."""

TOPICS = """
[[topic]]
name = "orders"
key = ["/id"]
"""


def config_text(etcd: EtcdServer, ack: str = "sync", ttl: int = TTL, server: str = "") -> str:
    """The nodes' shared config: the topics, ``[cluster]`` (reaching ``etcd`` as it asks: with
    its CA and the nodes' client certificate when it is secured), and ``server`` as the lines of
    a ``[server]`` section."""
    section = f"[server]\n{server}\n" if server else ""
    return f"""{section}{TOPICS}
[cluster]
name = "t"
{etcd.settings()}ack = "{ack}"
sync_replicas = 1
lease_ttl = "{ttl}s"
"""


def node_config(directory: Path, etcd: EtcdServer, ack: str = "sync", ttl: int = TTL, server: str = "") -> Path:
    """``directory/node.toml``, the nodes' config (and ``alone.toml``, the same topics without
    ``[cluster]``)."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "alone.toml").write_text(TOPICS)
    path = directory / "node.toml"
    path.write_text(config_text(etcd, ack, ttl, server))
    return path


def secure_config(config: Path, certs: Certs, token: str, *, ca: str = "ca.pem", node_certs: bool = False) -> None:
    """Add TLS (a server certificate the test CA signed), a users file with one admin user of
    ``token`` beside ``config``, and ``certs[ca]`` as ``[cluster] ca`` to a node's config;
    with ``node_certs``, each node's own certificate (``certs.node(NAME)``, made by
    :meth:`Cluster.start`) as ``[cluster] cert`` and ``key``."""
    users = config.parent / "users.toml"
    users.write_text(f'[[user]]\nname = "repl"\ntoken_sha256 = "{hash_token(token)}"\nroles = ["ops"]\n')
    lines = f'ca = "{certs[ca]}"'
    if node_certs:
        lines += f'\ncert = "{certs.dir}/{{node}}.pem"\nkey = "{certs.dir}/{{node}}.key"'
    text = re.sub(r'(?m)^(lease_ttl = "\d+s")$', lambda m: f"{m[1]}\n{lines}", config.read_text(), count=1)
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
"""Every :class:`Cluster` made (a test's fixture shows their nodes' output when it fails)."""


class Cluster:
    """Nodes on one etcd, each under ``directory/NAME``, sharing ``directory/node.toml``."""

    def __init__(self, directory: Path, etcd: EtcdServer, ack: str = "sync", ttl: int = TTL, server: str = "") -> None:
        self.tmp_path = directory
        self.ttl = ttl
        self.etcd = etcd
        self.config = node_config(directory, etcd, ack, ttl, server)
        self.channel: Callable[[str], grpc.Channel] = grpc.insecure_channel
        """How a node is dialled (TLS once :meth:`secure` ran)."""
        self.metadata: tuple[tuple[str, str], ...] = ()
        """What raw calls carry (the token once :meth:`secure` ran)."""
        self.env: dict[str, str] | None = None  # the nodes' environment (None: this process's)
        self.certs: Certs | None = None  # the PKI of the nodes' certificates (None: they have none)
        self.nodes: dict[str, testing.Sowd] = {}
        self.started: list[tuple[str, testing.Sowd]] = []
        """Every start of a node, in order (a restart replaces it in :attr:`nodes`, not here)."""
        CREATED.append(self)

    def secure(self, certs: Certs, token: str, *, ca: str = "ca.pem", node_certs: bool = True) -> None:
        """Secure the nodes not started yet: TLS with the certificate ``certs`` made, an admin
        user of ``token``, and ``certs[ca]`` as ``[cluster] ca``; raw calls go over TLS with the
        token. With ``node_certs`` each node has its own certificate (``certs.node(NAME)``) and
        the nodes replicate over mutual TLS with no token; without, as before issue 40, they
        follow with the token (``SOWDB_CLUSTER_TOKEN``)."""
        secure_config(self.config, certs, token, ca=ca, node_certs=node_certs)
        credentials = grpc.ssl_channel_credentials(Path(certs["ca.pem"]).read_bytes())
        self.channel = lambda target: grpc.secure_channel(target, credentials)
        self.metadata = (("authorization", f"Bearer {token}"),)
        self.certs = certs if node_certs else None
        if not node_certs:
            self.env = {**os.environ, "SOWDB_CLUSTER_TOKEN": token}

    def start(self, name: str, *flags: str, config: Path | None = None) -> testing.Sowd:
        """Start node ``name`` (again, after a stop: on its data), advertising where it serves
        unless ``flags`` say otherwise (``--listen``, ``--advertise``, ``--http-listen``, ...)."""
        if self.certs is not None:
            self.certs.node(name)
        sowd = testing.start(
            self.tmp_path / name,
            "--node",
            name,
            "--advertise",
            "127.0.0.1:0",
            *flags,
            config=config or self.config,
            env=self.env,
        )
        self.nodes[name] = sowd
        self.started.append((name, sowd))
        return sowd

    def outputs(self, lines: int = 60) -> str:
        """The last ``lines`` lines of every start of every node: what a failure shows, so that a
        step-down or a fork on a loaded machine says itself."""
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
        """``ClusterStatus`` of node ``name``: itself first, then (a primary) its followers."""
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
        """Node ``name``'s own row (role ``down`` when it does not answer)."""
        try:
            return self.status(name)[0]
        except grpc.RpcError:
            return admin_pb2.ClusterNode(node=name, role="down")

    def stop(self) -> None:
        for sowd in self.nodes.values():
            sowd.stop()


@contextmanager
def nodes(directory: Path, etcd: EtcdServer, ack: str = "sync", ttl: int = TTL, server: str = "") -> Iterator[Cluster]:
    """A :class:`Cluster` (no node started yet), every node stopped on leaving."""
    c = Cluster(directory, etcd, ack, ttl, server)
    try:
        yield c
    finally:
        c.stop()


def until(probe: Callable[[], object], within: float = 20.0) -> object:
    """``probe()`` once it is true, polled every 50 ms; AssertionError after ``within`` s."""
    give_up = time.monotonic() + within
    while not (found := probe()):
        if time.monotonic() > give_up:
            raise AssertionError(f"not reached within {within}s")
        time.sleep(0.05)
    return found


def cluster_status(target: str, timeout: float = 5) -> list[admin_pb2.ClusterNode]:
    """``ClusterStatus`` of the node at ``target`` (plaintext, no token)."""
    with grpc.insecure_channel(target) as channel:
        reply = admin_pb2_grpc.AdminServiceStub(channel).ClusterStatus(
            admin_pb2.ClusterStatusRequest(), timeout=timeout
        )
    return list(reply.nodes)


def journal(data_dir: Path) -> list[tuple[int, int, int, str, str, bytes]]:
    """A stopped node's journal: (bookmark, timestamp, operation, topic, SowKey, data) each."""
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


def fingerprint(data_dir: Path) -> tuple[int, str]:
    """(last bookmark, SHA-256 of the journal, ``current`` and producer state) of a stopped
    node: two nodes that hold the same entries and the same state have the same pair."""
    last, current, producers = digest(data_dir)
    return last, hashlib.sha256(repr((journal(data_dir), current, sorted(producers.items()))).encode()).hexdigest()
