"""The engine: topics, the publish pipeline, queries, subscriptions, history, derived topics.

It never imports grpc: the protocol layer (``sowdb.api``) translates requests into the calls of
:class:`Engine` and domain errors (``sowdb.errors``) into gRPC statuses. The map of the modules
is ``README.md`` beside this file.
"""

from sowdb.engine.clock import Clock, FollowingClock, system_clock
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
from sowdb.engine.feed import Feed
from sowdb.engine.journal import Entry
from sowdb.engine.live import LOAD, LoopLoad, Replacement, SowAndSubscribeArgs, SubscriptionOptions, SubscriptionStream
from sowdb.engine.read import QueryOptions
from sowdb.engine.reader import ReaderLive
from sowdb.engine.records import StoredRecord
from sowdb.engine.state import TopicSummary
from sowdb.engine.write import InMessage, StageBuilder

__all__ = [
    "LOAD",
    "Clock",
    "Completed",
    "Deliveries",
    "Engine",
    "Entry",
    "Feed",
    "FollowingClock",
    "GroupBegin",
    "GroupEnd",
    "Heartbeat",
    "InMessage",
    "LoopLoad",
    "QueryEvent",
    "QueryOptions",
    "ReaderLive",
    "RecordBatch",
    "Replacement",
    "SowAndSubscribeArgs",
    "StageBuilder",
    "StoredRecord",
    "StreamEvent",
    "Subscribed",
    "SubscriptionOptions",
    "SubscriptionStream",
    "TopicSummary",
    "system_clock",
]
