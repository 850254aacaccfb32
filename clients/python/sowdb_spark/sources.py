"""The PySpark data sources (SPEC §9): ``sowdb`` (batch read, batch write, streaming read and
write) and ``sowdb.journal`` (journal range reads, batch and streaming).

Everything that talks to the server opens its channel inside the method Spark calls
(:func:`sowdb_spark.rpc.stub`, cached per process); readers, writers and partitions hold only
strings and numbers, since Spark pickles them.

- Batch read: planning (``partitions``) opens a pinned snapshot of the query on the server
  (``OpenSnapshot``: one point of the total order) and plans one partition per slice; each
  task reads its slice (``ReadSnapshot``), so the partitions together are one ``Sow`` at that
  bookmark, and a retried task reads the same rows.
- Batch write: each task attempt stages its rows under its own stage id (job, partition,
  attempt); the job's commit applies exactly the stages of the successful attempts as one
  batch (``CommitStages``) and discards the rest; an abort discards them all.
- Journal read: the range ``(from_bookmark, to_bookmark]`` (pinned at planning) cut into
  contiguous bookmark ranges, one per partition.
- Streaming read: offsets are ``{"bookmark": N}`` (every entry up to N processed); a
  micro-batch is the journal range between two offsets, read by stateless ``read`` calls.
- Streaming write: exactly once through J-4: each micro-batch is committed with the query id
  as producer and the batch id as sequence, read from the tasks' local properties, so a
  micro-batch replayed after a failure is acknowledged as a duplicate, not applied again.
"""

from __future__ import annotations

import contextlib
import itertools
import sys
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    Filter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from sowdb_api.v1 import data_pb2 as dpb
from sowdb_api.v1 import sow_pb2 as pb
from sowdb_client.errors import OutOfRangeError, SowdbError
from sowdb_spark import options as opt
from sowdb_spark.arrow import JOURNAL_SCHEMA, RECORD_SCHEMA, BatchMaker, documents
from sowdb_spark.pushdown import server_filter
from sowdb_spark.rpc import SowdbSparkError, call, explain, stream, stub

STAGE_REQUEST_MESSAGES = 2000
"""Messages per StageWrite request."""
PUSHDOWN_WORKER = "data_source_pushdown_filters.py"


def _pushdown_planning() -> bool:
    """Whether Spark is planning this read in its filter-pushdown worker, which it runs only when
    ``spark.sql.python.filterPushdown.enabled`` is on (Spark refuses a reader that defines
    ``pushFilters`` while it is off, so the reader must know which it is)."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_filename.endswith(PUSHDOWN_WORKER):
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


# --- batch read ----------------------------------------------------------------------------------


class SnapshotSlice(InputPartition):
    """Slice ``index`` of ``count`` of a pinned snapshot."""

    def __init__(self, server: str, snapshot_id: str, index: int, count: int, batch_size: int) -> None:
        super().__init__(index)
        self.server = server
        self.snapshot_id = snapshot_id
        self.index = index
        self.count = count
        self.batch_size = batch_size


class SowReader(DataSourceReader):
    """A SOW query read in partitions from one pinned snapshot."""

    def __init__(self, options: opt.Options, schema: StructType) -> None:
        self.options = options
        self.schema = schema
        self.filter = options.filter
        self.snapshot_bookmark = 0

    def partitions(self) -> Sequence[InputPartition]:
        o = self.options
        req = dpb.OpenSnapshotRequest(topic=o.topic, filter=self.filter, bookmark=o.bookmark, lease_seconds=o.lease)
        try:
            snap = call(stub(o.server).OpenSnapshot, req)
        except SowdbError as exc:
            raise explain(exc, f"sowdb read of {o.topic!r}") from None
        self.snapshot_bookmark = snap.bookmark
        n = max(1, min(o.partitions, snap.record_count or 1))
        return [SnapshotSlice(o.server, snap.snapshot_id, i, n, o.batch_size) for i in range(n)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, SnapshotSlice)
        make = BatchMaker(self.schema)
        req = dpb.ReadSnapshotRequest(
            snapshot_id=partition.snapshot_id,
            partition=partition.index,
            partitions=partition.count,
            batch_size=partition.batch_size,
        )
        try:
            for resp in stream(stub(partition.server).ReadSnapshot(req)):
                yield make(resp.records)
        except SowdbError as exc:
            raise explain(exc, f"sowdb read of snapshot {partition.snapshot_id}") from None


class SowPushdownReader(SowReader):
    """:class:`SowReader` with Spark's filters pushed down (:mod:`sowdb_spark.pushdown`)."""

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:
        self.filter = server_filter(filters, self.schema, self.options.filter)
        yield from filters  # Spark evaluates each again: identical rows whatever the data


# --- batch write ---------------------------------------------------------------------------------


@dataclass
class Staged(WriterCommitMessage):
    """A task attempt's stage: its id and message count (and, streaming, the query and batch)."""

    stage_id: str
    partition: int
    count: int
    query_id: str = ""
    batch_id: int = -1


def _stage_rows(server: str, topic: str, stage_id: str, batches: Iterator[pa.RecordBatch], size: int) -> int:
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


# --- journal reads, batch and streaming ----------------------------------------------------------


class JournalSlice(InputPartition):
    """The journal entries ``(after, upto]`` of a topic (all topics when empty)."""

    def __init__(
        self, server: str, after: int, upto: int, topic: str, operations: tuple[int, ...], filter: str, batch_size: int
    ) -> None:
        super().__init__((after, upto))
        self.server = server
        self.after = after
        self.upto = upto
        self.topic = topic
        self.operations = operations
        self.filter = filter
        self.batch_size = batch_size


def _journal_slices(o: opt.Options, after: int, upto: int, parts: int) -> list[InputPartition]:
    if upto <= after:
        return []
    span = upto - after
    parts = max(1, min(parts, span))
    bounds = [after + span * i // parts for i in range(parts + 1)]
    return [
        JournalSlice(o.server, lo, hi, o.topic, o.operations, o.filter, o.batch_size)
        for lo, hi in itertools.pairwise(bounds)
    ]


def _read_journal(part: JournalSlice, schema: StructType) -> Iterator[pa.RecordBatch]:
    make = BatchMaker(schema)
    req = dpb.ReadJournalRequest(
        from_bookmark=part.after,
        to_bookmark=part.upto,
        topic=part.topic,
        operations=list(part.operations),  # type: ignore[arg-type]
        filter=part.filter,
        batch_size=part.batch_size,
    )
    try:
        for resp in stream(stub(part.server).ReadJournal(req)):
            yield make(resp.entries)
    except SowdbError as exc:
        raise explain(exc, f"sowdb journal read after bookmark {part.after}") from None


class JournalReader(DataSourceReader):
    """``spark.read.format("sowdb.journal")``: a journal range, pinned at planning."""

    def __init__(self, options: opt.Options, schema: StructType) -> None:
        self.options = options
        self.schema = schema

    def partitions(self) -> Sequence[InputPartition]:
        o = self.options
        try:
            d = call(stub(o.server).DescribeJournal, dpb.DescribeJournalRequest())
        except SowdbError as exc:
            raise explain(exc, "sowdb journal read") from None
        after = int(o.from_bookmark) if o.from_bookmark != "now" else d.last_bookmark
        if after and after < d.trimmed_bookmark:
            raise SowdbSparkError(
                f"sowdb journal read: from_bookmark {after} is older than the retained journal, which starts after "
                f"bookmark {d.trimmed_bookmark}; read from {d.trimmed_bookmark} or later"
            )
        after = max(after, d.trimmed_bookmark)
        upto = min(o.to_bookmark or d.last_bookmark, d.last_bookmark)
        return _journal_slices(o, after, upto, o.partitions)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, JournalSlice):  # an empty range plans one empty partition
            return iter(())
        return _read_journal(partition, self.schema)


class JournalStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("sowdb")`` (and ``"sowdb.journal"``): offsets are bookmarks."""

    def __init__(self, options: opt.Options, schema: StructType) -> None:
        self.options = options
        self.schema = schema
        self.target: int | None = None

    def _describe(self, after: int = 0, max_entries: int = 0) -> dpb.DescribeJournalResponse:
        o = self.options
        req = dpb.DescribeJournalRequest(after_bookmark=after, max_entries=max_entries, topic=o.topic)
        try:
            return call(stub(o.server).DescribeJournal, req)
        except OutOfRangeError as exc:
            raise SowdbSparkError(
                f"sowdb stream of {o.topic or 'every topic'!r}: bookmark {after} is older than the retained journal; "
                f"the oldest available bookmark is {exc.oldest_bookmark} (entries after it are kept). Restart the "
                "query from a new checkpoint with from_bookmark set"
            ) from None
        except SowdbError as exc:
            raise explain(exc, f"sowdb stream of {o.topic or 'every topic'!r}") from None

    def initialOffset(self) -> dict[str, int]:
        start = self.options.from_bookmark
        if start == "now":
            return {"bookmark": self._describe().last_bookmark}
        if start == "0":  # the start of the retained journal
            return {"bookmark": self._describe().trimmed_bookmark}
        return {"bookmark": int(start)}

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.options.max_entries_per_batch
        return ReadMaxRows(n) if n else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = self._describe().last_bookmark

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        after = int(start["bookmark"])
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else 0
        d = self._describe(after, max_rows)
        end = d.end_bookmark
        if self.target is not None:
            end = min(end, self.target)
        return {"bookmark": max(after, end)}

    def reportLatestOffset(self) -> dict[str, int] | None:
        return {"bookmark": self._describe().last_bookmark}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        return _journal_slices(self.options, int(start["bookmark"]), int(end["bookmark"]), self.options.partitions)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, JournalSlice)
        return _read_journal(partition, self.schema)

    def commit(self, end: dict[str, int]) -> None:
        """Nothing to release: the server keeps no state per reader."""


# --- the data sources ------------------------------------------------------------------------


class SowdbDataSource(DataSource):
    """``format("sowdb")``: SOW queries (batch read), staged writes, journal streams."""

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        self.options = dict(options)
        opt.check_names(self.options, ("read", "write", "stream read"), "sowdb")

    @classmethod
    def name(cls) -> str:
        return "sowdb"

    def schema(self) -> StructType:
        return RECORD_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        o = opt.parse(self.options, "read")
        return SowPushdownReader(o, schema) if _pushdown_planning() else SowReader(o, schema)

    def writer(self, schema: StructType, overwrite: bool) -> SowWriter:
        _writable(schema, overwrite)
        return SowWriter(opt.parse(self.options, "write"))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return JournalStreamReader(opt.parse(self.options, "stream read"), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        _writable(schema, overwrite)
        return SowStreamWriter(opt.parse(self.options, "stream write"))


class SowdbJournalDataSource(DataSource):
    """``format("sowdb.journal")``: the journal, as a range (batch) or as a stream."""

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        self.options = dict(options)
        opt.check_names(self.options, ("journal read", "journal stream read"), "sowdb.journal")

    @classmethod
    def name(cls) -> str:
        return "sowdb.journal"

    def schema(self) -> StructType:
        return JOURNAL_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return JournalReader(opt.parse(self.options, "journal read", topic_required=False), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return JournalStreamReader(opt.parse(self.options, "journal stream read", topic_required=False), schema)


def _writable(schema: StructType, overwrite: bool) -> None:
    if overwrite:
        raise SowdbSparkError(
            "sowdb writes append (publish) only: use .mode('append'); to replace a topic's records, delete them first"
        )
    if not schema.fields:
        raise SowdbSparkError("sowdb write: the DataFrame has no columns")
