"""The journal through Spark (SPEC §9): range reads exported to Parquet, the as-of job equal to
the server's historical Sow, streaming reads that resume without gap or duplicate, and a
streaming sink that applies a replayed micro-batch once (J-4)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import grpc
import pytest
from pyspark.errors import PySparkException
from pyspark.sql import Row, SparkSession
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.testing import assertDataFrameEqual

from sowdb_api.v1 import data_pb2 as dpb
from sowdb_api.v1 import data_pb2_grpc
from sowdb_client import Client, Message
from sowdb_spark.asof import as_of
from sowdb_spark.export import main as export
from tests.support import start_sowd


def journal(server: str, topic: str) -> list[int]:
    with grpc.insecure_channel(server) as channel:
        stub = data_pb2_grpc.DataServiceStub(channel)
        return [b for r in stub.ReadJournal(dpb.ReadJournalRequest(topic=topic)) for b in r.entries.bookmarks]


def test_the_as_of_job_equals_the_historical_sow(spark: SparkSession, server: str, tmp_path: Path) -> None:
    with Client(server) as c:
        c.publish("ledger", [{"id": -i, "v": 0, "name": f"n{i}"} for i in range(1, 21)])
        c.publish("ledger", [{"id": -i, "v": 1} for i in range(1, 6)], delta=True)  # merged: name kept
        c.publish("ledger", [Message({"id": -30, "v": 9}, expiration=0.2)])
        c.sow_delete("ledger", filter="/id = -7")
        point = c.publish("ledger", [{"id": -8, "v": 2}]).last_bookmark
        c.publish("ledger", [{"id": -i, "v": 3} for i in range(1, 4)], delta=True)
        c.sow_delete("ledger", filter="/id = -9")
        c.publish("ledger", [Message({"id": -31, "v": 9}, expiration=0.2)])
        time.sleep(1.0)  # both expire: one before the point's later changes, one after
        later = c.publish("ledger", [{"id": -40}]).last_bookmark
        expected = {
            b: [
                Row(sow_key=r.sow_key, bookmark=r.bookmark, data=r.data.decode())
                for r in c.sow("ledger", bookmark=str(b), filter="/id < 0", batch_size=1000)
            ]
            for b in (point, later)
        }
    out = tmp_path / "journal"
    assert export(["--server", server, "--out", str(out), "--topic", "ledger"], spark=spark) == 0
    exported = spark.read.parquet(str(out))
    assert sorted(r.bookmark for r in exported.collect()) == journal(server, "ledger")
    assert {r.operation for r in exported.collect()} == {"publish", "delete", "expire"}
    for b, rows in expected.items():
        mine = as_of(exported, "ledger", b).where("get_json_object(data, '$.id') < 0")
        assertDataFrameEqual(mine.select("sow_key", "bookmark", "data"), rows)


def test_a_stream_resumes_from_its_checkpoint_without_gap_or_duplicate(
    spark: SparkSession, server: str, tmp_path: Path
) -> None:
    stop = threading.Event()

    def publish() -> None:
        with Client(server) as c:
            n = 0
            while not stop.is_set() and n < 20_000:
                c.publish("ticks", [{"id": n + i, "v": n} for i in range(50)])
                n += 50
                time.sleep(0.01)

    writer = threading.Thread(target=publish)
    writer.start()
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"

    def start(available_now: bool) -> StreamingQuery:
        reader = spark.readStream.format("sowdb").options(server=server, topic="ticks", max_entries_per_batch="300")
        sink = (
            reader.load()
            .writeStream.format("parquet")
            .option("path", str(out))
            .option("checkpointLocation", str(checkpoint))
        )
        sink = sink.trigger(availableNow=True) if available_now else sink.trigger(processingTime="100 milliseconds")
        return sink.start()

    try:
        query = start(available_now=False)
        deadline = time.time() + 60
        while len(query.recentProgress) < 3 and time.time() < deadline:
            time.sleep(0.2)
        query.stop()  # mid-stream: the publisher goes on
        time.sleep(0.3)
    finally:
        stop.set()
        writer.join()
    query = start(available_now=True)
    query.awaitTermination(120)
    query.stop()
    seen = [r.bookmark for r in spark.read.parquet(str(out)).collect()]
    assert sorted(seen) == journal(server, "ticks")  # every entry once: no gap, no duplicate


def test_a_replayed_micro_batch_is_applied_once(spark: SparkSession, server: str, tmp_path: Path) -> None:
    with Client(server) as c:
        c.publish("ticks", [{"id": 50_000 + i, "v": i} for i in range(200)])
    checkpoint = tmp_path / "checkpoint"

    def run() -> None:
        query = (
            spark.readStream.format("sowdb")
            .options(server=server, topic="ticks", max_entries_per_batch="100000")
            .schema("id long, v long")
            .load()
            .writeStream.format("sowdb")
            .options(server=server, topic="copied")
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(120)
        query.stop()

    run()
    copied = journal(server, "copied")
    ticks = journal(server, "ticks")
    assert len(copied) == len(ticks)
    # lose the record of the last batch's commit: on restart Spark runs that batch again
    commits = sorted((checkpoint / "commits").iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else -1)
    last = [p for p in commits if p.name.isdigit()][-1]
    last.unlink()
    (last.parent / f".{last.name}.crc").unlink(missing_ok=True)
    run()
    assert len(journal(server, "copied")) == len(ticks)  # the replayed batch was a J-4 duplicate
    assert (checkpoint / "commits" / last.name).exists()


def test_a_stream_behind_the_retained_journal_fails_naming_the_oldest_bookmark(
    spark: SparkSession, tmp_path: Path
) -> None:
    config = tmp_path / "sowdb.toml"
    config.write_text('[server]\njournal_max_entries = 10\n\n[[topic]]\nname = "ticks"\nkey = ["/id"]\n')
    p = start_sowd(tmp_path / "data", "--config", str(config))
    try:
        with Client(p.target) as c:
            c.publish("ticks", [{"id": i} for i in range(100)])
        deadline = time.time() + 30
        while time.time() < deadline:  # retention runs every few seconds
            with grpc.insecure_channel(p.target) as channel:
                d = data_pb2_grpc.DataServiceStub(channel).DescribeJournal(dpb.DescribeJournalRequest())
            if d.trimmed_bookmark == 90:
                break
            time.sleep(0.2)
        query = (
            spark.readStream.format("sowdb")
            .options(server=p.target, topic="ticks", from_bookmark="5")
            .load()
            .writeStream.format("noop")
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .start()
        )
        with pytest.raises(
            PySparkException, match="bookmark 5 is older than the retained journal; the oldest available bookmark is 90"
        ):
            query.awaitTermination(60)
    finally:
        p.stop()
