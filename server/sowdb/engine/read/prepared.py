"""SOW queries (Q-1 … Q-9): validate once, snapshot atomically, scan, order, page, shape.

A query is prepared (every option checked, the filter compiled) before anything is read, so a
bad option never produces a half-sent result. Execution takes the snapshot of every topic it
reads in one synchronous step — the engine's single writer cannot run in between — so the
query sees exactly one sequence point (Q-2); the scan then proceeds in chunks and yields to the
event loop between them, so a long query does not stall publishers.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Any

import orjson

from sowdb.engine.bookmarks import AsOf
from sowdb.engine.events import GroupBegin, GroupEnd, QueryEvent, RecordBatch
from sowdb.engine.read.execution import QUERY_BUDGET_S, Slicer, batches, in_slices, ordered, scan, stream_batches
from sowdb.engine.read.planner import plan_candidates, plan_heads
from sowdb.engine.records import StoredRecord, shaped
from sowdb.engine.state import SowTopic
from sowdb.errors import ExpressionError, InvalidArgument
from sowdb.expr import (
    Aggregation,
    CompiledFilter,
    OrderBy,
    Select,
    compile_filter,
    parse_aggregation,
    parse_order_by,
    parse_select,
)

MAX_BATCH_SIZE = 10_000
DEFAULT_BATCH_SIZE = 1
DEFAULT_FRAME_BYTES = 4 * 1024 * 1024
"""Bytes of records per response when the server does not say (it says: half its message limit)."""

# Limits on what one request may ask the server to compute per record (each refused with
# INVALID_ARGUMENT naming it): an order_by over 2,000 paths, say, would cost seconds per 10k records.
MAX_ORDER_BY_FIELDS = 16
MAX_GROUPING = 16
MAX_PROJECTION = 256
MAX_SELECT_PATHS = 256


@dataclass(frozen=True)
class QueryOptions:
    """A SOW query as a client asks for it (the fields of ``SowRequest``)."""

    topic: str
    filter: str = ""
    sow_keys: Sequence[str] = ()
    query_id: str = ""
    order_by: str = ""
    top_n: int | None = None
    skip_n: int | None = None
    batch_size: int | None = None
    bookmark: str = ""
    grouping: Sequence[str] = ()
    projection: Sequence[str] = ()
    select: str = ""


def _expression(kind: str, text: str, parse: Any) -> Any:
    try:
        return parse(text)
    except ExpressionError as exc:
        raise exc.for_field(kind) from None


class PreparedQuery:
    """A validated query, ready to run against a set of topics."""

    def __init__(self, opts: QueryOptions) -> None:
        self.opts = opts
        if opts.batch_size is not None and not 1 <= opts.batch_size <= MAX_BATCH_SIZE:
            raise InvalidArgument(
                f"batch_size must be between 1 and {MAX_BATCH_SIZE}, got {opts.batch_size}", field="batch_size"
            )
        self.batch_size = opts.batch_size or DEFAULT_BATCH_SIZE
        if opts.skip_n is not None and opts.top_n is None:
            raise InvalidArgument("skip_n requires top_n (give the page size too)", field="skip_n")
        self.filter: CompiledFilter | None = (
            _expression("filter", opts.filter, compile_filter) if opts.filter.strip() else None
        )
        self.order: OrderBy | None = (
            _expression("order_by", opts.order_by, parse_order_by) if opts.order_by.strip() else None
        )
        self.select: Select | None = _expression("select", opts.select, parse_select) if opts.select.strip() else None
        self.aggregation: Aggregation | None = None
        if opts.grouping or opts.projection:
            self.aggregation = parse_aggregation(list(opts.grouping), list(opts.projection))
        self._check_limits()
        for i, key in enumerate(opts.sow_keys):
            if not key:
                raise InvalidArgument(f"sow_keys[{i}] is empty", field=f"sow_keys[{i}]")

    def _check_limits(self) -> None:
        """Raises:
        InvalidArgument: more order_by fields, grouping or projection items or select paths
            than a query may have (the work per record would stall the server).
        """
        counts = [
            ("order_by", len(self.order.parts) if self.order else 0, MAX_ORDER_BY_FIELDS, "fields"),
            ("grouping", self.aggregation.grouping_count if self.aggregation else 0, MAX_GROUPING, "expressions"),
            ("projection", len(self.aggregation.outputs) if self.aggregation else 0, MAX_PROJECTION, "items"),
            ("select", len(self.select.items) if self.select else 0, MAX_SELECT_PATHS, "paths"),
        ]
        for field, count, limit, what in counts:
            if count > limit:
                raise InvalidArgument(f"{field} has {count} {what}; a query may have at most {limit}", field=field)

    def snapshot(self, topics: Sequence[SowTopic]) -> list[Sequence[StoredRecord]]:
        """The records to scan, per topic, as of now; call with no await in between."""
        out: list[Sequence[StoredRecord]] = []
        flt = self.filter
        for topic in topics:
            if self.opts.sow_keys:
                get = topic.records.get
                out.append([r for r in map(get, dict.fromkeys(self.opts.sow_keys)) if r is not None])
                continue
            found = plan_candidates(topic, flt) if flt is not None else None
            out.append(topic.snapshot() if found is None else found)
        return out

    def snapshot_heads(self, topics: Sequence[SowTopic], as_of: AsOf) -> list[Sequence[StoredRecord]]:
        """The version chains to walk back for a historical query, as of now (no await in
        between, like :meth:`snapshot`). Indexes describe only the current state, so every
        chain of the topic is a candidate, unless the filter fixes every key field."""
        out: list[Sequence[StoredRecord]] = []
        flt = self.filter
        for topic in topics:
            if topic.name in as_of.gone:
                out.append([])
            elif self.opts.sow_keys:
                heads = (topic.head(k) for k in dict.fromkeys(self.opts.sow_keys))
                out.append([h for h in heads if h is not None])
            else:
                found = plan_heads(topic, flt) if flt is not None else None
                out.append(topic.heads_at(*as_of.walk, flt) if found is None else found)
        return out

    async def run(
        self,
        sources: Sequence[Sequence[StoredRecord]],
        bookmark: int,
        now_us: int,
        *,
        as_of: AsOf | None = None,
        frame_bytes: int = DEFAULT_FRAME_BYTES,
        entitlements: Sequence[CompiledFilter | None] | None = None,
    ) -> AsyncIterator[QueryEvent]:
        """Scan the snapshot and yield group_begin, record batches, group_end, working in slices
        (:mod:`sowdb.engine.read.execution`) so that the event loop is never held for long.

        With ``as_of``, ``sources`` are version chains and each is walked back to the point.
        Batches hold at most ``batch_size`` records and about ``frame_bytes`` bytes;
        ``entitlements`` (per source) hide the rows a caller may not see (A-2).
        """
        opts = self.opts
        slicer = Slicer(QUERY_BUDGET_S)
        yield GroupBegin(opts.query_id, bookmark)
        slicer.resumed()  # its sending, and a sync cluster's wait for the bookmark, are not the query's
        point = None if as_of is None else as_of.walk
        reads_again = self.select is not None or self.order is not None or self.aggregation is not None
        matched, scanned = await scan(
            sources, self.filter, slicer, point=point, entitlements=entitlements, keep=reads_again
        )
        n_matched = len(matched)
        results = await self._aggregate(matched, bookmark, now_us, slicer) if self.aggregation else matched
        top, skip = opts.top_n, opts.skip_n or 0
        returned = len(results[skip:]) if top is None else len(results[skip : skip + top])
        select = self.select
        shape = None if select is None else (lambda r: shaped(r, select))
        out = await self._page(results, slicer)
        async for batch in stream_batches(batches(out, self.batch_size, frame_bytes, shape), slicer):
            yield RecordBatch(batch)
        yield GroupEnd(opts.query_id, returned, n_matched, scanned)

    async def _page(self, results: list[StoredRecord], slicer: Slicer) -> Iterator[StoredRecord]:
        """Order (Q-7) and cut ``top_n`` / ``skip_n``. With a page but no ``order_by``, the
        records are taken in SowKey order, so that a query and a live page (P-1) of the same
        options hold the same records; ties are broken by SowKey alike (:func:`page_key`)."""
        top, skip = self.opts.top_n, self.opts.skip_n or 0
        if self.order is None and top is None and not skip:
            return iter(results)  # no order asked for: the order is unspecified
        first = None if top is None else skip + top
        out = await ordered(results, page_key(self.order), slicer, first=first)
        return islice(out, skip, None)

    async def _aggregate(
        self, matched: list[StoredRecord], bookmark: int, now_us: int, slicer: Slicer
    ) -> list[StoredRecord]:
        agg = self.aggregation
        assert agg is not None
        groups: dict[tuple[Any, ...], tuple[str, Any]] = {}

        def add(r: StoredRecord) -> None:
            assert r.data is not None
            key = agg.group_key(r.data, r)
            entry = groups.get(key)
            if entry is None:
                entry = groups[key] = (r.topic, agg.new_group())
            entry[1].add(r.data, r)

        await in_slices(matched, add, slicer)
        out: list[StoredRecord] = []

        def result(item: tuple[tuple[Any, ...], tuple[str, Any]]) -> None:
            key, (topic, group) = item
            data = group.result()
            out.append(
                StoredRecord(topic, orjson.dumps(list(key)).decode(), data, orjson.dumps(data), bookmark, now_us)
            )

        await in_slices(groups.items(), result, slicer)
        return out


def page_key(order: OrderBy | None) -> Callable[[StoredRecord], bytes]:
    """The one order of query results and live pages: ``order_by`` as bytes
    (:meth:`OrderBy.byte_key`, self-delimiting), then the SowKey, then the topic (regex
    queries); the SowKey alone without ``order_by``. Byte keys sort with one ``memcmp`` per
    comparison, an order of magnitude faster than nested tuples."""
    if order is None:
        return lambda r: r.sow_key.encode() + b"\x00" + r.topic.encode()
    byte_key = order.byte_key
    return lambda r: byte_key(r.data or {}) + r.sow_key.encode() + b"\x00" + r.topic.encode()
