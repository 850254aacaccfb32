"""Replication and high availability (SPEC §13), cut along Patroni's seams.

- :mod:`sowdb.cluster.dcs`: the one door to etcd (and :mod:`sowdb.cluster.dcs.etcd`, the client);
- :mod:`sowdb.cluster.election`: the HA loop, one decision per round over one snapshot (HA-1's
  fencing, HA-4's failover and switchover), :mod:`sowdb.cluster.keepalive` its lease thread;
- :mod:`sowdb.cluster.commit`: the committed point; :mod:`sowdb.cluster.syncset`: the sync set;
- :mod:`sowdb.cluster.shipping` and :mod:`sowdb.cluster.follower`: journal shipping, each side;
  :mod:`sowdb.cluster.fork` and :mod:`sowdb.cluster.catchup`: a forked or a far-behind replica;
- :mod:`sowdb.cluster.node`: one node, holding them together.

docs/cluster-design.md holds the design and the decisions taken.
"""

from sowdb.cluster.dcs import Dcs, Etcd, EtcdUnavailable, Leader
from sowdb.cluster.election import Election, ElectionEvent, NotLeader, SwitchoverFailed

__all__ = ["Dcs", "Election", "ElectionEvent", "Etcd", "EtcdUnavailable", "Leader", "NotLeader", "SwitchoverFailed"]
