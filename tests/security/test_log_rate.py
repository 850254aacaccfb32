"""Issue 37, finding 13: refusals are logged at a bounded rate.

2,927 refused calls from one client in 5 s wrote 2,927 log lines. Now each client has its first
``LOG_BURST`` refusals of a window logged in full, and one summary line sums up the rest when
the window ends; every refusal is still counted, and another client's are still logged.
"""

from __future__ import annotations

import asyncio
import math
import time

import pytest

from sowdb.api import refusals
from sowdb_client import PermissionDeniedError
from tests.security.conftest import Secured

CALLS = 300


def refused_lines(caplog: pytest.LogCaptureFixture, user: str) -> int:
    return sum(1 for r in caplog.records if getattr(r, "event", "") == "refused" and getattr(r, "user", "") == user)


def summarized(caplog: pytest.LogCaptureFixture, user: str) -> int:
    return sum(
        getattr(r, "count", 0)
        for r in caplog.records
        if getattr(r, "event", "") == "refusals_suppressed" and getattr(r, "user", "") == user
    )


async def test_a_client_refused_again_and_again_writes_a_bounded_number_of_lines(
    secured: Secured, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(refusals, "LOG_WINDOW_S", 2.0)
    caplog.set_level("INFO", logger="sowdb.api")
    started = time.monotonic()
    async with secured.client("norights") as hostile, secured.client("reader") as reader:
        for _ in range(CALLS):
            with pytest.raises(PermissionDeniedError):
                await hostile.sow("orders").records()
        elapsed = time.monotonic() - started
        with pytest.raises(PermissionDeniedError):
            await reader.sow("audit").records()  # another client: logged in full
    windows = math.ceil(elapsed / refusals.LOG_WINDOW_S) + 1
    assert refused_lines(caplog, "norights") <= refusals.LOG_BURST * windows
    assert refused_lines(caplog, "reader") == 1
    for _ in range(200):  # up to 10 s: the window's summary accounts for every one not logged
        if refused_lines(caplog, "norights") + summarized(caplog, "norights") >= CALLS:
            break
        await asyncio.sleep(0.05)
    assert refused_lines(caplog, "norights") + summarized(caplog, "norights") == CALLS
    summary = next(r for r in caplog.records if getattr(r, "event", "") == "refusals_suppressed")
    assert "PERMISSION_DENIED" in summary.getMessage()
    stats = secured.server.engine.rpc_counters("SowService/Sow")  # type: ignore[union-attr]
    assert stats.errors.get("PERMISSION_DENIED", 0) >= CALLS + 1
