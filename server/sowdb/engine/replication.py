"""The engine's replication port (SPEC §13): everything a cluster node may do with its engine,
and nothing more.

A node ships the primary's journal and applies it on replicas, keeps the epoch history,
copies checkpoints, and moves the delivery gate to the cluster's committed point. Before this
port, ``sowdb.cluster`` reached into the writer and the store for those; now the cluster holds
a :class:`ReplicationPort` and ``tests/test_architecture.py`` checks it touches the engine
through nothing else, so the engine's insides can change (the record arena, reader processes)
without the cluster noticing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import TYPE_CHECKING

from sowdb.config import Config
from sowdb.engine.access import EVERYONE
from sowdb.engine.journal import rebuild
from sowdb.engine.write import Refreshed
from sowdb.storage.epochs import EpochStart, begin_epoch, epoch_history, write_epoch_history
from sowdb.storage.keys import JournalEntry

if TYPE_CHECKING:
    from sowdb.engine.engine import Acknowledge, Engine

__all__ = ["EpochStart", "JournalEntry", "ReplicationPort", "rebuild"]


class ReplicationPort:
    """One engine, as a cluster node sees it."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    @property
    def config(self) -> Config:
        return self._engine.config

    # --- positions ---------------------------------------------------------------------------

    @property
    def last_seq(self) -> int:
        """The last bookmark written (or applied)."""
        return self._engine.writer.last_seq

    @property
    def last_ts(self) -> int:
        """The timestamp of the last entry written (µs)."""
        return self._engine.writer.last_ts

    def clock(self) -> int:
        """The engine's clock (µs): the node's own while it leads, the journal's otherwise."""
        return self._engine.clock()

    # --- the journal -------------------------------------------------------------------------

    def entry(self, bookmark: int) -> JournalEntry | None:
        """The journal's entry at ``bookmark`` (None: none there)."""
        return self._engine.store.journal_entry(bookmark) if bookmark else None

    def producer_log(self, after: int, upto: int) -> list[tuple[int, str, int]]:
        """The producers' (J-4) last sequences of the batches that end in (after, upto]."""
        return list(self._engine.store.producer_log(after, upto))

    def read_journal(self, after: int, upto: int, *, batch_size: int) -> AsyncIterator[list[JournalEntry]]:
        """The entries in (after, upto], ``batch_size`` at a time."""
        return self._engine.read_journal(after, upto, batch_size=batch_size)

    def apply(self, entries: Sequence[JournalEntry], producers: Sequence[tuple[int, str, int]]) -> int:
        """Apply the primary's entries as they are (a replica): returns the last bookmark held."""
        return self._engine.writer.apply_replicated(entries, producers)

    def epoch_history(self) -> list[EpochStart]:
        return epoch_history(self._engine.store)

    def adopt_epoch_history(self, history: Sequence[EpochStart]) -> None:
        """The primary's history describes this journal (a prefix of its own): keep it."""
        write_epoch_history(self._engine.store, history)

    def begin_epoch(self, epoch: int, node: str) -> None:
        """Record that ``node`` leads at ``epoch`` from the next bookmark (before its first write)."""
        begin_epoch(self._engine.store, epoch, node, self.last_seq)

    def journal_after(self, bookmark: int) -> Iterator[JournalEntry]:
        """Every entry after ``bookmark``, read from the store (a thread's work: it blocks)."""
        return self._engine.store.iter_journal(bookmark)

    def checkpoint(self, directory: str) -> tuple[str, int, int]:
        """A consistent copy of the store (a replica catching up copies it)."""
        return self._engine.checkpoint(directory, EVERYONE)

    def refresh_conflated(self, topic: str, at_us: int) -> None:
        self._engine.refresh_conflated(topic, at_us)

    def on_refresh(self, refreshed: Refreshed) -> None:
        """Be told of each conflated topic's refresh (a primary ships them to its replicas)."""
        self._engine.writer.refreshed = refreshed

    # --- the committed point (the cluster's commit owner is the only caller) -------------------

    def guard_writes(self, check: Callable[[], None], acknowledge: Acknowledge) -> None:
        self._engine.guard_writes(check, acknowledge)

    def deliver_upto(self, committed: int | None) -> None:
        self._engine.deliver_upto(committed)

    def shown_upto(self) -> int:
        return self._engine.shown_upto()

    def hold_reads(self, within_s: float | None) -> None:
        self._engine.hold_reads(within_s)
