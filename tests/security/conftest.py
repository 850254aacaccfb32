"""A secured sowd for the hostile probes of issue 26 (leaks, DoS, namespaces, revocation).

Roles, as the issue names them: ``reader`` reads ``orders`` with the row filter
``/desk = 'A'``; ``trader`` reads and writes ``orders`` under the same filter (the README's
``fx_trader`` pattern); ``writer`` writes ``orders`` only; ``norights`` has no role at all;
``admin`` does everything. Each user is named after its role and has its own token
(:data:`TOKENS`). ``orders`` holds desk A rows (orderIds 1-5) and desk B rows (orderIds 20-24)
that carry fields the A roles must never learn (``secret``, ``pin``); ``audit`` is a topic only
the admin reads. ``TOKENS[name]`` is any user's token, made on first use (for users of a test's
own ``users``).

Use the ``secured`` fixture for that server as it is, or ``start_secured`` to start one with
other roles, users, topics or ``[server]`` / ``[security]`` settings (each started server is
stopped at the end of the test). ``Secured.state()`` is what a denied call must leave unchanged.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest

from sowdb.config import Config
from tests import support

USERS: dict[str, list[str]] = {
    "reader": ["reader"],
    "trader": ["trader"],
    "writer": ["writer"],
    "norights": [],
    "admin": ["admin"],
}


DESK_A = "/desk = 'A'"
ROLES: list[dict[str, Any]] = [
    {"name": "reader", "read": ["orders"], "filter": DESK_A},
    {"name": "trader", "read": ["orders"], "write": ["orders"], "filter": DESK_A},
    {"name": "writer", "write": ["orders"]},
    {"name": "admin", "read": [".*"], "write": [".*"], "admin": True},
]
TOPICS: dict[str, Any] = {
    "topic": [
        {"name": "orders", "key": ["/orderId"], "history": {"window": "1d"}},
        {"name": "audit", "key": ["/id"]},
    ],
}
DESK_A_ROWS: list[dict[str, Any]] = [{"orderId": i, "desk": "A", "qty": i * 10} for i in range(1, 6)]
DESK_B_ROWS: list[dict[str, Any]] = [
    {"orderId": i, "desk": "B", "qty": i * 10, "secret": f"s-{i}", "pin": 1000 + 37 * i} for i in range(20, 25)
]
AUDIT_ROWS: list[dict[str, Any]] = [{"id": 1, "what": "admin only"}]


def secured_config(
    tmp_path: Path,
    *,
    roles: list[dict[str, Any]] = ROLES,
    users: dict[str, list[str]] = USERS,
    topics: dict[str, Any] = TOPICS,
    server: dict[str, Any] | None = None,
    security: dict[str, Any] | None = None,
) -> Config:
    """The config of a secured server in ``tmp_path`` (port 0 on 127.0.0.1)."""
    return support.secured_config(tmp_path, roles=roles, users=users, topics=topics, server=server, security=security)


class Secured(support.Secured):
    """A started secured server and a client per user."""

    async def state(self) -> list[tuple[str, str, bytes]]:
        """Every record of every topic, as the admin reads it: what a refused call must not change."""
        async with self.client("admin") as c:
            return sorted((r.topic, r.sow_key, r.data) for r in await c.sow(".*").records())


StartSecured = Callable[..., Awaitable[Secured]]


@pytest.fixture
async def start_secured(tmp_path: Path) -> AsyncIterator[StartSecured]:
    """Start secured servers (keyword arguments as :func:`secured_config`), loaded with the
    desk A, desk B and audit rows; all are stopped at the end of the test."""
    async with AsyncExitStack() as started:
        homes = 0

        async def start(**overrides: Any) -> Secured:
            nonlocal homes
            home = tmp_path / f"sowd{homes}"
            home.mkdir()
            homes += 1
            s = Secured(await started.enter_async_context(support.serving(secured_config(home, **overrides))))
            async with s.client("admin") as admin:
                await admin.publish("orders", DESK_A_ROWS + DESK_B_ROWS)
                await admin.publish("audit", AUDIT_ROWS)
            return s

        yield start


@pytest.fixture
async def secured(start_secured: StartSecured) -> Secured:
    """The secured server of this module's roles, users and topics."""
    return await start_secured()
