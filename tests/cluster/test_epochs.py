"""The epoch record (SPEC §13, HA-4): a new primary records (epoch, its first bookmark) before it
serves a write; replicas adopt their primary's history, so every node holds the cluster's
timelines (PostgreSQL's). The records are journal meta entries: they take no bookmark, so the
journal, its readers and ``sowd verify`` see only the data."""

from __future__ import annotations

import json
from pathlib import Path

from sowdb import testing
from sowdb.storage import Store
from sowdb.storage.epochs import EpochStart, begin_epoch, cut_epoch_history, epoch_history, fork_point
from sowdb_client import Client
from tests.cluster.conftest import EtcdServer
from tests.cluster.support import TTL, Cluster, journal, publish_acknowledged, until


def history(cluster: Cluster, name: str) -> list[tuple[int, int, str]]:
    return [(e.epoch, e.first_bookmark, e.node) for e in cluster.own(name).epochs]


def test_each_primary_records_its_epoch_and_the_replicas_adopt_the_history(cluster: Cluster) -> None:
    for name in ("n1", "n2", "n3"):
        cluster.start(name)
    assert cluster.primary() == "n1"
    first = cluster.own("n1").epoch
    assert history(cluster, "n1") == [(first, 1, "n1")]  # recorded before the first write
    ack = publish_acknowledged(cluster.nodes["n1"].target, "orders", [{"id": i} for i in range(10)])
    assert ack.last_bookmark == 10  # the record took no bookmark
    for name in ("n2", "n3"):
        until(lambda: history(cluster, name) == [(first, 1, "n1")], within=TTL + 15)  # noqa: B023
    until(lambda: all(cluster.own(n).applied_bookmark == 10 for n in ("n2", "n3")), within=TTL + 15)

    cluster.nodes["n1"].kill()
    new = str(cluster.primary(["n2", "n3"], within=TTL + 15))
    other = next(n for n in ("n2", "n3") if n != new)
    second = cluster.own(new).epoch
    assert second > first
    expected = [(first, 1, "n1"), (second, 11, new)]
    assert history(cluster, new) == expected
    publish_acknowledged(cluster.nodes[new].target, "orders", [{"id": 10}])
    until(lambda: history(cluster, other) == expected, within=TTL + 15)
    cluster.start("n1")  # the old primary follows the new one and adopts its history too
    until(lambda: cluster.own("n1").applied_bookmark == 11 and history(cluster, "n1") == expected, within=TTL + 20)
    with Client(cluster.nodes["n1"].target) as c:
        assert sorted(r.json()["id"] for r in c.sow("orders").records()) == list(range(11))

    cluster.stop()
    journals = [journal(cluster.tmp_path / n) for n in ("n1", "n2", "n3")]
    assert [e[0] for e in journals[0]] == list(range(1, 12))  # data only, no gap
    assert journals[0] == journals[1] == journals[2]
    for n in ("n1", "n2", "n3"):
        flags = ("--config", str(cluster.config), "--node", n, "--advertise", "127.0.0.1:1")
        verified = testing.run("verify", *flags, "--data-dir", str(cluster.tmp_path / n))
        assert verified.returncode == 0, verified.stdout + verified.stderr


def test_the_history_describes_the_journal(tmp_path: Path) -> None:
    """begin_epoch keeps a primary's own record (an abandoned switchover leads again at the same
    epoch) and drops records of entries the journal does not hold; a fork cut drops the epochs
    that wrote only entries after the cut; the records survive a reopen."""
    store = Store(tmp_path / "s")
    try:
        assert begin_epoch(store, 5, "a", last=0) == EpochStart(5, 1, "a")
        begin_epoch(store, 9, "b", last=10)
        assert begin_epoch(store, 9, "b", last=20) == EpochStart(9, 11, "b")  # the same epoch again
        assert epoch_history(store) == [EpochStart(5, 1, "a"), EpochStart(9, 11, "b")]
        cut_epoch_history(store, 10)
        assert epoch_history(store) == [EpochStart(5, 1, "a")]
        begin_epoch(store, 12, "c", last=0)  # an empty journal: nothing before it describes it
        assert epoch_history(store) == [EpochStart(12, 1, "c")]
        assert list(store.iter_journal(0)) == []
    finally:
        store.close()
    store = Store(tmp_path / "s")
    try:
        assert epoch_history(store) == [EpochStart(12, 1, "c")]
    finally:
        store.close()


def test_a_former_primary_finds_its_fork_point_from_the_epoch_histories(tmp_path: Path, etcd: EtcdServer) -> None:
    """``async``: n1 acknowledges 6..8 alone while n2 is stopped, and dies; n2 takes over at a new
    epoch from bookmark 6. n1, back, is refused as forked and places the fork after 5 from the
    two histories (confirmed by probes), cuts 6..8 into its lost-writes file and follows."""
    cluster = Cluster(tmp_path, etcd, ack="async")
    try:
        cluster.start("n1")
        assert cluster.primary() == "n1"
        cluster.start("n2")
        publish_acknowledged(cluster.nodes["n1"].target, "orders", [{"id": i} for i in range(5)])
        until(lambda: cluster.own("n2").applied_bookmark == 5, within=TTL + 15)
        cluster.nodes["n2"].stop()
        for i in range(5, 8):  # acknowledged by n1 alone: never reach n2
            publish_acknowledged(cluster.nodes["n1"].target, "orders", [{"id": i}])
        cluster.nodes["n1"].kill()
        cluster.start("n2")
        assert cluster.primary(["n2"], within=TTL + 20) == "n2"
        assert publish_acknowledged(cluster.nodes["n2"].target, "orders", [{"id": 100}]).last_bookmark == 6
        second = cluster.own("n2").epoch
        cluster.start("n1")
        status, output = cluster.nodes["n1"].stop(sig=0, timeout=30)  # it finds the fork, stops
        assert status == 0
        assert "the epoch histories place the fork after bookmark 5" in output
        cluster.start("n1")  # the cut, then it follows
        until(lambda: cluster.own("n1").applied_bookmark == 6, within=TTL + 20)
        assert [e.epoch for e in cluster.own("n1").epochs][-1] == second
        lost = (cluster.tmp_path / "n1" / "lost-writes.jsonl").read_text().splitlines()
        first = cluster.own("n1").epochs[0].epoch
        assert [(json.loads(line)["bookmark"], json.loads(line)["epoch"]) for line in lost] == [
            (6, first),
            (7, first),
            (8, first),
        ]
    finally:
        cluster.stop()


def test_the_fork_point_of_two_histories() -> None:
    a, b, c = EpochStart(3, 1, "a"), EpochStart(7, 11, "b"), EpochStart(9, 11, "c")
    assert fork_point([a], [a, b], 14, 20) == 10  # b took over at 11: a's 11..14 never reached it
    assert fork_point([a, b], [a, c], 14, 20) == 10  # two successors of a, each from 11
    assert fork_point([a, b], [a, b], 14, 20) == 14  # no fork: the shorter journal's end
    assert fork_point([a], [a], 14, 12) == 12
    assert fork_point([EpochStart(3, 5, "a")], [a], 14, 20) is None  # a history that misses the start
    assert fork_point([], [a], 14, 20) is None
