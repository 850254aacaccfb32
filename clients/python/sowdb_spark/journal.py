"""Journal reads (SPEC §9): ``format("sowdb.journal")`` ranges pinned at planning, and the
journal streams of ``readStream`` (offsets are bookmarks; ``read`` is stateless)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from sowdb_api.v1 import data_pb2 as dpb
from sowdb_client.errors import OutOfRangeError, SowdbError
from sowdb_spark import options as opt
from sowdb_spark.arrow import BatchMaker
from sowdb_spark.rpc import Server, SowdbSparkError, call, explain, stream, stub


class JournalSlice(InputPartition):
    """The journal entries ``(after, upto]`` of a topic (all topics when empty)."""

    def __init__(
        self,
        server: Server,
        after: int,
        upto: int,
        topic: str,
        operations: tuple[int, ...],
        filter: str,
        batch_size: int,
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
            # the topic too: a user who may read one topic may not describe every topic's journal
            d = call(stub(o.server).DescribeJournal, dpb.DescribeJournalRequest(topic=o.topic))
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
