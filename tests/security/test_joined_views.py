"""Joined views (V-2) under security: a joined row holds fields of every topic it joins, so a
role reads a joined view only with read on each of those topics; and, as for any view (issue 37,
finding 10, ``test_views.py``), a role that reads one of them under a row filter reads the view
only where one of its roles names the view itself, its row filter then applying to the view's
rows."""

from __future__ import annotations

from typing import Any

import pytest

from sowdb_client import PermissionDeniedError
from tests.security.conftest import DESK_A, ROLES, TOPICS, USERS, StartSecured
from tests.support import take

JOINED_TOPICS: dict[str, Any] = {
    "topic": [*TOPICS["topic"], {"name": "desks", "key": ["/desk"]}],
    "view": [
        {
            "name": "by_desk",
            "underlying": "orders",
            "join": ["[orders]./desk = [desks]./desk"],
            "grouping": ["[orders]./desk"],
            "projection": ["[orders]./desk AS /desk", "[desks]./head AS /head", "SUM([orders]./qty) AS /qty"],
        }
    ],
}
JOINED_ROLES: list[dict[str, Any]] = [
    *ROLES,
    {"name": "no_desks", "read": ["orders", "by_desk"]},  # the view, but not every topic it joins
    {"name": "both", "read": ["orders", "desks", "by_desk"]},
    {"name": "desk_a_pattern", "read": ["orders", "desks", "^by_"], "filter": DESK_A},
    {"name": "desk_a_named", "read": ["orders", "desks", "by_desk"], "filter": DESK_A},
]
JOINED_USERS = {**USERS, **{r["name"]: [r["name"]] for r in JOINED_ROLES[len(ROLES) :]}}


async def start(start_secured: StartSecured) -> Any:
    s = await start_secured(topics=JOINED_TOPICS, roles=JOINED_ROLES, users=JOINED_USERS)
    async with s.client("admin") as admin:
        await admin.publish("desks", [{"desk": "A", "head": "Ann"}, {"desk": "B", "head": "Bea"}])
    return s


async def refused(client: Any, topic: str) -> None:
    """Every read path refuses ``topic``, naming it, and ListTopics leaves it out."""
    with pytest.raises(PermissionDeniedError, match=topic):
        await client.sow(topic).records()
    with pytest.raises(PermissionDeniedError, match=topic):
        await take(client.subscribe(topic), 1)
    with pytest.raises(PermissionDeniedError, match=topic):
        await take(client.sow_and_subscribe(topic), 1)
    assert topic not in [t.name for t in await client.list_topics()]


async def test_a_joined_view_needs_read_on_every_topic_it_joins(start_secured: StartSecured) -> None:
    s = await start(start_secured)
    async with s.client("no_desks") as no_desks, s.client("both") as both, s.client("admin") as admin:
        await refused(no_desks, "by_desk")
        rows = sorted(
            (r.json()["desk"], r.json()["head"], r.json()["qty"]) for r in await both.sow("by_desk").records()
        )
        assert rows == [("A", "Ann", 150), ("B", "Bea", 1100)]
        assert rows == sorted(
            (r.json()["desk"], r.json()["head"], r.json()["qty"]) for r in await admin.sow("by_desk").records()
        )


async def test_row_filters_of_joined_topics_keep_other_rows_out(start_secured: StartSecured) -> None:
    """A role under ``/desk = 'A'`` that matches the view by a pattern is refused (the view's
    aggregates are computed over desk B's rows too); one that names it reads it under its
    filter: desk A's row only."""
    s = await start(start_secured)
    async with s.client("desk_a_pattern") as pattern, s.client("desk_a_named") as named:
        await refused(pattern, "by_desk")
        assert [r.json() for r in await named.sow("by_desk").records()] == [{"desk": "A", "head": "Ann", "qty": 150}]
