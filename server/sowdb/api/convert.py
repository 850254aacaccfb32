"""Conversions between protobuf messages and the engine's types — nothing else (the engine
validates what it is given)."""

from __future__ import annotations

from collections.abc import Sequence
from operator import methodcaller

from google.protobuf import duration_pb2

from sowdb.engine import QueryOptions, Replacement, SubscriptionOptions, TopicSummary
from sowdb_api.v1 import sow_pb2 as pb


def query_options(req: pb.SowRequest) -> QueryOptions:
    return QueryOptions(
        topic=req.topic,
        filter=req.filter,
        sow_keys=list(req.sow_keys),
        query_id=req.query_id,
        order_by=req.order_by,
        top_n=req.top_n if req.HasField("top_n") else None,
        skip_n=req.skip_n if req.HasField("skip_n") else None,
        batch_size=req.batch_size if req.HasField("batch_size") else None,
        bookmark=req.bookmark,
        grouping=list(req.grouping),
        projection=list(req.projection),
        select=req.select,
    )


def seconds(d: duration_pb2.Duration) -> float:
    return d.seconds + d.nanos / 1e9


_HAS_EXPIRATION = methodcaller("HasField", "expiration")


def ttls(messages: Sequence[pb.PublishMessage]) -> list[float | None] | None:
    """Per-message time to live, or None when no message sets one (the common case)."""
    if not any(map(_HAS_EXPIRATION, messages)):
        return None
    return [seconds(m.expiration) if m.HasField("expiration") else None for m in messages]


def duration(s: float) -> duration_pb2.Duration:
    d = duration_pb2.Duration()
    d.FromNanoseconds(round(s * 1e9))
    return d


KINDS = {"sow": pb.TOPIC_KIND_SOW, "view": pb.TOPIC_KIND_VIEW, "conflated": pb.TOPIC_KIND_CONFLATED}
_DURABILITY = {"persistent": pb.DURABILITY_PERSISTENT, "transient": pb.DURABILITY_TRANSIENT}


def topic_info(t: TopicSummary) -> pb.TopicInfo:
    info = pb.TopicInfo(
        name=t.name,
        kind=KINDS[t.kind],
        key=list(t.key),
        durability=_DURABILITY[t.durability],
        record_count=t.record_count,
        indexes=list(t.indexes),
        underlying=t.underlying,
        expiration=duration(t.expiration_s),
    )
    if t.history is not None:
        info.history.CopyFrom(pb.History(window=duration(t.history[0]), granularity=duration(t.history[1])))
    return info


def subscription_options(o: pb.SubscriptionOptions, *, deleted_events: bool = False) -> SubscriptionOptions:
    return SubscriptionOptions(
        oof=o.oof,
        delta=o.delta,
        no_empties=o.no_empties,
        send_keys=True,  # D-2: a delta always carries the key fields
        deleted_events=deleted_events and not o.oof,
        conflation_s=seconds(o.conflation) if o.HasField("conflation") else 0.0,
        conflation_key=tuple(o.conflation_key),
    )


def replacement(req: pb.ReplaceSubscriptionRequest) -> Replacement:
    return Replacement(
        filter=req.filter,
        options=subscription_options(req.options),
        order_by=req.order_by,
        top_n=req.top_n if req.HasField("top_n") else None,
        skip_n=req.skip_n if req.HasField("skip_n") else None,
    )
