"""The Spark sources given a cluster's servers (SPEC §13, HA-5): ``server`` is a list, its
primary is found where Spark plans (through the replica listed first), and the batch writer and
reader work there. A 2-node cluster on a real etcd."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from sowdb_client import Client
from tests.cluster.conftest import EtcdServer
from tests.cluster.conftest import etcd as etcd  # the fixture, from the cluster tests
from tests.cluster.support import Cluster, until


@pytest.fixture
def two(tmp_path: Path, etcd: EtcdServer) -> Iterator[Cluster]:
    c = Cluster(tmp_path, etcd)
    try:
        for name in ("n1", "n2"):
            c.start(name)
        yield c
    finally:
        c.stop()


def test_the_batch_writer_and_reader_take_a_server_list(spark: SparkSession, two: Cluster) -> None:
    primary = str(two.primary())
    replica = next(n for n in two.nodes if n != primary)
    servers = f"{two.nodes[replica].target},{two.nodes[primary].target}"
    df = spark.createDataFrame([(i, i * 2) for i in range(100)], "id long, qty long")
    df.repartition(2).write.format("sowdb").options(server=servers, topic="orders").mode("append").save()
    with Client(two.nodes[primary].target) as c:
        assert sorted(r.json()["id"] for r in c.sow("orders", batch_size=1000)) == list(range(100))
    until(lambda: two.own(replica).applied_bookmark == 100)
    read = spark.read.format("sowdb").options(server=servers, topic="orders").load()
    assert sorted(json.loads(row["data"])["id"] for row in read.collect()) == list(range(100))
