"""docs/connect.md runs as written: each ``sh`` block with bash against a real ``sowd`` process
with the console on (the demo config, as ``make run``; the token block against a server with
users, ``$SOW_TOKEN`` set), the page's ``127.0.0.1:9080`` replaced by the console's free port."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from sowdb.auth import hash_token
from tests.doc_pages import blocks
from tests.process.test_readme_tour import free_port
from tests.support import start_sowd

ROOT = Path(__file__).resolve().parents[2]
DOC_ADDRESS = "127.0.0.1:9080"
TOKEN = "doc-reader-token"

pytestmark = pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")


def run(block: str, http: str, token: str = "") -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "SOW_TOKEN"}
    if token:
        env["SOW_TOKEN"] = token
    done = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", block.replace(DOC_ADDRESS, http)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, f"{block}\n{done.stdout}\n{done.stderr}"
    assert not done.stderr, done.stderr
    return done


def test_calling_sowdb_with_curl_runs_as_written(tmp_path: Path) -> None:
    unary, errors, streams, with_token = blocks("connect.md")
    http = f"127.0.0.1:{free_port()}"
    sowd = start_sowd(tmp_path / "open", "--http-listen", http)
    try:
        topics = json.loads(run(unary, http).stdout)["topics"]
        assert {"orders", "notes"} <= {t["name"] for t in topics}
        out = run(errors, http).stdout.splitlines()
        error = json.loads(out[0])
        assert (error["code"], out[1]) == ("invalid_argument", "HTTP 400")
        assert error["message"] == "expected an operand at column 7 (end of input)"
        assert [d["type"] for d in error["details"]] == ["google.rpc.BadRequest", "google.rpc.ErrorInfo"]
        ack, end, begin, records, group_end, end_again = map(json.loads, run(streams, http).stdout.splitlines())
        assert (end, end_again) == ({}, {})
        assert ack["firstBookmark"] == ack["lastBookmark"] == begin["groupBegin"]["bookmark"]
        (record,) = records["records"]["records"]
        assert record["sowKey"] == "42"
        assert json.loads(base64.b64decode(record["data"]))["symbol"] == "CURL"
        assert group_end["groupEnd"]["recordsReturned"] == "1"
    finally:
        sowd.stop()

    users = tmp_path / "users.toml"
    users.write_text(f'[[user]]\nname = "reader"\ntoken_sha256 = "{hash_token(TOKEN)}"\nroles = ["reader"]\n')
    config = tmp_path / "sowd.toml"
    config.write_text(
        f'[server]\nhttp_listen = "{http}"\n\n[security]\nusers_file = "{users}"\n\n'
        '[[role]]\nname = "reader"\nread = ["orders"]\n\n[[topic]]\nname = "orders"\nkey = ["/orderId"]\n'
    )
    sowd = start_sowd(tmp_path / "secured", "--config", str(config))
    try:
        allowed, refused, status = run(with_token, http, TOKEN).stdout.splitlines()
        assert [t["name"] for t in json.loads(allowed)["topics"]] == ["orders"]
        assert (json.loads(refused)["code"], status) == ("unauthenticated", "HTTP 401")
    finally:
        sowd.stop()
