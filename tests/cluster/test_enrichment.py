"""EN-2 in a cluster: a replica stores what the primary's journal holds, the enriched record,
and never evaluates an enrichment itself. The replica is started with another enrichment than
the primary's; every record it holds still carries the primary's."""

from __future__ import annotations

from sowdb_client import Client
from tests.cluster.support import Cluster, until

ENRICHED = """
[[topic]]
name = "orders"
key = ["/id"]
enrichment = ["IF(/qty < 0, /qty OF PREVIOUS, /qty) AS /qty", "'{node}' AS /enriched_by"]
"""


def test_a_replica_holds_the_primarys_enriched_records_without_evaluating_them(cluster: Cluster) -> None:
    plain = cluster.config.read_text()
    topics = plain.split("[cluster]", 1)
    cluster.config.write_text(ENRICHED.format(node="n1") + "\n[cluster]" + topics[1])
    cluster.start("n1")
    assert cluster.primary() == "n1"
    cluster.config.write_text(ENRICHED.format(node="n2") + "\n[cluster]" + topics[1])  # the replica's own config
    cluster.start("n2")
    until(lambda: len(cluster.status("n1")) == 2)
    with Client(cluster.nodes["n1"].target) as c:
        c.publish("orders", [{"id": 1, "qty": 5}])
        c.publish("orders", [{"id": 1, "qty": -1}])
        last = c.publish("orders", [{"id": 2, "qty": 7}]).last_bookmark
        primary = {r.sow_key: r.json() for r in c.sow("orders").records()}
    assert primary == {"1": {"id": 1, "qty": 5, "enriched_by": "n1"}, "2": {"id": 2, "qty": 7, "enriched_by": "n1"}}
    until(lambda: cluster.own("n2").applied_bookmark >= last)
    with Client(cluster.nodes["n2"].target) as r:
        assert {x.sow_key: x.json() for x in r.sow("orders").records()} == primary
