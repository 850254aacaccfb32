"""The engine: topics, the publish pipeline, queries, subscriptions, history, derived topics.

It never imports grpc: the protocol layer (``sowdb.api``) translates requests into the calls
below and domain errors (``sowdb.errors``) into gRPC statuses.
"""

from sowdb.engine.engine import Engine, InMessage, TopicSummary, system_clock
from sowdb.engine.query import GroupBegin, GroupEnd, QueryOptions, RecordBatch
from sowdb.engine.records import StoredRecord

__all__ = [
    "Engine",
    "GroupBegin",
    "GroupEnd",
    "InMessage",
    "QueryOptions",
    "RecordBatch",
    "StoredRecord",
    "TopicSummary",
    "system_clock",
]
