"""Issue 37, finding 10: a view's aggregates are computed over every row of its topic.

A view grouped by ``/symbol`` with ``COUNT`` and ``MIN(/desk)`` showed ``reader`` (who sees desk
A's rows only) aggregates that counted desk B's rows. No row filter can be applied to an
aggregate, so the safe default: a role that reads a view's underlying topic under a row filter
may read the view only where one of its roles names the view itself (not a pattern that
happens to match it).
"""

from __future__ import annotations

from typing import Any

import pytest

from sowdb_client import PermissionDeniedError
from tests.security.conftest import ROLES, TOPICS, USERS, StartSecured
from tests.support import take

VIEW = {
    "name": "orders_by_desk",
    "underlying": "orders",
    "grouping": ["/desk"],
    "projection": ["/desk", "COUNT(/qty) AS /n", "MIN(/desk) AS /lowest"],
}
VIEW_TOPICS: dict[str, Any] = {
    **TOPICS,
    "view": [VIEW],
    "conflated_topic": [{"name": "orders_by_desk_5s", "underlying": "orders_by_desk", "interval": "5s"}],
}


async def test_a_role_reading_a_topic_under_a_row_filter_cannot_read_its_views(start_secured: StartSecured) -> None:
    """``reader`` reads ``orders`` under ``/desk = 'A'`` and (by the pattern ``^orders``) the
    view and its conflated copy: each read of either is refused, by every read path."""
    roles = [{**r, "read": ["^orders"]} if r["name"] == "reader" else r for r in ROLES]
    s = await start_secured(topics=VIEW_TOPICS, roles=roles)
    async with s.client("reader") as reader:
        assert sorted(r.json()["desk"] for r in await reader.sow("orders").records()) == ["A"] * 5
        for view in ("orders_by_desk", "orders_by_desk_5s"):
            with pytest.raises(PermissionDeniedError, match=view):
                await reader.sow(view).records()
            with pytest.raises(PermissionDeniedError, match=view):
                await take(reader.subscribe(view), 1)
            with pytest.raises(PermissionDeniedError, match=view):
                await take(reader.sow_and_subscribe(view), 1)
        assert [r.topic for r in await reader.sow("^orders").records()] == ["orders"] * 5  # the regex skips it
        names = [t.name for t in await reader.list_topics()]
        assert "orders_by_desk" not in names


async def test_a_view_named_by_a_role_is_readable(start_secured: StartSecured) -> None:
    """The operator's explicit grant: a role that names the view (here one without a row
    filter, so the aggregates are shown as they are) reads it, desk B's counts included."""
    roles: list[dict[str, Any]] = [*ROLES, {"name": "summary", "read": ["orders_by_desk"]}]
    users = {**USERS, "reader": ["reader", "summary"]}
    s = await start_secured(topics=VIEW_TOPICS, roles=roles, users=users)
    async with s.client("reader") as reader, s.client("admin") as admin:
        groups = sorted((r.json()["desk"], r.json()["n"]) for r in await reader.sow("orders_by_desk").records())
        assert groups == sorted((r.json()["desk"], r.json()["n"]) for r in await admin.sow("orders_by_desk").records())
        assert groups == [("A", 5), ("B", 5)]
        assert [r.json()["desk"] for r in await reader.sow("orders").records()] == ["A"] * 5  # its rows unchanged
