"""Writes (SPEC §9): ``df.write.format("sowdb")`` staged per task attempt and committed by the
job as one batch; ``df.writeStream.format("sowdb")`` exactly once through J-4 (the query id as
producer, the batch id as sequence, both from the tasks' local properties)."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage

from sowdb_api.v1 import data_pb2 as dpb
from sowdb_api.v1 import sow_pb2 as pb
from sowdb_client.errors import SowdbError
from sowdb_spark import options as opt
from sowdb_spark.arrow import documents
from sowdb_spark.rpc import Server, SowdbSparkError, call, explain, stub


@dataclass
class Staged(WriterCommitMessage):
    """A task attempt's stage: its id and message count (and, streaming, the query and batch)."""

    stage_id: str
    partition: int
    count: int
    query_id: str = ""
    batch_id: int = -1


def _stage_rows(server: Server, topic: str, stage_id: str, batches: Iterator[pa.RecordBatch], size: int) -> int:
    """Stage every row of ``batches`` under ``stage_id``; returns the row count.

    Raises:
        SowdbSparkError: a row that is not JSON, or that the server refuses (a missing key
            field), naming it.
    """
    rows = 0
    failure: Exception | None = None  # gRPC reports an error of the request iterator only as UNKNOWN

    def requests() -> Iterator[dpb.StageWriteRequest]:
        nonlocal rows, failure
        pending: list[pb.PublishMessage] = []
        try:
            for batch in batches:
                for data, key in documents(batch, rows):
                    pending.append(pb.PublishMessage(data=data, sow_key=key))
                    rows += 1
                    if len(pending) >= size:
                        yield dpb.StageWriteRequest(stage_id=stage_id, topic=topic, messages=pending)
                        pending = []
        except Exception as exc:
            failure = exc
            raise
        yield dpb.StageWriteRequest(stage_id=stage_id, topic=topic, messages=pending, complete=True)

    try:
        call(stub(server).StageWrite, requests())
    except SowdbError as exc:
        if failure is not None:
            raise failure from None
        index = exc.metadata.get("message_index")
        if index is not None:
            raise SowdbSparkError(
                f"sowdb write to {topic!r}: row {index} of partition {stage_id.rsplit('/', 2)[-2]} "
                f"is refused: {exc.message.split(': ', 1)[-1]}"
            ) from None
        raise explain(exc, f"sowdb write to {topic!r}") from None
    return rows


class SowWriter(DataSourceArrowWriter):
    """``df.write.format("sowdb")``: staged per task attempt, committed atomically by the job."""

    def __init__(self, options: opt.Options) -> None:
        self.options = options
        self.job = f"spark-{uuid.uuid4().hex}"

    def write(self, iterator: Iterator[pa.RecordBatch]) -> Staged:
        ctx = TaskContext.get()
        partition, attempt = (ctx.partitionId(), ctx.attemptNumber()) if ctx is not None else (0, 0)
        stage_id = f"{self.job}/{partition}/{attempt}"
        o = self.options
        return Staged(stage_id, partition, _stage_rows(o.server, o.topic, stage_id, iterator, o.batch_size))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        staged = sorted((m for m in messages if isinstance(m, Staged)), key=lambda m: m.partition)
        o = self.options
        try:
            if staged:
                req = dpb.CommitStagesRequest(topic=o.topic, stage_ids=[m.stage_id for m in staged])
                call(stub(o.server).CommitStages, req)
        except SowdbError as exc:
            raise explain(exc, f"sowdb write to {o.topic!r}: commit") from None
        finally:
            self._discard()  # stages of failed attempts

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        self._discard()

    def _discard(self) -> None:
        with contextlib.suppress(SowdbError):  # else they end with their lease
            call(stub(self.options.server).AbortStages, dpb.AbortStagesRequest(stage_id_prefix=self.job + "/"))


class SowStreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("sowdb")``: each micro-batch staged by its tasks and committed once,
    with the query id as J-4 producer and the batch id as its sequence."""

    def __init__(self, options: opt.Options) -> None:
        self.options = options
        self.run = uuid.uuid4().hex

    def write(self, iterator: Iterator[pa.RecordBatch]) -> Staged:
        ctx = TaskContext.get()
        assert ctx is not None, "a streaming write runs in a Spark task"
        query_id = ctx.getLocalProperty("sql.streaming.queryId") or ""
        batch_id = int(ctx.getLocalProperty("streaming.sql.batchId") or -1)
        partition, attempt = ctx.partitionId(), ctx.attemptNumber()
        stage_id = f"spark-stream-{query_id}/{batch_id}/{self.run}/{partition}/{attempt}"
        o = self.options
        count = _stage_rows(o.server, o.topic, stage_id, iterator, o.batch_size)
        return Staged(stage_id, partition, count, query_id, batch_id)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803 (Spark's name)
        staged = sorted((m for m in messages if isinstance(m, Staged)), key=lambda m: m.partition)
        if not staged:
            return
        o = self.options
        query_id = staged[0].query_id
        if not query_id or any(m.batch_id != batchId or m.query_id != query_id for m in staged):
            raise SowdbSparkError("sowdb stream write: the tasks did not report this micro-batch's query and batch id")
        req = dpb.CommitStagesRequest(
            topic=o.topic,
            stage_ids=[m.stage_id for m in staged],
            producer_id=f"spark:{query_id}",
            producer_seq=batchId,
        )
        try:
            call(stub(o.server).CommitStages, req)
        except SowdbError as exc:
            raise explain(exc, f"sowdb stream write to {o.topic!r}: commit of batch {batchId}") from None
        finally:
            self._discard(query_id, batchId)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        for m in messages:
            if isinstance(m, Staged):
                self._discard(m.query_id, batchId)
                return

    def _discard(self, query_id: str, batch_id: int) -> None:
        prefix = f"spark-stream-{query_id}/{batch_id}/{self.run}/"
        with contextlib.suppress(SowdbError):
            call(stub(self.options.server).AbortStages, dpb.AbortStagesRequest(stage_id_prefix=prefix))
