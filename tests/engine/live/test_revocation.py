"""A-4 on the engine: every kind of live subscription ends with PERMISSION_DENIED when its
caller loses the right to it, and keeps its caller's name in the figures (issue 27: aggregated
subscriptions ran as EVERYONE and escaped revocation). Through the server:
``tests/api/test_security.py``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from sowdb.config import RoleConfig, config_from_dict
from sowdb.engine import Engine, InMessage, QueryOptions
from sowdb.engine.access import Access
from sowdb.engine.live.options import SubscriptionOptions
from sowdb.engine.live.subscription import Subscription
from sowdb.errors import PermissionDenied
from sowdb.storage import Store

TOPICS: dict[str, Any] = {"topic": [{"name": "orders", "key": ["/id"], "history": {"window": "1d"}}]}
READER = Access("alice", (RoleConfig("reader", read=("orders",)),))
NO_RIGHTS = Access("alice", (RoleConfig("reader", read=("markers",)),))
OTHER_ROWS = Access("alice", (RoleConfig("reader", read=("orders",), filter="/desk = 'FX'"),))
KINDS = ["plain", "query", "aggregated", "paginated", "historical", "conflated"]


def place(engine: Engine, kind: str, access: Access) -> Subscription:
    """One live subscription of ``kind`` placed for ``access``'s user."""
    if kind in ("plain", "historical"):
        return engine.placement.subscribe("orders", access=access, bookmark="1" if kind == "historical" else "")
    opts = QueryOptions(topic="orders")
    options = SubscriptionOptions()
    if kind == "aggregated":
        opts = QueryOptions(topic="orders", grouping=["/desk"], projection=["/desk AS /desk", "COUNT(/id) AS /n"])
    elif kind == "paginated":
        opts = QueryOptions(topic="orders", top_n=2, skip_n=0)
    elif kind == "conflated":
        options = SubscriptionOptions(conflation_s=1.0)
    return engine.placement.sow_and_subscribe(opts, options=options, access=access)[0]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("after", "why"), [(None, "no longer exists"), (NO_RIGHTS, "may no longer read"),
                                            (OTHER_ROWS, "rows")])  # fmt: skip
def test_every_kind_of_live_subscription_ends_when_its_caller_loses_the_right(
    tmp_path: Path, kind: str, after: Access | None, why: str
) -> None:
    cfg = config_from_dict({**TOPICS, "server": {"data_dir": str(tmp_path)}}, source="<tests>")
    engine = Engine.open(cfg, Store(tmp_path))
    engine.publish("orders", [InMessage(orjson.dumps({"id": i, "desk": "FX" if i % 2 else "EQ"})) for i in range(4)])
    sub = place(engine, kind, READER)
    assert [s.user for s in engine.stats().subscriptions] == ["alice"]  # attributed to its caller
    assert engine.reauthorize(lambda user: READER if user == "alice" else None) == 0  # rights unchanged
    assert sub.failure is None
    assert engine.reauthorize(lambda user: after if user == "alice" else None) == 1
    assert isinstance(sub.failure, PermissionDenied)
    assert why in sub.failure.message
    engine.close()


@pytest.mark.parametrize(
    "access", [READER, OTHER_ROWS, Access("bob", (RoleConfig("all", read=(".*",), filter="/desk = 'FX'"),))]
)
def test_an_aggregated_subscription_follows_its_view_under_its_callers_rights(tmp_path: Path, access: Access) -> None:
    """Its caller's rights do not hide the private view from it, nor filter the groups by the
    entitlement a second time (its members already are only the rows the caller may see)."""
    cfg = config_from_dict({**TOPICS, "server": {"data_dir": str(tmp_path)}}, source="<tests>")
    engine = Engine.open(cfg, Store(tmp_path))
    sub = place(engine, "aggregated", access)
    sub.release()
    engine.publish("orders", [InMessage(b'{"id": 1, "desk": "FX"}'), InMessage(b'{"id": 2, "desk": "EQ"}')])
    got = sorted(orjson.loads(e.record.raw)["desk"] for e in sub.drain())
    assert got == (["FX"] if access.entitlement_text("orders") else ["EQ", "FX"])
    engine.close()
