"""The private views of aggregated subscriptions (Q-8 live): how they are named and recognised.

An aggregated subscription follows a view of its own, attached to the topic registry like a
configured view but under a name no client can write (topic names may not hold ``\\x00``,
``state.registry.check_topic_name``), so no pattern reaches it and no caller can name it. This
module is the one place that knows that naming; the live registry (``registry.py``) owns which
subscription follows which private view.
"""

from __future__ import annotations

import secrets

PREFIX = "\x00aggregate "
JOINED = "\x00joined "  # a joined view's copy for readers under row filters (state/restricted_joins.py)


def private_view_name() -> str:
    """A fresh, unguessable name for a private view."""
    return f"{PREFIX}{secrets.token_hex(8)}"


def restricted_join_name() -> str:
    """A fresh, unguessable name for a restricted copy of a joined view (V-2, A-2)."""
    return f"{JOINED}{secrets.token_hex(8)}"


def is_private(topic: str) -> bool:
    """Whether ``topic`` names a private view (no subscription by pattern or right reaches it)."""
    return topic.startswith((PREFIX, JOINED))
