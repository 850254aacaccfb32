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

import sys
from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    Filter,
    InputPartition,
)
from pyspark.sql.types import StructType

from sowdb_api.v1 import data_pb2 as dpb
from sowdb_client.errors import SowdbError
from sowdb_spark import options as opt
from sowdb_spark.arrow import JOURNAL_SCHEMA, RECORD_SCHEMA, BatchMaker
from sowdb_spark.journal import JournalReader, JournalStreamReader
from sowdb_spark.pushdown import server_filter
from sowdb_spark.rpc import Server, SowdbSparkError, call, explain, stream, stub
from sowdb_spark.writing import SowStreamWriter, SowWriter

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

    def __init__(self, server: Server, snapshot_id: str, index: int, count: int, batch_size: int) -> None:
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
