"""The cluster part of the config (SPEC §13): the ``[cluster]`` table and its timing.

Without ``[cluster]`` a server runs alone, as before (``Config.cluster`` is None). With it, the
node takes part in the election of HA-1 through etcd. Only ``lease_ttl`` is configured; the
election's loop period and its etcd call budget are derived from it, Patroni-style, so that the
one rule that keeps a primary fenced holds by construction: ``loop_wait + 2 * retry_timeout ≤
ttl`` (a leader whose refresh failed once still gets a second try before its lease can lapse).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from sowdb.config.etcd import ETCD_KEYS, EtcdAccess, read_etcd
from sowdb.config.model import Config, ConfigError, parse_duration, parse_listen

ACK_MODES = ("async", "sync", "sync_strict")
# etcd refuses (raises to its minimum) a lease shorter than 1.5 times its election timeout; with
# etcd's defaults (100 ms heartbeat, 1 s election) that rounds to 2 s.
MIN_LEASE_TTL_S = 2.0
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")

Fail = Callable[[str, str], ConfigError]


@dataclass(frozen=True)
class ClusterConfig:
    """``[cluster]``: which cluster, which node, how to reach it and etcd, and how to acknowledge.

    ``node`` and ``advertise`` may come from ``--node`` / ``--advertise`` instead of the file;
    :func:`with_cluster_overrides` applies them and insists that both end up set.
    """

    name: str
    node: str = ""
    advertise: str = ""
    etcd: tuple[str, ...] = ("http://127.0.0.1:2379",)
    ack: str = "sync"
    sync_replicas: int = 1
    lease_ttl_s: float = 5.0
    ca: str = ""
    """The CA that signed the nodes' certificates, which a replica trusts when it dials its
    primary (empty: the node's own ``[security] tls_cert``, a self-signed certificate that the
    nodes share)."""
    etcd_access: EtcdAccess = field(default_factory=EtcdAccess)
    """The credentials shown to etcd (:mod:`sowdb.config.etcd`; none: plain ``http://``)."""
    cert: str = ""
    """This node's certificate (with ``key``): its identity to the other nodes. It names the
    node by a DNS subjectAltName equal to its node name; with it, the nodes replicate over
    mutual TLS on the peer port, and no token crosses the wire (empty: as before, over the
    client port with ``SOWDB_CLUSTER_TOKEN``; a warning at start-up). ``{node}`` in the path
    stands for the node's name, so that the nodes can share one config."""
    key: str = ""
    peer_listen: str = ""
    """Where the peer port listens, HOST:PORT (with ``cert``; empty: the ``[server] listen``
    host, on any free port: the port is advertised in etcd)."""
    peer: str = ""
    """The peer port's address as the other nodes dial it (set at start: the advertised host
    and the bound port; empty without ``cert``)."""

    @property
    def node_certs(self) -> bool:
        """The nodes prove who they are with certificates (``cert`` and ``key`` set)."""
        return bool(self.cert)

    @property
    def loop_wait_s(self) -> float:
        """The election loop's period: a third of the lease (Patroni's 10 s of 30 s)."""
        return self.lease_ttl_s / 3

    @property
    def retry_timeout_s(self) -> float:
        """What one round of etcd calls (retries included) may take: also a third of the lease."""
        return self.lease_ttl_s / 3

    @property
    def margin_s(self) -> float:
        """How long before its lease can lapse a primary stops acknowledging (HA-1): a tenth of
        the lease covers the drift between this node's monotonic clock and etcd's."""
        return self.lease_ttl_s / 10

    @property
    def prefix(self) -> str:
        """The etcd keys of this cluster live under ``/sowdb/NAME/``."""
        return f"/sowdb/{self.name}/"


def read_cluster(raw: dict[str, Any], fail: Fail, base: Path | None = None) -> ClusterConfig | None:
    """The ``[cluster]`` table of a config file; None when there is none (a lone server).

    Raises:
        ConfigError: an invalid entry, named with the problem.
    """
    if "cluster" not in raw:
        return None
    t = raw["cluster"]
    entry = "[cluster]"
    if not isinstance(t, dict):
        raise fail(entry, "expected a table")
    allowed = {"name", "node", "advertise", "etcd", "ack", "sync_replicas", "lease_ttl", "ca", *ETCD_KEYS, *_NODE_TLS}
    unknown = sorted(set(t) - allowed)
    if unknown:
        raise fail(entry, f"unknown setting {unknown[0]!r} (allowed: {', '.join(sorted(allowed))})")
    name = t.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise fail(entry, f"name: required, letters, digits, '_', '.' or '-' (an etcd key part), got {name!r}")
    node = t.get("node", "")
    if not isinstance(node, str) or (node and not _NAME.match(node)):
        raise fail(entry, f"node: letters, digits, '_', '.' or '-', got {node!r}")
    advertise = t.get("advertise", "")
    if not isinstance(advertise, str) or (advertise and not _is_address(advertise)):
        raise fail(entry, f"advertise: {advertise!r} is not HOST:PORT (what clients and replicas dial)")
    etcd, access = read_etcd(t, fail, base)
    ack = t.get("ack", "sync")
    if ack not in ACK_MODES:
        raise fail(entry, f"ack: {ack!r} is not one of {', '.join(ACK_MODES)}")
    sync_replicas = t.get("sync_replicas", 1)
    if not isinstance(sync_replicas, int) or isinstance(sync_replicas, bool) or sync_replicas < 1:
        raise fail(entry, f"sync_replicas: an integer of at least 1, got {sync_replicas!r}")
    try:
        ttl = parse_duration(t.get("lease_ttl", "5s"))
    except ValueError as exc:
        raise fail(entry, f"lease_ttl: {exc}") from None
    if ttl < MIN_LEASE_TTL_S or ttl != int(ttl):
        raise fail(entry, f"lease_ttl: whole seconds, at least 2s (etcd's shortest lease), got {t['lease_ttl']!r}")
    ca = t.get("ca", "")
    if not isinstance(ca, str):
        raise fail(entry, f"ca: the path of a PEM file, got {ca!r}")
    if ca:
        path = ((base or Path.cwd()) / ca).resolve()
        if not path.is_file():
            raise fail(entry, f"ca: {path} does not exist (the CA that signed the nodes' certificates)")
        ca = str(path)
    cert, key, peer_listen = _node_tls(t, entry, fail, base, ca)
    cluster = ClusterConfig(name, node, advertise, etcd, ack, sync_replicas, ttl, ca, access, cert, key, peer_listen)
    if cluster.loop_wait_s + 2 * cluster.retry_timeout_s > ttl + 1e-9:  # holds by construction; kept honest
        raise fail(entry, "lease_ttl: loop_wait + 2 * retry_timeout must not exceed it")
    return cluster


_NODE_TLS = ("cert", "key", "peer_listen")


def _node_tls(t: dict[str, Any], entry: str, fail: Fail, base: Path | None, ca: str) -> tuple[str, str, str]:
    """``cert``, ``key`` (paths made absolute; checked once ``{node}`` in them is known) and
    ``peer_listen``: a node certificate needs its key and the CA that signed the others'."""
    found: list[str] = []
    for name in ("cert", "key"):
        value = t.get(name, "")
        if not isinstance(value, str):
            raise fail(entry, f"{name}: the path of a PEM file, got {value!r}")
        if value:
            path = ((base or Path.cwd()) / value).resolve()
            if "{node}" not in value and not path.is_file():
                raise fail(entry, f"{name}: {path} does not exist (this node's certificate and its key)")
            value = str(path)
        found.append(value)
    cert, key = found
    if bool(cert) != bool(key):
        raise fail(entry, "cert and key go together (this node's certificate and its private key)")
    if cert and not ca:
        raise fail(entry, "cert: needs ca, the CA that signed the nodes' certificates (whom a node trusts)")
    peer_listen = t.get("peer_listen", "")
    if not isinstance(peer_listen, str) or (peer_listen and not _is_address(peer_listen)):
        raise fail(entry, f"peer_listen: {peer_listen!r} is not HOST:PORT (where the nodes' peer port listens)")
    if peer_listen and not cert:
        raise fail(entry, "peer_listen: the peer port serves node certificates: give cert and key")
    return cert, key, peer_listen


def with_cluster_overrides(config: Config, *, node: str | None, advertise: str | None, serving: bool = True) -> Config:
    """The config with ``--node`` / ``--advertise`` applied.

    Args:
        serving: the node is to serve, so it needs its name and address; the commands that
            work on a stopped node's store (``sowd verify``, ``rebuild``, ``repair``) or call a
            running one (``checkpoint``, ``switchover``) take the cluster's shared config as it is.

    Raises:
        ConfigError: a flag without a ``[cluster]`` section, a bad value, or a serving cluster
            node whose node or advertised address is set neither in the file nor by a flag.
    """
    cluster = config.cluster
    if cluster is None:
        if node or advertise:
            raise ConfigError(f"{config.source}: --node and --advertise need a [cluster] section")
        return config
    if node:
        if not _NAME.match(node):
            raise ConfigError(f"--node: letters, digits, '_', '.' or '-', got {node!r}")
        cluster = replace(cluster, node=node)
    if advertise:
        if not _is_address(advertise):
            raise ConfigError(f"--advertise: {advertise!r} is not HOST:PORT")
        cluster = replace(cluster, advertise=advertise)
    for key in ("node", "advertise"):
        if serving and not getattr(cluster, key):
            raise ConfigError(f"{config.source}: [cluster]: {key}: required (in the file or as --{key})")
    if serving and cluster.cert:  # the node's own certificate, once its name is known
        cert, key = (path.replace("{node}", cluster.node) for path in (cluster.cert, cluster.key))
        for name, path in (("cert", cert), ("key", key)):
            if not Path(path).is_file():
                raise ConfigError(f"{config.source}: [cluster]: {name}: {path} does not exist (node {cluster.node})")
        cluster = replace(cluster, cert=cert, key=key)
    return replace(config, cluster=cluster)


def _is_address(text: str) -> bool:
    """HOST:PORT; port 0 stands for the port the server binds (tests listen on port 0)."""
    try:
        parse_listen(text)
    except ValueError:
        return False
    return True
