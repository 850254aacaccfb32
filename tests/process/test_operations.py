"""``sowd`` as operators run it (SPEC §12): ``--log-format json`` with one line per refused call
(its code, RPC, caller and topic, and never a token or a record's data), ``/metrics`` on
``metrics_listen`` counting the same refusals, and ``sow stats`` for an admin and for a user
without the admin role."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from sowdb.auth import hash_token
from sowdb_client import Client, PermissionDeniedError, PublishError, SowdbError, UnauthenticatedError
from tests.support import start_sowd

ROOT, VIEWER, WRONG = "root-token-Q7", "viewer-token-K2", "no-such-token-Z9"
PAYLOAD = "PAYLOAD-MARKER"  # in record data only: it must never reach the log
CONFIG = """
[server]
metrics_listen = "127.0.0.1:0"

[[topic]]
name = "orders"
key = ["/id"]

[security]
users_file = "users.toml"

[[role]]
name = "admin"
read = [".*"]
write = [".*"]
admin = true

[[role]]
name = "viewer"
read = ["orders"]
"""
USERS = f"""
[[user]]
name = "root"
token_sha256 = "{hash_token(ROOT)}"
roles = ["admin"]

[[user]]
name = "vic"
token_sha256 = "{hash_token(VIEWER)}"
roles = ["viewer"]
"""


def sow(target: str, token: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SOW_TOKEN": token, "SOW_SERVER": target}
    return subprocess.run(
        [sys.executable, "-m", "sowdb_client.cli", *args], capture_output=True, text=True, timeout=60, env=env
    )


def metric_samples(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(url, timeout=30) as resp:
        text = resp.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_refused_calls_are_logged_once_as_json_and_counted(tmp_path: Path) -> None:
    (tmp_path / "sowd.toml").write_text(CONFIG)
    (tmp_path / "users.toml").write_text(USERS)
    p = start_sowd(tmp_path / "data", "--config", str(tmp_path / "sowd.toml"), "--log-format", "json")
    expected: list[tuple[str, str, str, str]] = []  # (rpc, code, user, topic) of each refusal
    try:
        with Client(p.target, token=WRONG) as stranger, pytest.raises(UnauthenticatedError):
            stranger.sow("orders").records()
        expected.append(("SowService/Sow", "UNAUTHENTICATED", "", "orders"))
        with Client(p.target, token=ROOT) as root, Client(p.target, token=VIEWER) as vic:
            root.publish("orders", [{"id": 1, "note": PAYLOAD}])
            with pytest.raises(PublishError):  # a key field that holds an object: refused, naming the value
                root.publish("orders", [{"id": {"secret": PAYLOAD}}])
            expected.append(("SowService/Publish", "INVALID_ARGUMENT", "root", "orders"))
            with pytest.raises(PublishError) as denied_write:
                vic.publish("orders", [{"id": 2, "note": PAYLOAD}])
            assert denied_write.value.code.name == "PERMISSION_DENIED"
            expected.append(("SowService/Publish", "PERMISSION_DENIED", "vic", "orders"))
            with pytest.raises(PermissionDeniedError):
                vic.sow_delete("orders", sow_keys=["1"])
            expected.append(("SowService/SowDelete", "PERMISSION_DENIED", "vic", "orders"))
            with pytest.raises(SowdbError):
                root.sow("nope").records()
            expected.append(("SowService/Sow", "FAILED_PRECONDITION", "root", "nope"))

        denied = sow(p.target, VIEWER, "stats")
        assert denied.returncode == 1
        assert "PERMISSION_DENIED: user 'vic' may not see the server-wide figures" in denied.stderr
        expected.append(("AdminService/Stats", "PERMISSION_DENIED", "vic", ""))
        own = sow(p.target, VIEWER, "stats", "-topicsonly", "-format", "json")
        assert own.returncode == 0, own.stderr
        assert [t["name"] for t in json.loads(own.stdout)["topics"]] == ["orders"]

        everything = sow(p.target, ROOT, "stats", "-format", "json")
        assert everything.returncode == 0, everything.stderr
        figures: dict[str, Any] = json.loads(everything.stdout)
        (orders,) = figures["topics"]
        assert (orders["kind"], orders["records"], orders["publishes"]) == ("sow", 1, 1)
        errors = {r["rpc"]: r["errors"] for r in figures["server"]["rpcs"]}
        assert errors["SowService/Publish"] == {"INVALID_ARGUMENT": 1, "PERMISSION_DENIED": 1}
        table = sow(p.target, ROOT, "stats", "-topic", "orders")
        assert table.returncode == 0, table.stderr
        for title in ("topics", "server", "calls", "orders", "journal", "AdminService/Stats"):
            assert title in table.stdout

        port = re.search(r"metrics on http://127\.0\.0\.1:(\d+)/metrics", p.output)
        assert port, p.output
        samples = metric_samples(f"http://127.0.0.1:{port.group(1)}/metrics")
    finally:
        status, output = p.stop()
    assert status == 0

    lines = output.splitlines()
    events = [json.loads(line) for line in lines if line.startswith("{")]
    assert len(events) == len([line for line in lines if "sowd " not in line])  # every log line is JSON
    assert all({"time", "level", "logger", "message"} <= e.keys() for e in events)
    refused = [e for e in events if e.get("event") == "refused"]
    assert Counter((e["rpc"], e["code"], e["user"], e["topic"]) for e in refused) == Counter(expected)
    assert all(e["peer"].startswith("ipv4:127.0.0.1:") for e in refused)
    for secret in (ROOT, VIEWER, WRONG, PAYLOAD):
        assert secret not in output
    counted = Counter({(rpc, code): 0 for rpc, code, _, _ in expected})
    for (name, labels), value in samples.items():
        if name == "sowdb_rpc_errors_total":
            counted[(dict(labels)["rpc"], dict(labels)["code"])] = int(value)
    assert counted == Counter((rpc, code) for rpc, code, _, _ in expected)
