"""The journal as the time axis, and what reads it.

``Journal`` (journal.py: bookmarks resolved to points, replays, retention), the replay of
journal entries as changes, ``JournalReads`` (ranges.py: the data service's journal ranges) and
start-up recovery. It depends on ``state`` only.
"""

from sowdb.engine.journal.journal import Journal, Position
from sowdb.engine.journal.ranges import Entry, JournalReads
from sowdb.engine.journal.recovery import (
    RecoveryReport,
    StoreDamaged,
    load_state,
    rebuild,
    recover,
)

__all__ = [
    "Entry",
    "Journal",
    "JournalReads",
    "Position",
    "RecoveryReport",
    "StoreDamaged",
    "load_state",
    "rebuild",
    "recover",
]
