"""Issue 37, finding 12: no log line ever holds a token, whatever the client sends.

A token followed by byte 0xFF in the ``authorization`` metadata made gRPC core log ``Invalid
encoding on b'Bearer <token>\\xff'`` into sowd's log at ERROR. A real ``sowd`` (a child process,
its log on stderr) is sent malformed ``authorization`` headers over raw HTTP/2 to its gRPC port
and over HTTP/1.1 to its console's gateway; every call is refused, and no line of its log holds
the token.
"""

from __future__ import annotations

import http.client
import json
import logging
import socket
import sys
import time
from pathlib import Path

import h2.config
import h2.connection
import h2.events

from sowdb.logs import REDACT
from tests.support import Process, start_sowd, users_toml

TOKEN = "tok3nThatMustNeverBeLogged"


def write_config(tmp_path: Path) -> Path:
    (tmp_path / "users.toml").write_text(users_toml({"reader": ["reader"]}, {"reader": TOKEN}))
    config = tmp_path / "sowd.toml"
    config.write_text(
        '[server]\nlisten = "127.0.0.1:0"\ndata_dir = "./data"\n'
        '[[topic]]\nname = "orders"\nkey = ["/orderId"]\n'
        '[security]\nusers_file = "users.toml"\n'
        '[[role]]\nname = "reader"\nread = ["orders"]\nfilter = "/desk = \'A\'"\n'
    )
    return config


MALFORMED = [
    b"Bearer " + TOKEN.encode() + b"\xff",
    b"Bearer \xff" + TOKEN.encode(),
    b"\xffBearer " + TOKEN.encode(),
    TOKEN.encode() + b"\xff",  # no scheme at all
    b"bearer\t" + TOKEN.encode() + b"\x80\x80",
    b"Bearer " + TOKEN.encode() + b"\x00",
]


def grpc_call(target: str, authorization: bytes) -> str:
    """A Sow call over raw HTTP/2 with this ``authorization`` value; its grpc-status."""
    host, port = target.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        config = h2.config.H2Configuration(
            client_side=True,
            validate_outbound_headers=False,
            normalize_outbound_headers=False,
            validate_inbound_headers=False,
        )
        conn = h2.connection.H2Connection(config)
        conn.initiate_connection()
        headers = [
            (b":method", b"POST"),
            (b":scheme", b"http"),
            (b":authority", target.encode()),
            (b":path", b"/sowdb.v1.SowService/Sow"),
            (b"content-type", b"application/grpc"),
            (b"te", b"trailers"),
            (b"authorization", authorization),
        ]
        conn.send_headers(1, headers)
        conn.send_data(1, b"\x00\x00\x00\x00\x08\x0a\x06orders", end_stream=True)
        sock.sendall(conn.data_to_send())
        status = ""
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            data = sock.recv(65536)
            if not data:
                break
            for e in conn.receive_data(data):
                if isinstance(e, h2.events.TrailersReceived | h2.events.ResponseReceived):
                    status = dict(e.headers).get(b"grpc-status", status.encode()).decode()
                if isinstance(e, h2.events.StreamEnded | h2.events.StreamReset):
                    return status
            sock.sendall(conn.data_to_send())
        return status


def gateway_call(console: str, authorization: bytes) -> int:
    """A Connect call to the console's gateway with this ``Authorization`` value; its HTTP status."""
    host, port = console.removeprefix("http://").rstrip("/").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        conn.putrequest("POST", "/sowdb.v1.SowService/ListTopics")
        conn.putheader("Content-Type", "application/json")
        conn.putheader("Authorization", authorization)
        conn.putheader("Content-Length", "2")
        conn.endheaders(b"{}")
        return conn.getresponse().status
    finally:
        conn.close()


def test_no_log_line_holds_a_token_whatever_the_client_sends(tmp_path: Path) -> None:
    config = str(write_config(tmp_path))
    sowd: Process = start_sowd(tmp_path / "data", "--config", config, "--http-listen", "127.0.0.1:0")
    try:
        console = sowd.banner.rsplit("console ", 1)[1].split()[0]
        for value in MALFORMED:
            assert grpc_call(sowd.target, value) == "16", value  # UNAUTHENTICATED
            assert gateway_call(console, value) in (400, 401), value
    finally:
        _, output = sowd.stop()
    assert "UNAUTHENTICATED" in output or "not UTF-8" in output, output  # the calls reached the log
    assert TOKEN not in output, [line for line in output.splitlines() if TOKEN in line]


def test_the_redaction_holds_for_any_logger() -> None:
    """Whatever logs ``Bearer ...`` (a message, its arguments, a traceback), the line loses it."""
    record = logging.LogRecord("x", logging.ERROR, __file__, 1, "header %s", (f"Bearer {TOKEN}",), None)
    REDACT.filter(record)
    assert TOKEN not in record.getMessage()
    try:
        raise ValueError(json.dumps({"authorization": f"bearer {TOKEN}"}))
    except ValueError:
        record = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed", None, sys.exc_info())
    REDACT.filter(record)
    assert TOKEN not in logging.Formatter().format(record)
