"""Running a query without holding the event loop: every step works in slices of a few
milliseconds and yields between them, so a ping or a small query is answered within tens of
milliseconds while a query over a million records runs, and a client's deadline (or its going
away) stops the work at the next slice.

The steps are the scan (filter, or the walk back of version chains for a point in the past),
the aggregation, the sort — chunks sorted one slice at a time, merged lazily while results are
sent — and the batching, which shapes records (``select``) one batch at a time and bounds each
batch by bytes as well as by count, so that no response can exceed the transport's limit.
"""

from __future__ import annotations

import asyncio
import heapq
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from itertools import islice
from typing import Any

from orjson import loads

from sowdb.engine.arena import AsOfHeads, SlotRecords
from sowdb.engine.records import StoredRecord
from sowdb.engine.state import version_at
from sowdb.errors import ResourceExhausted
from sowdb.expr import CompiledFilter

SLICE_S = 0.001
"""The longest stretch a query holds the event loop before it lets others run."""
CHUNK = 128
"""Records handled between two looks at the clock."""
FIRST_CHUNK = 8
"""Records a scan takes before its first look at the clock: a filter's cost is not known
before it runs, and 128 records of a costly one held the loop for over 100 ms."""
SORT_CHUNK = 8192
"""Records sorted in one go (~2 ms with byte keys); the sorted chunks are merged lazily."""
RECORD_OVERHEAD = 64
"""Bytes a record adds to a response beyond its data, topic and SowKey (tags, bookmark, time)."""


QUERY_BUDGET_S = 30.0
"""The longest one query may hold the event loop in all (its slices added up), past which it
ends ``RESOURCE_EXHAUSTED`` (issue 37, finding 7: 200 ``LIKE`` patterns in one reader's query
scanned for 12 s). Each evaluation has its own bounds (:mod:`sowdb.expr.budget`); this one
bounds their sum over a scan, so that no request takes the loop's time without end."""


class Slicer:
    """Lets the event loop run whenever the current slice has lasted :data:`SLICE_S`, and
    ends a request whose slices add up to more than ``budget_s`` (None: no bound)."""

    __slots__ = ("_busy", "_since", "budget_s")

    def __init__(self, budget_s: float | None = None) -> None:
        self._since = time.perf_counter()
        self._busy = 0.0
        self.budget_s = budget_s

    async def pause(self) -> None:
        now = time.perf_counter()
        if now - self._since >= SLICE_S:
            self._busy += now - self._since
            if self.budget_s is not None and self._busy > self.budget_s:
                raise ResourceExhausted(
                    f"the query took more than {self.budget_s:g} s of the server's time (its filter, order "
                    "or aggregation over the records it reads): narrow it with a key, an indexed term or top_n",
                    field="filter",
                )
            # Twice: a call waiting on the transport needs a loop iteration for its completion and
            # another for its continuation; one yield per slice would let it advance a step per slice.
            await asyncio.sleep(0)
            await asyncio.sleep(0)
            self._since = time.perf_counter()

    def resumed(self) -> None:
        """The request's generator resumed after a ``yield``: the time its consumer took (sending
        a batch, waiting for the client's flow control) is not this request's, and a slice
        starts now."""
        self._since = time.perf_counter()


async def scan(
    sources: Sequence[Sequence[StoredRecord]],
    flt: CompiledFilter | None,
    slicer: Slicer,
    *,
    point: tuple[int, int] | None = None,
    entitlements: Sequence[CompiledFilter | None] | None = None,
    keep: bool = False,
) -> tuple[list[StoredRecord], int]:
    """The records of ``sources`` that match ``flt``, and how many were looked at.

    Args:
        point: (sequence, timestamp) of a historical query: ``sources`` are version chains,
            each walked back to the version current at that point (H-2).
        entitlements: per source, the rows its caller may see (A-2); None: every row. The
            records of a source with an entitlement are not counted as looked at: the planner
            chose them (by a key, an index or the columns) from rows the caller may not see, so
            their count would answer questions about those rows (issue 26: a bisection on
            ``/orderId = 20 AND /pin > N`` read a hidden field in ~20 queries).
        keep: the query reads the matches' documents again (select, order_by, aggregation):
            each is kept while recent instead of decoded twice (issue 30).
    """
    matched: list[StoredRecord] = []
    scanned = 0
    step = FIRST_CHUNK  # records per look at the clock: more while cheap, fewer when costly (below)
    for n, records in enumerate(sources):
        ent = entitlements[n] if entitlements is not None else None
        # candidates the planner's columns decided exactly need not be filtered again
        match = None if flt is None or getattr(records, "settled", False) else flt.matches
        if isinstance(records, AsOfHeads) and _plain(flt) and _plain(ent):
            # the records current at the point already are scanned as a current state is
            exact = records.still.settled  # the columns decided the filter on them
            found, looked = await _scan_pinned(records.still, None if exact else match, ent, keep, slicer)
            matched.extend(found)
            scanned += looked
            records = records.walked
        if point is None and isinstance(records, SlotRecords) and _plain(flt) and _plain(ent):
            found, looked = await _scan_pinned(records, match, ent, keep, slicer)
            matched.extend(found)
            scanned += looked
            continue
        i = 0
        while i < len(records):
            began = time.perf_counter()
            chunk: Sequence[StoredRecord] = records[i : i + step] if i or len(records) > step else records
            i += len(chunk)
            if point is not None:
                seq, ts = point
                chunk = [v for v in [version_at(h, seq, ts) for h in chunk] if v is not None]
            # Each record decoded once and not kept (``r.kept or loads(r.raw)``: records.document
            # inlined): a scan reads each record once, and most do not match; with ``keep`` (the
            # query reads the matches again: select, order_by, aggregation) kept while recent.
            if ent is None:
                scanned += len(chunk)
                if match is None:
                    matched.extend(chunk)
                elif keep:
                    matched.extend([r for r in chunk if match(r.data, r)])
                else:
                    matched.extend([r for r in chunk if match(r.kept or loads(r.raw), r)])
            elif match is None:
                visible = ent.matches
                matched.extend([r for r in chunk if visible(r.kept or loads(r.raw), r)])
            else:  # the entitlement first: the caller's filter never runs on a row it may not see
                visible = ent.matches  # (issue 37, finding 9: its time told a hidden row's fields)
                matched.extend([r for r in chunk if visible(d := r.kept or loads(r.raw), r) and match(d, r)])
            # A chunk should last about a slice: a filter of 200 LIKEs (~1 ms a record) held the
            # loop 128 ms a chunk and raised others' point queries from 3 to 562 ms (issue 37,
            # finding 7). Shrink the chunk to what fits a slice; grow it back when cheap again.
            took = time.perf_counter() - began
            if took > SLICE_S and step > 1:
                step = max(1, int(step * SLICE_S / took))
            elif took < SLICE_S / 4 and step < CHUNK:
                step = min(CHUNK, step * 2)
            await slicer.pause()
    return matched, scanned


PINNED_CHUNK = 1024
"""Records of an arena a scan decodes in one ``orjson.loads`` (when a slice can afford them)."""


def _plain(flt: CompiledFilter | None) -> bool:
    """Whether ``flt`` reads nothing but the document (no SOW_KEY(), BOOKMARK() …)."""
    return flt is None or not flt.uses_metadata


async def _scan_pinned(
    records: SlotRecords,
    match: Callable[[Any, Any], Any] | None,
    ent: CompiledFilter | None,
    keep: bool,
    slicer: Slicer,
) -> tuple[list[StoredRecord], int]:
    """:func:`scan` of records in an arena whose filters read only the documents: a chunk's
    documents decoded in one call and a record made only for each match (issue 39), or, for a
    chunk whose records were all made recently (a repeated query), their own documents."""
    slots = records.slots
    decode, make, made = records.decode, records.make, records.made
    visible = ent.matches if ent is not None else None
    matched: list[StoredRecord] = []
    scanned = 0
    step, i = FIRST_CHUNK, 0
    while i < len(slots):
        began = time.perf_counter()
        chunk = slots[i : i + step]
        i += len(chunk)
        if visible is None:
            scanned += len(chunk)
        recs = made(chunk)
        if visible is None and match is None:  # nothing to test (the columns settled it): no decode
            matched.extend(recs if recs is not None else make(chunk))
        elif recs is not None:
            if visible is not None:
                recs = [r for r in recs if visible(r.kept or loads(r.raw), None)]
            if match is not None:
                recs = [r for r in recs if match(r.kept or loads(r.raw), None)]
            matched.extend(recs)
        else:
            at, docs = decode(chunk)
            if visible is not None:
                seen = [j for j, d in enumerate(docs) if visible(d, None)]
                docs = [docs[j] for j in seen]
                at = at[seen]
            if match is not None:
                hits = [j for j, d in enumerate(docs) if match(d, None)]
                at = at[hits]
                docs = [docs[j] for j in hits]
            matched.extend(make(at, docs if keep else None))
        took = time.perf_counter() - began
        if took > SLICE_S and step > 1:
            step = max(1, int(step * SLICE_S / took))
        elif took < SLICE_S / 2 and step < PINNED_CHUNK:  # a decode per chunk: fewer, larger ones
            step = min(PINNED_CHUNK, step * 2)
        await slicer.pause()
    return matched, scanned


async def in_slices(items: Iterable[Any], each: Callable[[Any], None], slicer: Slicer) -> None:
    """Call ``each`` on every item, letting the loop run between slices."""
    it = iter(items)
    while chunk := list(islice(it, CHUNK)):
        for item in chunk:
            each(item)
        await slicer.pause()


async def ordered(
    records: list[StoredRecord], key: Callable[[StoredRecord], bytes], slicer: Slicer, *, first: int | None = None
) -> Iterator[StoredRecord]:
    """``records`` in ``key`` order (only the ``first`` ones, when given), sorted a chunk at a
    time; a long result is merged lazily while it is sent."""
    keyed: list[list[tuple[bytes, StoredRecord]]] = []
    for i in range(0, len(records), SORT_CHUNK):
        chunk = records[i : i + SORT_CHUNK]
        pairs: list[tuple[bytes, StoredRecord]] = []
        for j in range(0, len(chunk), CHUNK):
            pairs.extend([(key(r), r) for r in chunk[j : j + CHUNK]])
            await slicer.pause()
        if first is not None and first < len(pairs):
            pairs = heapq.nsmallest(first, pairs)  # keys are unique: records are never compared
        else:
            pairs.sort()
        keyed.append(pairs)
        await slicer.pause()
    merged = heapq.merge(*keyed) if len(keyed) > 1 else iter(keyed[0] if keyed else ())
    out = (r for _, r in merged)
    return islice(out, first) if first is not None else out


def batches(
    records: Iterable[StoredRecord],
    size: int,
    max_bytes: int,
    shape: Callable[[StoredRecord], StoredRecord] | None = None,
) -> Iterator[list[StoredRecord]]:
    """Records in batches of at most ``size`` records and about ``max_bytes`` bytes (a record
    larger than that goes alone), each shaped by ``shape`` as its batch is made."""
    batch: list[StoredRecord] = []
    used = 0
    for rec in records:
        if shape is not None:
            rec = shape(rec)
        cost = len(rec.raw) + len(rec.sow_key) + len(rec.topic) + RECORD_OVERHEAD
        if batch and (len(batch) >= size or used + cost > max_bytes):
            yield batch
            batch, used = [], 0
        batch.append(rec)
        used += cost
    if batch:
        yield batch


async def stream_batches(batches: Iterator[list[StoredRecord]], slicer: Slicer) -> AsyncIterator[list[StoredRecord]]:
    """The batches, letting the loop run while they are made (a lazy merge or a ``select``
    may cost more per record than sending it)."""
    for batch in batches:
        yield batch
        slicer.resumed()  # sending it was not the query's work (nor counted in its budget)
        await slicer.pause()
