"""Another process reading an arena: the records as of the last commit, read-only.

A reader maps the writer's files read-only and copies nothing. Every read starts from a
consistent copy of the header (its seqlock) and sees the slots born at or before its committed
bookmark and not ended by then: what the writer has written since, committed or not, is born
later and invisible, so no lock is needed. Two things can still change under a read, and the
header says when: a file replaced by a larger one (the read maps the new one and starts over)
and a compaction (the generation moves; a point read starts over, a scan raises
:class:`~sowdb.engine.arena.view.StalePin`, as the versions it saw may be freed).
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from numpy.typing import NDArray

from sowdb.engine.arena.header import Header, State
from sowdb.engine.arena.keys import KeyTable
from sowdb.engine.arena.pins import SharedPins
from sowdb.engine.arena.segments import Segments
from sowdb.engine.arena.slot_records import SlotRecords
from sowdb.engine.arena.slots import Slots
from sowdb.engine.arena.view import ArenaView, Pin, StalePin
from sowdb.engine.records import StoredRecord

T = TypeVar("T")
TRIES = 1000


class ArenaBusy(RuntimeError):
    """The writer kept changing what a read needed (a read starts over at most :data:`TRIES` times)."""


class ArenaReader(ArenaView):
    """An arena's records in a process other than its writer's.

    Attributes:
        state: the header as last read.
    """

    def __init__(self, directory: Path | str, topic: str = "") -> None:
        self.directory, self.topic = Path(directory), topic
        self.header = Header(self.directory / "header", create=False)
        self.json = Segments(self.directory, "json", sep=b",")
        self.keys = Segments(self.directory, "key")
        self.state = State(0, -1, 0, 0, 0, 0, 0, 0, 0)
        self._pins: SharedPins | None = None
        self._sync()

    @property
    def committed(self) -> int:
        return self._sync().committed

    @property
    def live_count(self) -> int:
        return self._sync().live

    def pin(self, bookmark: int | None = None) -> Pin:
        """The records as of ``bookmark`` (default: the last commit); a scan of it raises
        :class:`StalePin` if a compaction runs meanwhile.

        Raises:
            StalePin: below the floor, or above the last commit.
        """
        st = self._sync()
        at = st.committed if bookmark is None else bookmark
        if not st.floor <= at <= st.committed:
            raise StalePin(f"bookmark {at} is outside [{st.floor}, {st.committed}]")
        return Pin(self, at, st.high, st.gen)

    def check(self, pin: Pin) -> None:
        st = self._sync()
        if st.gen != pin.gen:
            raise StalePin(f"a compaction ran while the read at bookmark {pin.bookmark} went on")

    def check_bookmark(self, at: int) -> None:
        st = self.state
        if not st.floor <= at <= st.committed:
            raise StalePin(f"bookmark {at} is outside [{st.floor}, {st.committed}]")

    # the point reads, each over one consistent state (at the last commit unless ``at``)

    def get(self, key: bytes, at: int | None = None) -> int:
        return self._read(lambda st: ArenaView.get(self, key, st.committed if at is None else at))

    def versions(self, key: bytes) -> list[int]:
        return self._read(lambda st: ArenaView.versions(self, key))

    def raw(self, slot: int) -> bytes:
        return self._read(lambda st: ArenaView.raw(self, slot))

    def key(self, slot: int) -> bytes:
        return self._read(lambda st: ArenaView.key(self, slot))

    def record(self, slot: int) -> StoredRecord:
        return self._read(lambda st: ArenaView.record(self, slot))

    # ---------------------------------------------------------------------- held reads (pins)

    def hold(self, slot: int, bookmark: int) -> bool:
        """Pin ``bookmark`` for reader process ``slot`` in the arena's shared pins, so that the
        writer's compactions spare what a read at it sees; False when it is too old already
        (below the floor of a compaction that ran before the pin was seen: read elsewhere).
        ``bookmark`` 0 lets go. Call it again with an older bookmark to pin that too."""
        if self._pins is None:
            self._pins = SharedPins(self.directory, create=False)
        before = int(self._pins.values[slot])
        self._pins.hold(slot, bookmark)  # then the fence: the header read next sees a compaction
        if bookmark == 0:
            return True
        st = self._sync()  # waits out a compaction that started before the pin was seen
        if st.floor <= bookmark:
            return True
        self._pins.hold(slot, before)  # what the slot held still holds for the reads at it
        return False

    def visible(self, bookmark: int) -> NDArray[np.int64]:
        """The slots a read at ``bookmark`` sees (held: :meth:`hold`), ascending."""

        def scan(st: State) -> NDArray[np.int64]:
            s = self.slots
            died = s.died[: st.high].copy()  # died before born: a slot being reused shows as unborn
            return np.flatnonzero((s.born[: st.high] <= bookmark) & (died > bookmark)).astype(np.int64)

        return self._read(scan)

    def records(self, slots: NDArray[np.int64]) -> list[StoredRecord]:
        """The versions in ``slots`` (visible at a held bookmark), made now, in that order; their
        places read again when a compaction moved them meanwhile."""
        return self._read(lambda st: ArenaView.make_records(self, slots))

    def live_at(self, keys: Sequence[bytes], bookmark: int) -> list[int]:
        """The slot of each key visible at ``bookmark`` (held), skipping keys without one."""
        found = (self.get(k, bookmark) for k in keys)
        return [s for s in found if s >= 0]

    # ---------------------------------------------------------------------------------- inside

    def _sync(self) -> State:
        """Read the header (waiting out a compaction) and map the files it names."""
        for _ in range(TRIES):
            st = self.header.read()
            if st.gen & 1:
                time.sleep(0.001)
                continue
            try:
                if st.gen != self.state.gen:
                    self.json.forget()  # segments may have been dropped
                    self.keys.forget()
                if st.slots_file != self.state.slots_file:
                    self.slots = Slots(self.directory, st.slots_file, st.slots_cap)
                if st.table_file != self.state.table_file:
                    self.table = KeyTable(self.directory, st.table_file, st.table_mask)
            except FileNotFoundError:  # replaced meanwhile: the header names the new one
                continue
            self.state = st
            return st
        raise ArenaBusy(f"the arena in {self.directory} kept changing")

    def _read(self, op: Callable[[State], T]) -> T:
        """``op`` over one state: again over a new one if the writer replaced a file or
        compacted meanwhile (what it read may then be out of date)."""
        for _ in range(TRIES):
            st = self._sync()
            try:
                out = op(st)
            except (FileNotFoundError, IndexError):  # a dropped segment, a slot past the old file
                continue
            now = self.header.read()
            if (now.gen, now.slots_file, now.table_file) == (st.gen, st.slots_file, st.table_file):
                return out
        raise ArenaBusy(f"the arena in {self.directory} kept changing")


class HeldRecords(SlotRecords):
    """The records a reader's query reads: slots of an arena visible at one bookmark, made a
    slice at a time as the scan reaches them; holding it keeps the bookmark pinned."""

    def __init__(self, arena: ArenaReader, slots: NDArray[np.int64], release: Callable[[], None]) -> None:
        self.arena, self.slots = arena, slots
        weakref.finalize(self, release)

    def make(self, slots: NDArray[np.int64], docs: list[Any] | None = None) -> list[StoredRecord]:
        return self.arena.records(slots)

    def decode(self, slots: NDArray[np.int64]) -> tuple[NDArray[np.int64], list[Any]]:
        arena = self.arena
        return arena._read(lambda st: ArenaView.decode(arena, slots))  # again if a compaction moved them


class AtPoint:
    """A topic's records at one bookmark as R-1's re-scoping reads them (``values``, ``get``)."""

    def __init__(self, records: HeldRecords, at: int) -> None:
        self.records, self.at = records, at

    def values(self) -> Iterable[StoredRecord]:
        return self.records

    def get(self, sow_key: str) -> StoredRecord | None:
        arena = self.records.arena
        slot = arena.get(sow_key.encode(), self.at)
        return None if slot < 0 else arena.records(np.asarray([slot], np.int64))[0]
