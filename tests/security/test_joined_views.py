"""Joined views (V-2) under security: a joined row holds fields of every topic it joins, so a
role reads a joined view only with read on each of those topics; and a role that reads one of
them under a row filter reads the view computed from the rows it may see only (A-2). The row
filters' own tests, live and randomized: ``test_joined_row_filters.py``."""

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


async def test_row_filters_of_joined_topics_apply_to_the_join(start_secured: StartSecured) -> None:
    """A role under ``/desk = 'A'`` reads the view by a pattern as well as by name: both get
    the join of the desk A rows, as if the view were computed over those rows alone."""
    s = await start(start_secured)
    async with s.client("desk_a_pattern") as pattern, s.client("desk_a_named") as named:
        for client in (pattern, named):
            rows = [r.json() for r in await client.sow("by_desk").records()]
            assert rows == [{"desk": "A", "head": "Ann", "qty": 150}]
