"""Recovery from a poisoned epoch (issue 40, part 4): a replica that once applied a forged
record at an epoch etcd never granted (10⁹, as the issue's probe left in every journal) has
it cut out with ``sowd cut-epoch``, and the cluster goes back to one primary with its
replicas following. Real etcd and ``sowd`` processes; the poison is written into the stopped
replica's store through its engine's replication port, as a follower applies a frame."""

from __future__ import annotations

import json
import time
from dataclasses import replace

from sowdb import testing
from sowdb.config import load_config
from sowdb.engine import Engine
from sowdb.engine.replication import EpochStart, JournalEntry
from sowdb.storage import Store
from sowdb.storage.epochs import epoch_history
from sowdb.storage.keys import OP_PUBLISH
from sowdb_client import Client
from tests.cluster.support import Cluster, journal, until

FORGED_EPOCH = 10**9


def poison(cluster: Cluster, name: str) -> int:
    """Append a forged record at epoch 10⁹ to stopped node ``name``'s journal (with its
    epoch record, as adopting the forger's history did); returns its bookmark."""
    data = cluster.tmp_path / name
    config = load_config(cluster.config)
    config = replace(config, server=replace(config.server, data_dir=str(data)))
    engine = Engine.open(config, Store(data))
    try:
        port = engine.replication
        at = port.last_seq + 1
        port.adopt_epoch_history([*port.epoch_history(), EpochStart(FORGED_EPOCH, at, "evil")])
        entry = JournalEntry(at, int(time.time() * 1e6), OP_PUBLISH, 0, "orders", "666", b'{"id":666}')
        assert port.apply([entry], []) == at
    finally:
        engine.close()
    return at


def test_a_poisoned_epoch_is_cut_and_the_replica_follows_again(cluster: Cluster) -> None:
    n1 = cluster.start("n1")
    assert cluster.primary() == "n1"
    cluster.start("n2")
    until(lambda: len(cluster.status("n1")) == 2)
    with Client(n1.target) as c:
        c.publish("orders", [{"id": 1}, {"id": 2}])
    until(lambda: cluster.own("n2").applied_bookmark == 2)
    cluster.nodes["n2"].stop()
    forged = poison(cluster, "n2")
    assert forged == 3

    wrong = testing.run(
        "cut-epoch", "--config", str(cluster.config), "--data-dir", str(cluster.tmp_path / "n2"), "--epoch", "7"
    )
    assert wrong.returncode == 2, wrong.stderr
    assert "epoch 7 wrote nothing in this journal (its epochs: " in wrong.stderr
    assert f"{FORGED_EPOCH} from bookmark 3 (evil)" in wrong.stderr

    with Client(n1.target) as c:  # meanwhile the real primary writes at the bookmark the forger took
        c.publish("orders", [{"id": 3}])
    cut = testing.run(
        "cut-epoch",
        "--config",
        str(cluster.config),
        "--data-dir",
        str(cluster.tmp_path / "n2"),
        "--epoch",
        str(FORGED_EPOCH),
    )
    assert cut.returncode == 0, cut.stderr
    assert "the journal ends at bookmark 2; 1 entries cut" in cut.stdout
    lost = [json.loads(line) for line in (cluster.tmp_path / "n2" / "lost-writes.jsonl").read_text().splitlines()]
    assert [(line["bookmark"], line["data"], line["epoch"]) for line in lost] == [(3, '{"id":666}', FORGED_EPOCH)]
    store = Store(cluster.tmp_path / "n2")
    try:
        assert FORGED_EPOCH not in [r.epoch for r in epoch_history(store)]
    finally:
        store.close()

    cluster.start("n2")
    until(lambda: cluster.own("n2").applied_bookmark == 3 and cluster.own("n2").following, 30)
    assert [n.role for n in (cluster.own("n1"), cluster.own("n2"))] == ["primary", "replica"]
    with Client(n1.target) as c:
        ack = c.publish("orders", [{"id": 4}])
    until(lambda: cluster.own("n2").applied_bookmark == ack.last_bookmark)
    with Client(cluster.nodes["n2"].target) as r:
        assert sorted(rec.json()["id"] for rec in r.sow("orders").records()) == [1, 2, 3, 4]
    cluster.stop()
    assert journal(cluster.tmp_path / "n2") == journal(cluster.tmp_path / "n1")
    assert b'{"id":666}' not in [e[5] for e in journal(cluster.tmp_path / "n2")]
