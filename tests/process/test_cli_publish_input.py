"""``sow publish`` with input a new user gives it (issue 36, the first hour, round 4): a line
that is not UTF-8, documents that together pass the gRPC message limit, ``-delimiter``, and
notes that are true and come after the errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from sowdb.auth import hash_token
from sowdb_client import Client
from tests.support import Process, start_sowd

SOW = [sys.executable, "-m", "sowdb_client.cli"]


def sow(*args: str, stdin: bytes = b"", env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``sow`` with bytes on its stdin (a line that is not UTF-8); stdout and stderr as text."""
    done = subprocess.run(
        [*SOW, *args], input=stdin, capture_output=True, timeout=120, env={**os.environ, **(env or {})}
    )
    return subprocess.CompletedProcess(done.args, done.returncode, done.stdout.decode(), done.stderr.decode())


def stored(target: str, topic: str = "orders") -> list[int]:
    with Client(target) as c:
        return sorted(r.json()["orderId"] for r in c.sow(topic, batch_size=1000))


def test_batchsize_0_is_refused_by_its_flag(sowd_process: Process) -> None:
    run = sow("publish", "-topic", "orders", "-batchsize", "0", "-server", sowd_process.target, stdin=b'{"orderId":5}')
    assert run.returncode == 2
    assert "Exception iterating requests" not in run.stderr
    assert "argument -batchsize/--batchsize: 0 is out of range: a whole number from 1 to 1000000" in run.stderr


def test_a_line_that_is_not_utf8_is_named_by_its_line_and_the_lines_before_it_are_stored(
    sowd_process: Process,
) -> None:
    data = b'{"orderId":1}\n\n{"orderId":2}\n{"orderId":3, "x": "\xff"}\n{"orderId":4}\n'
    run = sow("publish", "-topic", "orders", "-server", sowd_process.target, stdin=data)
    assert run.returncode == 1
    assert run.stderr.splitlines() == [
        "sow: input line 4: not UTF-8 text (byte 0xff at byte 21 of the line); stored 2 messages "
        "(bookmarks 1..2) before the error at input line 4"
    ]
    assert stored(sowd_process.target) == [1, 2]


def test_an_sdk_publish_whose_messages_raise_raises_that_error(sowd_process: Process) -> None:
    def messages() -> Iterator[dict[str, int]]:
        yield {"orderId": 1}
        yield {"orderId": 2}
        raise LookupError("the source of the messages failed")

    with Client(sowd_process.target) as c, pytest.raises(LookupError, match="the source of the messages failed"):
        c.publish("orders", messages(), batch_size=1)
    assert stored(sowd_process.target) == [1, 2]
    with Client(sowd_process.target) as c, pytest.raises(ValueError, match="batch_size must be at least 1"):
        c.publish("orders", [{"orderId": 3}], batch_size=0)


BIG = 900_000
"""Bytes of each large document: under the server's max_document_bytes (1 MiB), while 30 of
them (27 MB) are over the gRPC message limit (16 MiB) of one request of the default batch."""


def big_orders(n: int = 30) -> list[bytes]:
    return [json.dumps({"orderId": i, "pad": "x" * BIG}).encode() for i in range(n)]


def test_the_cli_publishes_documents_that_together_pass_the_message_limit(sowd_process: Process) -> None:
    run = sow("publish", "-topic", "orders", "-server", sowd_process.target, stdin=b"\n".join(big_orders()))
    assert run.returncode == 0, run.stderr
    assert "published 30 messages to orders (bookmarks 1..30)" in run.stdout
    with Client(sowd_process.target) as c:
        assert sorted(r.json()["orderId"] for r in c.sow("orders", select="[-/,+/orderId]")) == list(range(30))


def test_delimiter_cuts_the_input_at_that_byte(sowd_process: Process) -> None:
    s = ("-server", sowd_process.target)
    bar = sow("publish", "-topic", "orders", "-delimiter", "|", *s, stdin=b'{"orderId":1}|{"orderId":2}|')
    assert bar.returncode == 0, bar.stderr
    assert "published 2 messages" in bar.stdout
    nul = sow("publish", "-topic", "orders", "-delimiter", "0", *s, stdin=b'{"orderId":3,\n"a":1}\0{"orderId":4}')
    assert nul.returncode == 0, nul.stderr
    assert stored(sowd_process.target) == [1, 2, 3, 4]
    bad = sow("publish", "-topic", "orders", "-delimiter", "|", *s, stdin=b'{"orderId":5}|{"orderId":|')
    assert bad.returncode == 1
    assert "before the error at input message 2" in bad.stderr


SECURED = """
[server]
heartbeat = "200ms"

[[topic]]
name = "orders"
key = ["/orderId"]

[security]
users_file = "users.toml"

[[role]]
name = "loader"
write = ["orders"]
"""


@pytest.fixture
def secured(tmp_path: Path) -> Iterator[Process]:
    """A server with one write-only user, ``loader``, token ``loader-token``."""
    (tmp_path / "users.toml").write_text(
        f'[[user]]\nname = "loader"\ntoken_sha256 = "{hash_token("loader-token")}"\nroles = ["loader"]\n'
    )
    (tmp_path / "sowd.toml").write_text(SECURED)
    p = start_sowd(tmp_path / "data", "--config", str(tmp_path / "sowd.toml"))
    yield p
    p.stop()


def test_a_write_only_user_is_not_told_its_configured_topic_is_unconfigured(secured: Process) -> None:
    s = ("-server", secured.target, "-token", "loader-token")
    run = sow("publish", "-topic", "orders", *s, stdin=b'{"orderId":1}\n')
    assert run.returncode == 0, run.stderr
    assert "note" not in run.stderr
    refused = sow("publish", "-topic", "scratch", *s, stdin=b'{"orderId":1}\n')
    assert refused.returncode == 1
    assert refused.stderr.startswith("sow: PERMISSION_DENIED"), refused.stderr
    assert "note" not in refused.stderr


def test_a_true_note_comes_after_the_publish(sowd_process: Process) -> None:
    s = ("-server", sowd_process.target)
    run = sow("publish", "-topic", "scratch", *s, stdin=b'{"orderId":1}\n')
    assert run.returncode == 0, run.stderr
    assert run.stderr == (
        "sow: note: 'scratch' is not a configured topic: journaled only, no SOW (subscribers get the messages)\n"
    )
    bad = sow("publish", "-topic", "scratch", *s, stdin=b'{"orderId":\n')
    assert bad.returncode == 1
    assert bad.stderr.startswith("sow: INVALID_ARGUMENT"), bad.stderr
    assert "note" not in bad.stderr


def test_a_refused_subscription_says_only_why(secured: Process) -> None:
    s = ("-server", secured.target, "-token", "loader-token")
    for command in ("subscribe", "sow_and_subscribe"):
        run = sow(command, "-topic", "scratch", "-timeout", "5", *s)
        assert run.returncode == 1
        assert run.stderr.startswith("sow: PERMISSION_DENIED"), run.stderr
        assert len(run.stderr.splitlines()) == 1, run.stderr


def test_a_subscription_to_an_unconfigured_topic_notes_it_once_subscribed(sowd_process: Process) -> None:
    run = sow("subscribe", "-topic", "scratch", "-timeout", "0.5", "-server", sowd_process.target)
    assert run.returncode == 0, run.stderr
    assert "sow: note: 'scratch' is not a configured topic" in run.stderr
    configured = sow("subscribe", "-topic", "orders", "-timeout", "0.5", "-server", sowd_process.target)
    assert configured.returncode == 0
    assert configured.stderr == ""
