"""How far a server's start-up has come: what ``sowd`` answers while it loads its state.

Loading a big store takes minutes (J-3: every record is read into memory). The server listens
and answers during that time — every call with UNAVAILABLE and this progress, the health service
with NOT_SERVING, ``/metrics`` with ``sowdb_ready 0`` — rather than leaving callers hanging on a
port that accepts connections but answers nothing (issue 36).

The load runs on a thread of its own while the event loop answers; the figures here are read
from that loop, without a lock: the number of records loaded is the length of the topics' record
maps, read as they grow (``len`` of a dict is one step under the GIL), so the load itself does no
bookkeeping for it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sized
from pathlib import Path
from typing import Protocol

HOLD_ENV = "SOWDB_TEST_HOLD_LOAD"
"""For tests only: a file; while it exists, loading waits before its first record. A test then
sees a start-up in progress for as long as it needs, without racing a load (the records are
counted, the port answers), and lets it go on by removing the file."""


class _Loaded(Protocol):
    """A topic as loading fills it (a :class:`~sowdb.engine.state.SowTopic`)."""

    @property
    def persistent(self) -> bool: ...

    @property
    def records(self) -> Sized: ...


class StartProgress:
    """The start-up's phase and counts, set by :meth:`Engine.open` and the server.

    Attributes:
        ready: the state is loaded and the server serves.
        total: records the store holds (the persistent topics' counts), known once loading began.
    """

    def __init__(self, hold: str | None = None) -> None:
        """``hold``: :data:`HOLD_ENV`'s file, if set."""
        self._hold = Path(hold) if hold else None
        self.ready = False
        self.total = 0
        self._phase = "opening the store"
        self._topics: Mapping[str, _Loaded] = {}

    def recovering(self) -> None:
        """The journal is being checked and the store brought level with it (J-2)."""
        self._phase = "recovering the journal"

    def loading(self, total: int, topics: Mapping[str, _Loaded]) -> None:
        """Records are being read into ``topics``; ``total`` of them in all."""
        self.total = total
        self._topics = topics
        self._phase = ""
        while self._hold is not None and self._hold.exists():
            time.sleep(0.05)

    def done(self) -> None:
        """Loaded: the server serves."""
        self.ready = True

    @property
    def loaded(self) -> int:
        """Records loaded so far (all of them once ready)."""
        if self.ready:
            return self.total
        return min(self.total, sum(len(t.records) for t in list(self._topics.values()) if t.persistent))

    def message(self) -> str:
        """One line for a caller, e.g. ``starting: 120000 of 500000 records loaded``."""
        if self.ready:
            return "ready"
        if self._phase:
            return f"starting: {self._phase}"
        return f"starting: {self.loaded} of {self.total} records loaded"
