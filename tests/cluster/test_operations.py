"""A cluster as operators watch it (SPEC §12, §13): ``/metrics`` on each node says its role,
epoch, applied bookmark, the replication lag (each follower's on the primary, its own on a
replica) and how often ``sync`` fell back to acknowledging alone; ``sow stats`` starts with the
node's role and lag; a server alone has role ``none`` and prints its stats as it always did.
Real processes: etcd and two ``sowd``."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from sowdb import testing
from sowdb.testing.cluster import Cluster, nodes
from sowdb_client import Client
from tests.api.test_stats import Samples
from tests.api.test_stats import scrape as scrape_port
from tests.cluster.conftest import EtcdServer
from tests.cluster.support import until
from tests.support import sow


def scrape(sowd: testing.Sowd) -> Samples:
    port = re.search(r"metrics on http://127\.0\.0\.1:(\d+)/metrics", sowd.output)
    assert port, sowd.output
    return scrape_port(int(port.group(1)))


def cluster_samples(samples: Samples) -> Samples:
    return {k: v for k, v in samples.items() if k[0].startswith("sowdb_cluster_")}


def role(name: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    return ("sowdb_cluster_role", (("role", name),))


@pytest.fixture
def cluster(tmp_path: Path, etcd: EtcdServer) -> Iterator[Cluster]:
    with nodes(tmp_path, etcd, server='metrics_listen = "127.0.0.1:0"') as c:
        yield c


def test_metrics_and_sow_stats_show_each_nodes_role_epoch_bookmark_and_lag(cluster: Cluster) -> None:
    n1 = cluster.start("n1")
    assert cluster.primary() == "n1"
    with Client(n1.target) as c:  # no replica yet: `sync` falls back to acknowledging alone, counted
        c.publish("orders", [{"id": 0}])
    n2 = cluster.start("n2")
    until(lambda: cluster.own("n2").role == "replica" and len(cluster.status("n1")) == 2)
    with Client(n1.target) as c:
        assert c.publish("orders", [{"id": i} for i in range(1, 5)]).last_bookmark == 5
    until(lambda: cluster.own("n2").applied_bookmark == 5 and cluster.status("n1")[1].applied_bookmark == 5)
    epoch = cluster.own("n1").epoch
    assert epoch > 0

    assert cluster_samples(scrape(n1)) == {
        role("primary"): 1.0,
        role("replica"): 0.0,
        role("none"): 0.0,
        ("sowdb_cluster_epoch", ()): epoch,
        ("sowdb_cluster_applied_bookmark", ()): 5.0,
        ("sowdb_cluster_replication_lag_bookmarks", (("node", "n2"),)): 0.0,
        ("sowdb_cluster_sync_fallbacks_total", ()): 1.0,
    }
    assert cluster_samples(scrape(n2)) == {
        role("primary"): 0.0,
        role("replica"): 1.0,
        role("none"): 0.0,
        ("sowdb_cluster_epoch", ()): epoch,
        ("sowdb_cluster_applied_bookmark", ()): 5.0,
        ("sowdb_cluster_replication_lag_bookmarks", (("node", "n2"),)): 0.0,
        ("sowdb_cluster_sync_fallbacks_total", ()): 0.0,
    }

    shown = sow("-server", n1.target, "stats")
    assert shown.returncode == 0, shown.stderr
    header = shown.stdout.splitlines()[0]
    assert header == f"node n1: primary, epoch {epoch}, applied bookmark 5, lag 0; followers: n2 lag 0"
    shown = sow("-server", n2.target, "stats", "-format", "json")
    assert shown.returncode == 0, shown.stderr
    rows = json.loads(shown.stdout)["cluster"]
    assert [(r["node"], r["role"], r["epoch"], r["applied_bookmark"], r["lag"]) for r in rows] == [
        ("n2", "replica", epoch, 5, 0)
    ]
    assert sow("-server", n2.target, "stats").stdout.startswith(
        f"node n2: replica, epoch {epoch}, applied bookmark 5, lag 0\n"
    )


def test_a_server_alone_has_role_none_and_its_stats_unchanged(cluster: Cluster) -> None:
    alone = cluster.config.with_name("alone.toml")
    alone.write_text('[server]\nmetrics_listen = "127.0.0.1:0"\n' + alone.read_text())
    with testing.start(cluster.tmp_path / "alone", config=alone) as sowd:
        assert cluster_samples(scrape(sowd)) == {role("primary"): 0.0, role("replica"): 0.0, role("none"): 1.0}
        table = sow("-server", sowd.target, "stats")
        assert table.returncode == 0, table.stderr
        assert not table.stdout.startswith("node ")
        assert "cluster" not in json.loads(sow("-server", sowd.target, "stats", "-format", "json").stdout)
