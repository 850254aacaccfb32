"""The SDKs' shared cases (``clients/cases/cases.json``) run by the Python SDK against a live
``sowd`` process with ``tests/topics.toml``: the Node, Java and Go SDKs run the same table, so
one call means one thing in every language (the table's README says its format)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from sowdb_client import Client
from sowdb_client.errors import SowdbError
from tests.support import Process, start_sowd

ROOT = Path(__file__).resolve().parents[2]
CASES = json.loads((ROOT / "clients" / "cases" / "cases.json").read_text(encoding="utf-8"))["cases"]
QUERY_OPTIONS = ("filter", "order_by", "top_n", "batch_size", "select", "grouping", "projection")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Process]:
    p = start_sowd(tmp_path_factory.mktemp("cases") / "data", "--config", str(ROOT / "tests" / "topics.toml"))
    try:
        yield p
    finally:
        p.stop()


def _call(client: Client, step: dict[str, Any]) -> Any:
    op, topic = step["op"], step["topic"]
    if op == "publish":
        return client.publish(topic, step["docs"])
    if op == "delete":
        return client.sow_delete(topic, filter=step["filter"])
    if op == "sow":
        options = {k: step[k] for k in QUERY_OPTIONS if k in step}
        return [r.json() for r in client.sow(topic, **options)]
    raise AssertionError(f"unknown op {op!r}")


def _check_error(err: SowdbError, want: dict[str, Any]) -> None:
    assert err.code == getattr(grpc.StatusCode, want["code"]), err
    if "field" in want:
        assert err.field == want["field"], err.field_violations
    if "reason" in want:
        assert err.reason == want["reason"], err
    if "column" in want:
        assert err.column == want["column"], err.metadata


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_shared_case(server: Process, case: dict[str, Any]) -> None:
    with Client(server.target) as client:
        for step in case["steps"]:
            expect = step.get("expect", {})
            if "error" in expect:
                with pytest.raises(SowdbError) as caught:
                    _call(client, step)
                _check_error(caught.value, expect["error"])
                continue
            got = _call(client, step)
            if "docs" in expect:
                want = expect["docs"]
                if "order_by" in step:
                    assert got == want
                else:
                    key = lambda d: json.dumps(d, sort_keys=True)  # noqa: E731
                    assert sorted(got, key=key) == sorted(want, key=key)
            if "deleted" in expect:
                assert got == expect["deleted"]
