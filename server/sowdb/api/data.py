"""``sowdb.v1.DataService``: bulk reads and writes for pipelines (SPEC §9), behind the same error
boundary as the rest of the API. Thin: it converts requests, delegates to the engine's parts
(:class:`~sowdb.engine.read.snapshots.Snapshots`, :class:`~sowdb.engine.journal.ranges.JournalReads`,
:class:`~sowdb.engine.write.staging.Stages`), and encodes records as columns."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from sowdb.api import convert
from sowdb.api.service import Undecodable
from sowdb.api.servicer import Context, Servicer, authorization_of, error_boundary
from sowdb.config import is_regex_topic
from sowdb.engine import Entry, StageBuilder, StoredRecord
from sowdb.engine.access import Access
from sowdb.errors import InvalidArgument, PermissionDenied
from sowdb.expr import CompiledFilter
from sowdb_api.v1 import data_pb2 as pb


def record_columns(records: Sequence[StoredRecord]) -> pb.RecordColumns:
    """A batch of records as columns (each list built by one comprehension, copied in C)."""
    return pb.RecordColumns(
        topics=[r.topic for r in records],
        sow_keys=[r.sow_key for r in records],
        bookmarks=[r.bookmark for r in records],
        timestamps_us=[r.timestamp_us for r in records],
        data=[r.raw for r in records],
    )


def entry_columns(entries: Sequence[Entry]) -> pb.RecordColumns:
    """A batch of journal entries as columns (a transpose of the named tuples, in C); an
    operation's number is its journal op, as the enum's numbers equal the OP_* codes."""
    if not entries:
        return pb.RecordColumns()
    seqs, stamps, ops, _expiries, topics, keys, payloads = zip(*entries, strict=True)
    cols = pb.RecordColumns(topics=topics, sow_keys=keys, bookmarks=seqs, timestamps_us=stamps, data=payloads)
    cols.operations.extend(ops)
    return cols


def bulk_read(access: Access, topic: str, what: str) -> CompiledFilter | None:
    """The row entitlement a bulk read of ``topic`` runs under (A-2); None for every row.

    A snapshot or journal read of one topic needs its read right; of several (a regex, or every
    topic) an admin role, since a bulk export is an operator's act and the rows of each topic
    would need their own entitlement.

    Raises:
        PermissionDenied: the caller may not read this.
    """
    if access.everything:
        return None
    if not topic or is_regex_topic(topic):
        access.require_admin(f"read {what} of several topics (a regex or every topic); name one topic")
        return None
    access.require_read(topic)
    if access.join_filters(topic) is not None:  # its rows are a join of filtered sides, not a filter
        raise PermissionDenied(  # a joined view, or a topic derived from one
            f"read {what} of {topic!r} (a joined view's rows) with a query or subscription (row filters apply)"
        )
    return access.entitlement(topic)


class DataServicer(Servicer):
    """``sowdb.v1.DataService`` over an :class:`Engine`.

    Snapshot ids are unguessable (random); snapshots and stages belong to the user who opened
    or staged them, and to other users they do not exist."""

    service = "DataService"

    @error_boundary
    async def OpenSnapshot(
        self, request: pb.OpenSnapshotRequest, context: Context, access: Access
    ) -> pb.OpenSnapshotResponse:
        info = await self.engine.open_snapshot(
            request.topic,
            filter=request.filter,  # parsed on its own; the entitlement is applied apart (issue 26)
            entitlement=bulk_read(access, request.topic, "a snapshot"),
            known=access.known,
            bookmark=request.bookmark,
            lease_s=request.lease_seconds,
            owner=access,
        )
        return pb.OpenSnapshotResponse(
            snapshot_id=info.snapshot_id,
            bookmark=info.bookmark,
            record_count=info.record_count,
            records_scanned=info.records_scanned,
        )

    @error_boundary
    async def ReadSnapshot(
        self, request: pb.ReadSnapshotRequest, context: Context, access: Access
    ) -> AsyncIterator[pb.ReadSnapshotResponse]:
        r = request
        chunks = self.engine.read_snapshot(r.snapshot_id, r.partition, r.partitions, r.batch_size, user=access.user)
        async for chunk in chunks:
            yield pb.ReadSnapshotResponse(records=record_columns(chunk))

    @error_boundary
    async def CloseSnapshot(
        self, request: pb.CloseSnapshotRequest, context: Context, access: Access
    ) -> pb.CloseSnapshotResponse:
        return pb.CloseSnapshotResponse(closed=self.engine.close_snapshot(request.snapshot_id, user=access.user))

    @error_boundary
    async def ReadJournal(
        self, request: pb.ReadJournalRequest, context: Context, access: Access
    ) -> AsyncIterator[pb.ReadJournalResponse]:
        _whole_journal(access, request.topic)
        async for chunk in self.engine.read_journal(
            request.from_bookmark,
            request.to_bookmark,
            topic=request.topic,
            operations=list(request.operations),
            filter=request.filter,
            batch_size=request.batch_size,
        ):
            yield pb.ReadJournalResponse(entries=entry_columns(chunk))

    @error_boundary
    async def DescribeJournal(
        self, request: pb.DescribeJournalRequest, context: Context, access: Access
    ) -> pb.DescribeJournalResponse:
        _whole_journal(access, request.topic)
        r = await self.engine.describe_journal(request.after_bookmark, request.max_entries, request.topic)
        return pb.DescribeJournalResponse(
            trimmed_bookmark=r.trimmed, last_bookmark=r.last, end_bookmark=r.end, entries=r.entries
        )

    @error_boundary
    async def StageWrite(
        self, request_iterator: AsyncIterator[pb.StageWriteRequest], context: Context, access: Access
    ) -> pb.StageWriteResponse:
        builder: StageBuilder | None = None
        complete = False
        authorization = authorization_of(context)
        try:
            async for req in request_iterator:
                if isinstance(req, Undecodable):
                    raise req.error()
                fresh = self.auth.current(authorization, access)  # a reload holds for open streams
                if fresh is not access and builder is not None:
                    fresh.require_write(builder.topic)
                access = fresh
                if complete:
                    raise InvalidArgument("a request after the one marked complete", field="complete")
                if builder is None:
                    access.require_write(req.topic)
                    builder = self.engine.begin_stage(req.stage_id, req.topic, access)
                elif req.stage_id and req.stage_id != builder.stage_id:
                    raise InvalidArgument("a StageWrite call writes one stage", field="stage_id")
                messages = list(req.messages)
                builder.add(messages, convert.ttls(messages))
                complete = req.complete
            if builder is None:
                raise InvalidArgument("a StageWrite call needs at least one request", field="stage_id")
            if not complete:  # a cancelled call ends its requests the same way as a finished one
                raise InvalidArgument(
                    "the stage's last request must be marked complete; the stage was not kept", field="complete"
                )
            count = builder.seal()
        finally:
            if builder is not None:
                builder.discard()  # a no-op once sealed
        return pb.StageWriteResponse(stage_id=builder.stage_id, message_count=count)

    @error_boundary
    async def CommitStages(
        self, request: pb.CommitStagesRequest, context: Context, access: Access
    ) -> pb.CommitStagesResponse:
        access.require_write(request.topic)
        producer = (request.producer_id, request.producer_seq) if request.producer_id else None
        done = await self.engine.commit_stages(request.topic, list(request.stage_ids), producer, access)
        return pb.CommitStagesResponse(
            first_bookmark=done.first, last_bookmark=done.last, message_count=done.count, duplicate=done.duplicate
        )

    @error_boundary
    async def AbortStages(
        self, request: pb.AbortStagesRequest, context: Context, access: Access
    ) -> pb.AbortStagesResponse:
        return pb.AbortStagesResponse(
            aborted=self.engine.abort_stages(
                list(request.stage_ids),
                request.stage_id_prefix,
                None if access.everything else access.can_write,
                owner=access.user,
            )
        )


def _whole_journal(access: Access, topic: str) -> None:
    """Journal entries are whole messages of every kind (deletes too), which a row entitlement
    cannot be applied to entry by entry: a caller with one on the topic is refused.

    Raises:
        PermissionDenied: the caller may not read the topic's journal.
    """
    if bulk_read(access, topic, "the journal") is not None:  # the topic's row entitlement
        raise PermissionDenied(
            f"user {access.user!r} has a row entitlement on topic {topic!r}: its journal cannot be read "
            "(read its records with a snapshot or a query instead)",
            field="topic",
        )
