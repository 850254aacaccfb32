"""Live subscriptions: placed, held, evaluated, paged, streamed, and their one registry.

``SubscriptionHub`` (hub.py) owns every live subscription and dispatches changes to them;
``Placement`` places, replaces and removes them; ``Subscription`` evaluates each change;
``pages`` keeps paginated result sets; ``SubscriptionStream`` is a subscription's life as
engine events; ``gate`` holds deliveries and queries' results on a ``sync`` primary until the
replicas hold them (SPEC §13). It depends on ``state``, ``journal`` and ``read``.
"""

from sowdb.engine.live.admission import new_subscription
from sowdb.engine.live.gate import committed_results
from sowdb.engine.live.hub import SubscriptionHub
from sowdb.engine.live.loop_load import LOAD, LoopLoad
from sowdb.engine.live.options import Replacement, SowAndSubscribeArgs, SubscribeArgs, SubscriptionOptions
from sowdb.engine.live.pages import PageSets
from sowdb.engine.live.placement import Placement
from sowdb.engine.live.private import is_private, restricted_join_name
from sowdb.engine.live.streams import SubscriptionStream
from sowdb.engine.live.subscription import Subscription

__all__ = [
    "LOAD",
    "LoopLoad",
    "PageSets",
    "Placement",
    "Replacement",
    "SowAndSubscribeArgs",
    "SubscribeArgs",
    "Subscription",
    "SubscriptionHub",
    "SubscriptionOptions",
    "SubscriptionStream",
    "committed_results",
    "is_private",
    "new_subscription",
    "restricted_join_name",
]
