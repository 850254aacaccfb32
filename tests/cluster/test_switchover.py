"""``sowd switchover`` (SPEC §13, HA-4) under ``sync`` publishing load: the primary hands its role
to its most advanced replica (or the one named by ``--to``) with nothing lost and nothing applied
twice, the epoch rises, and the old primary follows the new one.

The load retries a request that was not acknowledged (the fenced primary answers UNAVAILABLE, a
replica FAILED_PRECONDITION) with the same J-4 producer id and sequence, at whichever node says
it is the primary: a request applied before the hand-over is then a duplicate, not a second
write, so every id is in the final journal exactly once."""

from __future__ import annotations

import re
import threading
import time
from collections import Counter

import orjson
import pytest

from sowdb import testing
from sowdb_client import Client, SowdbError
from tests.cluster.support import Cluster, journal, until


class Load:
    """Writers publishing 10 ids a request, each its own producer, retrying on refusal."""

    def __init__(self, cluster: Cluster, writers: int = 3) -> None:
        self.cluster = cluster
        self.acknowledged: list[int] = []
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._write, args=(w,)) for w in range(writers)]
        for t in self.threads:
            t.start()

    def _write(self, w: int) -> None:
        seq, base = 1, w * 1_000_000
        while not self.stop.is_set():
            ids = list(range(base + seq * 10, base + seq * 10 + 10))
            while True:  # the same request until it is acknowledged
                try:
                    with Client(self.cluster.nodes[self.cluster.primary()].target) as c:
                        c.publish("orders", [{"id": i} for i in ids], producer_id=f"w{w}", producer_seq=seq)
                    break
                except SowdbError:
                    if self.stop.is_set():
                        return  # never acknowledged: not counted
                    time.sleep(0.05)  # refused: look for the primary again
            self.acknowledged.extend(ids)
            seq += 1

    def finish(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=60)


@pytest.mark.parametrize("to", ["", "n3"])
def test_a_switchover_under_sync_load_loses_nothing_and_applies_nothing_twice(cluster: Cluster, to: str) -> None:
    for name in ("n1", "n2", "n3"):
        cluster.start(name)
    old = cluster.primary()
    until(lambda: len(cluster.status(old)) == 3)  # both replicas follow
    before = cluster.own(old).epoch
    if not to:  # asked of a replica, or for a node that does not follow: refused, nothing changes
        replica = next(n for n in cluster.nodes if n != old)
        refused = testing.run("switchover", "--server", cluster.nodes[replica].target)
        assert refused.returncode == 1
        assert "FAILED_PRECONDITION" in refused.stderr
        assert cluster.nodes[old].target in refused.stderr
        refused = testing.run("switchover", "--server", cluster.nodes[old].target, "--to", "n9")
        assert refused.returncode == 1
        assert "node n9 does not follow the primary" in refused.stderr
        assert cluster.own(old).epoch == before
    load = Load(cluster)
    try:
        until(lambda: len(load.acknowledged) >= 300)
        args = ["--to", to] if to else []
        done = testing.run("switchover", "--server", cluster.nodes[old].target, *args, timeout=120)
        assert done.returncode == 0, done.stderr
        found = re.search(r"(n\d) is the primary at epoch (\d+) \(was epoch (\d+)\)", done.stdout)
        assert found, done.stdout
        new, epoch = found[1], int(found[2])
        assert new != old
        assert not to or new == to
        assert int(found[3]) == before < epoch
        assert cluster.primary() == new
        assert cluster.own(new).epoch == epoch
        acked = len(load.acknowledged)
        until(lambda: len(load.acknowledged) >= acked + 300)  # the load goes on at the new primary
    finally:
        load.finish()
    with Client(cluster.nodes[new].target) as c:
        held = {r.json()["id"] for r in c.sow("orders").records()}
        last = c.publish("orders", [{"id": -1}]).last_bookmark
    assert not set(load.acknowledged) - held, "acknowledged writes lost in the switchover"
    until(lambda: cluster.own(old).role == "replica" and cluster.own(old).applied_bookmark == last)
    assert cluster.own(old).epoch == epoch  # the old primary follows the new one
    cluster.stop()
    published = Counter(orjson.loads(e[5])["id"] for e in journal(cluster.tmp_path / new) if e[2] == 1)
    assert [i for i, n in published.items() if n > 1] == [], "ids applied twice"
    assert journal(cluster.tmp_path / old) == journal(cluster.tmp_path / new)
