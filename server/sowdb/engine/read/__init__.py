"""The read path: queries prepared, planned, snapshotted and run in slices.

``QueryOptions``/``PreparedQuery`` (prepared.py), the planner (planner.py: how a filter's
records are found), ``Queries`` (queries.py: SOW queries, current or as of a bookmark), the
sliced execution and the data service's ``Snapshots``. It depends on ``state`` and ``journal``.
"""

from sowdb.engine.read.execution import CHUNK, RECORD_OVERHEAD, Slicer, batches
from sowdb.engine.read.planner import plan_candidates, plan_heads
from sowdb.engine.read.prepared import PreparedQuery, QueryOptions
from sowdb.engine.read.queries import Pinned, Queries, pin, readable_topics
from sowdb.engine.read.snapshots import Snapshots

__all__ = [
    "CHUNK",
    "RECORD_OVERHEAD",
    "Pinned",
    "PreparedQuery",
    "Queries",
    "QueryOptions",
    "Slicer",
    "Snapshots",
    "batches",
    "pin",
    "plan_candidates",
    "plan_heads",
    "readable_topics",
]
