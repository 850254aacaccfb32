"""The engine: topics, the publish pipeline, queries, subscriptions, history, derived topics.

It never imports grpc: the protocol layer (``sowdb.api``) translates requests into the calls of
:class:`Engine` and domain errors (``sowdb.errors``) into gRPC statuses. The map of the modules
is ``README.md`` beside this file.
"""

from sowdb.engine.clock import Clock, system_clock
from sowdb.engine.engine import Engine
from sowdb.engine.events import (
    Completed,
    Deliveries,
    GroupBegin,
    GroupEnd,
    Heartbeat,
    QueryEvent,
    RecordBatch,
    StreamEvent,
    Subscribed,
)
from sowdb.engine.live.options import SubscriptionOptions
from sowdb.engine.live.placement import Replacement
from sowdb.engine.live.streams import SubscriptionStream
from sowdb.engine.read.prepared import QueryOptions
from sowdb.engine.records import StoredRecord
from sowdb.engine.state.registry import TopicSummary
from sowdb.engine.write.messages import InMessage

__all__ = [
    "Clock",
    "Completed",
    "Deliveries",
    "Engine",
    "GroupBegin",
    "GroupEnd",
    "Heartbeat",
    "InMessage",
    "QueryEvent",
    "QueryOptions",
    "RecordBatch",
    "Replacement",
    "StoredRecord",
    "StreamEvent",
    "Subscribed",
    "SubscriptionOptions",
    "SubscriptionStream",
    "TopicSummary",
    "system_clock",
]
