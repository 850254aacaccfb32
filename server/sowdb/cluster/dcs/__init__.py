"""The one door to etcd (SPEC §13; Patroni's ``dcs/``): every key the cluster keeps, and one
snapshot of them per cycle.

etcd holds, under ``/sowdb/NAME/``:

- ``leader``: ``{node, advertise, peer}`` under the primary's lease, created only if absent;
  its ``create_revision`` is the **epoch**; ``peer`` is its peer port (with node certificates);
- ``members/NODE``: ``{node, advertise, peer, eligible}`` under the node's lease (what a
  switchover waits on; a follower that is not a member never counts for ``sync``);
- ``applied/NODE``: the node's applied bookmark, under its lease (what eligibility compares);
- ``sync``: ``{epoch, leader, nodes}``, the sync set (HA-3), no lease, written only while the
  writer's leader key is the one of that epoch;
- ``switchover``: ``{to, epoch}``, a switchover under way, under the primary's lease.

The HA loop (:mod:`sowdb.cluster.election`) reads them all at once each round
(:meth:`Dcs.snapshot`, one linearizable range read) and decides over that one
:class:`ClusterView`: who leads, whether this node is eligible, whether a switchover names
another node. Nothing else in the cluster reads or writes etcd but through :class:`Dcs`.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field

from sowdb.cluster.dcs.etcd import Etcd, EtcdRefused, EtcdUnavailable, KeyValue
from sowdb.config.cluster import ClusterConfig

__all__ = [
    "ClusterView",
    "Dcs",
    "Etcd",
    "EtcdRefused",
    "EtcdUnavailable",
    "KeyValue",
    "Leader",
    "SyncRecord",
    "check_access",
]

log = logging.getLogger("sowdb.cluster")


@dataclass(frozen=True)
class Leader:
    """Who holds the leader key, as last read from etcd."""

    node: str
    advertise: str
    epoch: int
    peer: str = ""
    """Its peer port (node certificates), empty when it serves replication on ``advertise``."""


@dataclass(frozen=True)
class SyncRecord:
    """``/sowdb/NAME/sync`` as etcd holds it."""

    epoch: int
    leader: str
    nodes: tuple[str, ...]

    def encode(self) -> bytes:
        return json.dumps({"epoch": self.epoch, "leader": self.leader, "nodes": list(self.nodes)}).encode()

    @staticmethod
    def decode(value: bytes) -> SyncRecord:
        raw = json.loads(value)
        return SyncRecord(int(raw["epoch"]), str(raw.get("leader", "")), tuple(str(n) for n in raw["nodes"]))


@dataclass(frozen=True)
class ClusterView:
    """The cluster as one read of etcd found it (the snapshot one HA round decides over)."""

    leader: Leader | None = None
    leader_lease: int = 0
    """The lease the leader key lives under (this node's own: a key it created)."""
    eligible: dict[str, bool] = field(default_factory=dict)
    """Each live member's eligibility, as its member record says (its keys: the members)."""
    applied: dict[str, int] = field(default_factory=dict)
    """Each live node's applied bookmark."""
    sync: SyncRecord | None = None
    sync_revision: int = 0
    """The sync key's mod_revision (0: absent): the leader key is created only if unchanged."""
    switchover_to: str = ""
    """The target of a switchover under way (empty: none)."""


class Dcs:
    """One node's door to etcd: its keys, the snapshot, and the guarded writes."""

    def __init__(self, cluster: ClusterConfig, etcd: Etcd | None = None) -> None:
        self.cluster = cluster
        self.etcd = etcd or Etcd(cluster.etcd, cluster.retry_timeout_s, cluster.etcd_access)
        prefix = cluster.prefix
        self.prefix = prefix.encode()
        self.leader_key = f"{prefix}leader".encode()
        self.sync_key = f"{prefix}sync".encode()
        self.switchover_key = f"{prefix}switchover".encode()

    def member_key(self, node: str) -> bytes:
        return f"{self.cluster.prefix}members/{node}".encode()

    def applied_key(self, node: str) -> bytes:
        return f"{self.cluster.prefix}applied/{node}".encode()

    async def close(self) -> None:
        await self.etcd.close()

    # --- reads ------------------------------------------------------------------------------

    async def snapshot(self) -> ClusterView:
        """Every key of the cluster in one linearizable read."""
        leader, lease, sync, sync_revision, switchover_to = None, 0, None, 0, ""
        eligible: dict[str, bool] = {}
        applied: dict[str, int] = {}
        for key, kv in await self.etcd.get_prefix(self.prefix):
            name = key[len(self.prefix) :].decode()
            if key == self.leader_key:
                record = json.loads(kv.value)
                peer = str(record.get("peer", ""))
                leader = Leader(str(record["node"]), str(record["advertise"]), kv.create_revision, peer)
                lease = kv.lease
            elif key == self.sync_key:
                sync, sync_revision = SyncRecord.decode(kv.value), kv.mod_revision
            elif key == self.switchover_key:
                switchover_to = str(json.loads(kv.value).get("to", ""))
            elif name.startswith("members/"):
                eligible[name[len("members/") :]] = bool(json.loads(kv.value).get("eligible"))
            elif name.startswith("applied/"):
                applied[name[len("applied/") :]] = int(kv.value)
        return ClusterView(leader, lease, eligible, applied, sync, sync_revision, switchover_to)

    async def leader(self) -> KeyValue | None:
        """The leader key alone (a switchover waiting for the target to take it; the keeper)."""
        return await self.etcd.get(self.leader_key)

    async def is_member(self, node: str) -> bool:
        """Whether etcd holds a member record of ``node`` (under its lease: it takes part)."""
        return await self.etcd.get(self.member_key(node)) is not None

    async def member_eligible(self, node: str) -> bool:
        found = await self.etcd.get(self.member_key(node))
        return found is not None and bool(json.loads(found.value).get("eligible"))

    # --- the session ------------------------------------------------------------------------

    async def grant(self, ttl: int) -> tuple[int, int]:
        return await self.etcd.grant(ttl)

    async def refresh(self, lease: int) -> int:
        return await self.etcd.refresh(lease)

    async def revoke(self, lease: int) -> None:
        await self.etcd.revoke(lease)

    async def publish_applied(self, bookmark: int, lease: int) -> None:
        await self.etcd.put(self.applied_key(self.cluster.node), str(bookmark).encode(), lease)

    async def publish_member(self, eligible: bool, lease: int) -> None:
        record = {"node": self.cluster.node, "advertise": self.cluster.advertise, "eligible": eligible}
        if self.cluster.peer:
            record["peer"] = self.cluster.peer
        await self.etcd.put(self.member_key(self.cluster.node), json.dumps(record).encode(), lease)

    # --- the leader key ---------------------------------------------------------------------

    async def take_leader(self, lease: int, sync_revision: int) -> tuple[bool, KeyValue | None]:
        """Create the leader key under ``lease`` if absent and the sync set is still the one
        eligibility was judged by (:meth:`Etcd.create`)."""
        me = {"node": self.cluster.node, "advertise": self.cluster.advertise}
        record = json.dumps({**me, "peer": self.cluster.peer} if self.cluster.peer else me).encode()
        return await self.etcd.create(self.leader_key, record, lease, (self.sync_key, sync_revision))

    async def release_leader(self, epoch: int) -> bool:
        """Delete the leader key only if it is still the one of ``epoch``."""
        return await self.etcd.delete_if(self.leader_key, epoch)

    async def write_sync(self, record: SyncRecord) -> bool:
        """Write the sync set, only while the leader key is still the one of ``record.epoch``."""
        return await self.etcd.put_if(self.sync_key, record.encode(), self.leader_key, record.epoch)

    async def announce_switchover(self, to: str, epoch: int, lease: int) -> None:
        await self.etcd.put(self.switchover_key, json.dumps({"to": to, "epoch": epoch}).encode(), lease)

    async def clear_switchover(self) -> None:
        intent = await self.etcd.get(self.switchover_key)
        if intent is not None:
            await self.etcd.delete_if(self.switchover_key, intent.create_revision)


async def check_access(cluster: ClusterConfig) -> None:
    """At a node's start: warn loudly when etcd is reached without credentials, and refuse to
    start when etcd refuses the node's (a CA or a certificate that does not match, a wrong
    password, a user without rights on the cluster's keys): a node that cannot ever take part
    in the election had better say so at once than serve as a replica of nobody. An etcd that
    does not answer is no reason not to start (the election waits for it).

    Raises:
        PermissionError: etcd refused this node, with etcd's words and the settings to check.
    """
    access, name = cluster.etcd_access, cluster.name
    if not access.tls:
        log.warning(
            "cluster %s: SECURITY RISK: etcd is reached over plain http:// (%s) with no authentication: "
            "anyone who can reach etcd owns this cluster (one write of the leader key and every node follows "
            "whoever wrote it); use https:// with etcd_ca and etcd_cert/etcd_key or etcd_user (docs/security.md)",
            name,
            ", ".join(cluster.etcd),
        )
    elif not access.authenticated:
        log.warning(
            "cluster %s: SECURITY RISK: no etcd_cert and no etcd_user: unless etcd itself refuses "
            "unauthenticated clients, anyone who can reach etcd owns this cluster (docs/security.md)",
            name,
        )
    etcd = Etcd(cluster.etcd, cluster.retry_timeout_s, access)
    try:
        await etcd.get_prefix(cluster.prefix.encode())
    except EtcdRefused as exc:
        raise PermissionError(
            f"{exc} (check [cluster] etcd_ca, etcd_cert, etcd_key, etcd_user, etcd_password_file, "
            f"and that the etcd user may read and write {cluster.prefix})"
        ) from None
    except EtcdUnavailable as exc:
        log.warning("cluster %s: etcd does not answer yet (%s); the node waits for it", name, exc)
    finally:
        await etcd.close()
