"""A run of an arena's slots read as records: the sequence a scan takes, made a slice at a time.

A query scans a ``Sequence[StoredRecord]``; over an arena it holds slot ids only, and the records
are made when the scan reaches them (a filtered scan decodes a chunk's documents at once and
makes records of its matches only: :meth:`SlotRecords.decode`). The writer's snapshots (``state.arena_records``) and a
reader process's held reads (:mod:`.reader`) differ in how a record is made (the writer keeps
the recent ones) and what holding the sequence pins; this is what they share.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import chain
from typing import Any, overload

import numpy as np
from numpy.typing import NDArray

from sowdb.engine.records import StoredRecord

RUN = 1024
"""Records made at a time when the sequence is iterated."""


class SlotRecords(Sequence[StoredRecord]):
    """Records as ``slots``: indexing or slicing makes the records asked for."""

    slots: NDArray[np.int64]
    settled = False
    """The query planner's columns decided these exactly: a scan need not filter them again."""

    def make(self, slots: NDArray[np.int64], docs: list[Any] | None = None) -> list[StoredRecord]:
        """The records of ``slots``, in that order (``docs``: their documents, decoded already)."""
        raise NotImplementedError

    def one(self, slot: int) -> StoredRecord:
        return self.make(np.asarray([slot], np.int64))[0]

    def made(self, slots: NDArray[np.int64]) -> list[StoredRecord] | None:
        """The records of ``slots`` when they are all made already (kept recently), else None."""
        return None

    def decode(self, slots: NDArray[np.int64]) -> tuple[NDArray[np.int64], list[Any]]:
        """The documents of ``slots`` in one decode, the slots in the order their bytes lie: a
        scan filters a chunk's documents and makes records of its matches only."""
        raise NotImplementedError

    def __len__(self) -> int:
        return len(self.slots)

    @overload
    def __getitem__(self, i: int) -> StoredRecord: ...

    @overload
    def __getitem__(self, i: slice) -> list[StoredRecord]: ...

    def __getitem__(self, i: int | slice) -> StoredRecord | list[StoredRecord]:
        if isinstance(i, slice):
            return self.make(self.slots[i])
        return self.one(int(self.slots[i]))

    def __iter__(self) -> Iterator[StoredRecord]:
        for start in range(0, len(self.slots), RUN):
            yield from self.make(self.slots[start : start + RUN])

    def __bool__(self) -> bool:
        return len(self.slots) > 0


class AsOfHeads(Sequence[StoredRecord]):
    """The version chains of a historical query over an arena (H-2), in two parts: ``still``,
    the current records that were current at the point already, as slots (a scan decodes them
    in chunks and walks nothing), then ``walked``, the heads to walk back to the point."""

    def __init__(self, still: SlotRecords, walked: list[StoredRecord]) -> None:
        self.still, self.walked = still, walked

    def __len__(self) -> int:
        return len(self.still) + len(self.walked)

    @overload
    def __getitem__(self, i: int) -> StoredRecord: ...

    @overload
    def __getitem__(self, i: slice) -> list[StoredRecord]: ...

    def __getitem__(self, i: int | slice) -> StoredRecord | list[StoredRecord]:
        n = len(self.still)
        if isinstance(i, slice):
            start, stop, step = i.indices(len(self))
            assert step == 1, "a scan takes runs"
            first = self.still[start:stop] if start < n else []
            return [*first, *self.walked[max(start - n, 0) : max(stop - n, 0)]]
        i = i + len(self) if i < 0 else i
        return self.still[i] if i < n else self.walked[i - n]

    def __iter__(self) -> Iterator[StoredRecord]:
        return chain(self.still, self.walked)
