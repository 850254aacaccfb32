"""Admitting a new subscription: its checks, its user's quota and the server-wide bound.

The writer's :class:`~sowdb.engine.live.placement.Placement` and a reader process's registry
(``sowdb.engine.feed``) make their subscriptions here, so a reader refuses what the writer
refuses, with the same errors.
"""

from __future__ import annotations

from collections.abc import Sequence

from sowdb.config import ServerConfig, is_regex_topic
from sowdb.engine.access import EVERYONE, Access, check_quota
from sowdb.engine.filters import request_filter
from sowdb.engine.live.hub import SubscriptionHub
from sowdb.engine.live.options import SubscriptionOptions
from sowdb.engine.live.subscription import Subscription
from sowdb.engine.state import check_topic_name, compile_topic_pattern
from sowdb.errors import InvalidArgument, ResourceExhausted
from sowdb.expr import Select

MAX_SUBSCRIPTIONS = 65_536  # all users' live subscriptions together (issue 37, finding 3); an admin has no quota


def new_subscription(
    hub: SubscriptionHub,
    config: ServerConfig,
    key_fields: dict[str, tuple[str, ...]],
    topic: str,
    filter: str,
    options: SubscriptionOptions,
    sub_id: str,
    owner: str,
    *,
    track: bool = False,
    check_name: bool = True,
    cls: type[Subscription] = Subscription,
    select: Select | None = None,
    sow_keys: Sequence[str] = (),
    access: Access = EVERYONE,
) -> Subscription:
    """A new subscription, not yet placed in ``hub``, counted against its user's
    ``max_subscriptions`` (in every process of a group: :meth:`SubscriptionHub.held_by`).

    Raises:
        InvalidArgument: a bad topic, filter or sub_id.
        ResourceExhausted: the caller holds its ``max_subscriptions`` already (issue 26), or the
            server its :data:`MAX_SUBSCRIPTIONS`.
    """
    if len(hub.subs) >= MAX_SUBSCRIPTIONS:  # beside each user's quota: all users together
        raise ResourceExhausted(
            f"the server holds {MAX_SUBSCRIPTIONS} subscriptions, its limit; end some, or try again later",
            field="topic",
        )
    check_quota(access, "max_subscriptions", hub.held_by(access.user))
    options.check()
    if check_name:
        check_topic_name(topic)
    if is_regex_topic(topic):
        compile_topic_pattern(topic)
    compiled = request_filter(filter)
    if sub_id and (len(sub_id) > 256 or not sub_id.isprintable()):
        raise InvalidArgument("sub_id must be at most 256 printable characters", field="sub_id")
    return cls(
        topic,
        compiled,
        options,
        sub_id=sub_id,
        owner=owner,
        key_fields=key_fields,
        track=track,
        select=select,
        sow_keys=frozenset(sow_keys) if sow_keys else None,
        access=access,
        max_records=config.subscriber_queue_records,
        max_bytes=config.subscriber_queue_bytes,
    )
