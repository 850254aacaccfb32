"""J-4 across a failover (SPEC §13): an idempotent producer's state is shipped with the entries
its batches wrote, so a producer that retries on the new primary a request the old one had
acknowledged under ``sync`` is told it is a duplicate, and nothing is applied twice."""

from __future__ import annotations

from sowdb_client import Client
from tests.cluster.support import TTL, Cluster, publish_acknowledged, until


def test_a_producers_retry_after_a_kill_9_failover_is_a_duplicate(cluster: Cluster) -> None:
    for name in ("n1", "n2", "n3"):
        cluster.start(name)
    old = cluster.primary()
    survivors = [n for n in cluster.nodes if n != old]
    orders = [{"id": i} for i in range(30)]
    # three requests, sequences 5, 6, 7; ack = sync
    ack = publish_acknowledged(
        cluster.nodes[old].target, "orders", orders, producer_id="feed", producer_seq=5, batch_size=10
    )
    assert (ack.count, ack.duplicates, ack.last_bookmark) == (30, 0, 30)
    cluster.nodes[old].kill()

    new = cluster.primary(survivors, within=TTL + 10)
    until(lambda: all(cluster.own(n).applied_bookmark == 30 for n in survivors))
    with Client(cluster.nodes[new].target) as c:
        retry = c.publish("orders", orders, producer_id="feed", producer_seq=5, batch_size=10)
        assert (retry.count, retry.duplicates, retry.first_bookmark) == (30, 30, 0)  # applied once
        assert cluster.own(new).applied_bookmark == 30
        nxt = c.publish("orders", [{"id": 99}], producer_id="feed", producer_seq=8)
        assert (nxt.duplicates, nxt.first_bookmark) == (0, 31)
        assert sorted(r.json()["id"] for r in c.sow("orders").records()) == [*range(30), 99]
    other = next(n for n in survivors if n != new)  # the other replica holds the state too
    until(lambda: cluster.own(other).applied_bookmark == 31)
