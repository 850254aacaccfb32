"""Replication and high availability (SPEC §13): the election of the primary through etcd.

:mod:`sowdb.cluster.etcd` is the narrow interface over etcd; :mod:`sowdb.cluster.election` the
HA loop (HA-1's fencing, HA-4's failover and switchover). Journal shipping and the replica's
apply come next; docs/cluster-design.md holds the design and the decisions taken for them.
"""

from sowdb.cluster.election import Election, ElectionEvent, Leader, NotLeader, SwitchoverFailed
from sowdb.cluster.etcd import Etcd, EtcdUnavailable

__all__ = ["Election", "ElectionEvent", "Etcd", "EtcdUnavailable", "Leader", "NotLeader", "SwitchoverFailed"]
