"""Batch writes through Spark (SPEC §9): staged per task attempt, committed as one batch; a
retried task leaves the state of one run, a failed job leaves the topic unchanged, a bad row
fails the job naming it."""

from __future__ import annotations

import time
from collections.abc import Iterator

import grpc
import pyarrow as pa
import pytest
from pyspark import TaskContext
from pyspark.errors import PySparkException
from pyspark.sql import Row, SparkSession
from pyspark.testing import assertDataFrameEqual

from sowdb_api.v1 import data_pb2 as dpb
from sowdb_api.v1 import data_pb2_grpc
from sowdb_client import Client


def journal_count(server: str, topic: str) -> int:
    with grpc.insecure_channel(server) as channel:
        stub = data_pb2_grpc.DataServiceStub(channel)
        return sum(len(r.entries.bookmarks) for r in stub.ReadJournal(dpb.ReadJournalRequest(topic=topic)))


def stages_left(server: str) -> int:
    with grpc.insecure_channel(server) as channel:
        return int(
            data_pb2_grpc.DataServiceStub(channel).AbortStages(dpb.AbortStagesRequest(stage_id_prefix="spark-")).aborted
        )


def test_a_dataframe_is_written_as_json_objects_in_one_batch(spark: SparkSession, server: str) -> None:
    df = spark.createDataFrame(
        [(i, f"n{i}", i * 1.5, None) for i in range(500)], "id long, name string, px double, note string"
    )
    df.repartition(3).write.format("sowdb").options(server=server, topic="written").mode("append").save()
    with Client(server) as c:
        records = list(c.sow("written", batch_size=1000))
    assert sorted(r.json()["id"] for r in records) == list(range(500))
    assert records[0].json().keys() == {"id", "name", "px", "note"}
    bookmarks = sorted(r.bookmark for r in records)
    assert bookmarks == list(range(bookmarks[0], bookmarks[0] + 500))  # one place in the total order
    # a single string column named data is sent as it is; _sow_key names the record (keyless topics)
    spark.createDataFrame([("k1", "hi")], "_sow_key string, text string").write.format("sowdb").options(
        server=server, topic="keyless"
    ).mode("append").save()
    spark.createDataFrame([('{"id": 9000, "raw": true}',)], "data string").write.format("sowdb").options(
        server=server, topic="written"
    ).mode("append").save()
    with Client(server) as c:
        assert [(r.sow_key, r.json()) for r in c.sow("keyless")] == [("k1", {"text": "hi"})]
        assert [r.json() for r in c.sow("written", sow_keys=["9000"])] == [{"id": 9000, "raw": True}]
    assert stages_left(server) == 0


def _fail_first_attempt_of_partition_1(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    ctx = TaskContext.get()
    assert ctx is not None
    for i, batch in enumerate(batches):
        yield batch
        if i == 1 and ctx.partitionId() == 1 and ctx.attemptNumber() == 0:
            time.sleep(0.5)  # the rows sent so far reach the server's stage
            raise RuntimeError("injected task failure")


def _always_fail_partition_1(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    ctx = TaskContext.get()
    assert ctx is not None
    for batch in batches:
        yield batch
        if ctx.partitionId() == 1:
            raise RuntimeError("injected job failure")


def test_a_retried_task_leaves_the_state_of_one_run_and_a_failed_job_nothing(spark: SparkSession, server: str) -> None:
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "100")
    try:
        df = spark.range(0, 2000, numPartitions=2).selectExpr("id", "id * 2 AS v")
        failing = df.mapInArrow(_fail_first_attempt_of_partition_1, df.schema)
        failing.write.format("sowdb").options(server=server, topic="failing", batch_size="50").mode("append").save()
        assert journal_count(server, "failing") == 2000  # each row applied once, the failed attempt's never
        result = spark.read.format("sowdb").options(server=server, topic="failing").schema("id long, v long").load()
        assertDataFrameEqual(result, df)
        with pytest.raises(PySparkException, match="injected job failure"):
            spark.range(5000, 7000, numPartitions=2).selectExpr("id").mapInArrow(
                _always_fail_partition_1, "id long"
            ).write.format("sowdb").options(server=server, topic="failing", batch_size="50").mode("append").save()
        assert journal_count(server, "failing") == 2000  # the failed job left the topic unchanged
        assert stages_left(server) == 0  # and no stage behind
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")


def test_a_bad_row_fails_the_job_naming_it(spark: SparkSession, server: str) -> None:
    rows = [Row(id=i, name="x") for i in range(10)] + [Row(id=None, name="no key")]
    df = spark.createDataFrame(rows, "id long, name string").coalesce(1)
    with pytest.raises(PySparkException, match=r"row 10 of partition 0 is refused: lacks the key field /id"):
        df.write.format("sowdb").options(server=server, topic="written").mode("append").save()
    binary = spark.createDataFrame([(1, bytearray(b"\x00"))], "id long, blob binary")
    with pytest.raises(
        PySparkException, match=r"row 0: cannot be written as JSON \(Type is not JSON serializable: bytes\)"
    ):
        binary.write.format("sowdb").options(server=server, topic="written").mode("append").save()
    with pytest.raises(PySparkException, match="sowdb writes append"):
        binary.write.format("sowdb").options(server=server, topic="written").mode("overwrite").save()
    with Client(server) as c:
        assert not any(r.json().get("name") == "no key" for r in c.sow("written", filter="/name = 'no key'"))
