"""Issue 37, findings 5, 6 and 14: the console's gateway does no work for a caller who may not
make the call, and bounds what it does for one who may.

``norights`` (a valid token, no role) sent eight gzip bodies of 16 KB that expanded to 16 MB
each, and a 4.7 MB JSON ``SowDelete``: the gateway inflated and decoded each before the gRPC port
refused it (27.6 s and 5.3 s of a frozen server). Now a method that needs a right the caller
holds on no topic is refused on the headers, before the body is read; a JSON request is bounded
in values before it is converted; the expanded bytes of a compressed body count against the
message limit; and a request with two ``Authorization`` headers is refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import socket
import struct
import time

import h2.config
import h2.connection
import h2.errors
import h2.events

from sowdb.console.gateway import MAX_JSON_VALUES
from tests.security.conftest import Secured, StartSecured
from tests.security.test_dos import STALL_LIMIT_S, watch_loop
from tests.support import TOKENS


async def post(
    s: Secured,
    path: str,
    body: bytes,
    *,
    tokens: tuple[str, ...] = (),
    headers: dict[str, str] | None = None,
    send: int | None = None,
) -> tuple[int, bytes]:
    """POST ``body`` to the console (only its first ``send`` bytes, when given: the server must
    answer on the headers); the HTTP status and the response body."""
    assert s.server.console is not None
    host, port = s.server.console.url.split("//")[1].rstrip("/").rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    head = f"POST {path} HTTP/1.1\r\nhost: {host}\r\ncontent-length: {len(body)}\r\n"
    head += "".join(f"authorization: Bearer {t}\r\n" for t in tokens)
    head += "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
    writer.write(head.encode() + b"\r\n" + body[:send])
    await writer.drain()
    try:
        status = int((await reader.readline()).split()[1])
        length, chunked = 0, False
        while (line := await reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.partition(b":")
            if name.lower() == b"content-length":
                length = int(value)
            chunked = chunked or (name.lower() == b"transfer-encoding" and b"chunked" in value.lower())
        if not chunked:
            return status, await reader.readexactly(length) if length else b""
        out = b""
        while size := int((await reader.readline()).strip(), 16):
            out += await reader.readexactly(size)
            await reader.readline()
        return status, out
    finally:
        writer.close()


def envelope(message: bytes, compressed: bool) -> bytes:
    return struct.pack(">BI", 1 if compressed else 0, len(message)) + message


PUBLISH = "/sowdb.v1.SowService/Publish"
LIST_TOPICS = "/sowdb.v1.SowService/ListTopics"
BOMB = gzip.compress(b"\x00" * (16 * 1024 * 1024))  # 16 KB that expand to 16 MB


async def test_a_caller_without_the_right_is_refused_before_its_body(start_secured: StartSecured) -> None:
    """Eight gzip bombs to Publish and a JSON SowDelete from ``norights``, and a Checkpoint from
    ``reader``: each answered 403 on its headers, though no body byte beyond the first kilobyte
    is ever sent (before, the gateway waited for the bodies, then inflated and decoded them)."""
    s = await start_secured(server={"http_listen": "127.0.0.1:0"})
    publish = envelope(BOMB, compressed=True)
    stream = {"content-type": "application/connect+proto", "connect-content-encoding": "gzip"}
    delete = json.dumps({"topic": "orders", "sowKeys": [str(i) for i in range(500_000)]}).encode()
    async with asyncio.timeout(10), watch_loop() as watch:
        answers = await asyncio.gather(
            *(post(s, PUBLISH, publish, tokens=(TOKENS["norights"],), headers=stream, send=1024) for _ in range(8)),
            post(
                s,
                "/sowdb.v1.SowService/SowDelete",
                delete,
                tokens=(TOKENS["norights"],),
                headers={"content-type": "application/json"},
                send=1024,
            ),
            post(
                s,
                "/sowdb.v1.AdminService/Checkpoint",
                b"{}",
                tokens=(TOKENS["reader"],),
                headers={"content-type": "application/json"},
            ),
        )
    assert [status for status, _ in answers] == [403] * 10
    assert "norights" in json.loads(answers[8][1])["message"]
    assert json.loads(answers[8][1])["code"] == "permission_denied"
    assert watch.longest_gap_s < STALL_LIMIT_S


async def test_a_json_request_is_bounded_before_it_is_converted(start_secured: StartSecured) -> None:
    """``trader`` may delete: its 4.7 MB JSON SowDelete of 500,000 SowKeys is refused as
    INVALID_ARGUMENT, naming the bound, without freezing the server (it took 5.3 s); a JSON
    request inside the bound still works."""
    s = await start_secured(server={"http_listen": "127.0.0.1:0"})
    delete = json.dumps({"topic": "orders", "sowKeys": [str(i) for i in range(500_000)]}).encode()
    json_headers = {"content-type": "application/json"}
    async with watch_loop() as watch:
        status, body = await post(
            s, "/sowdb.v1.SowService/SowDelete", delete, tokens=(TOKENS["trader"],), headers=json_headers
        )
    assert status == 400
    error = json.loads(body)
    assert error["code"] == "invalid_argument"
    assert str(MAX_JSON_VALUES) in error["message"]
    assert watch.longest_gap_s < STALL_LIMIT_S
    ok = json.dumps({"topic": "orders", "sowKeys": ["1", "20"]}).encode()
    status, body = await post(s, "/sowdb.v1.SowService/SowDelete", ok, tokens=(TOKENS["trader"],), headers=json_headers)
    assert (status, json.loads(body)["deletedCount"]) == (200, "1")  # 20 is desk B's: not its to delete


async def test_the_expanded_bytes_count_against_the_message_limit(start_secured: StartSecured) -> None:
    """A compressed body within the limit that expands past it is refused (RESOURCE_EXHAUSTED),
    the decompression stopped at the limit; the same message uncompressed is refused alike."""
    s = await start_secured(server={"http_listen": "127.0.0.1:0", "max_message_bytes": 1024 * 1024})
    padded = gzip.compress(b"\x00" * (4 * 1024 * 1024))  # 4 MB of an unknown field 0, 4 KB compressed
    status, body = await post(
        s,
        "/sowdb.v1.SowService/ListTopics",
        padded,
        tokens=(TOKENS["reader"],),
        headers={"content-type": "application/proto", "content-encoding": "gzip"},
    )
    assert status in (413, 429, 400)
    assert json.loads(body)["code"] == "resource_exhausted"


async def test_two_authorization_headers_are_refused(start_secured: StartSecured) -> None:
    """Which of two tokens would count is not for the gateway and the gRPC port to disagree
    on: such a request is refused, whichever order the two come in."""
    s = await start_secured(server={"http_listen": "127.0.0.1:0"})
    for tokens in ((TOKENS["reader"], TOKENS["admin"]), (TOKENS["admin"], TOKENS["reader"]), ("x", "x")):
        status, body = await post(
            s, "/sowdb.v1.SowService/ListTopics", b"{}", tokens=tokens, headers={"content-type": "application/json"}
        )
        assert status == 400, tokens
        assert json.loads(body)["code"] == "invalid_argument"
        assert "two Authorization headers" in json.loads(body)["message"]
    json_headers = {"content-type": "application/json"}
    async with asyncio.timeout(10):
        status, _ = await post(s, LIST_TOPICS, b"{}", tokens=(TOKENS["reader"],), headers=json_headers)
    assert status == 200


def rapid_reset(console: str, token: str, streams: int) -> int | None:
    """Open and at once reset up to ``streams`` streams on one HTTP/2 connection (prior
    knowledge), as fast as the socket takes them; the GOAWAY's error code (None: none came)."""
    host, port = console.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        conn.initiate_connection()
        sock.sendall(conn.data_to_send())
        headers = [
            (":method", "POST"),
            (":scheme", "http"),
            (":authority", console),
            (":path", LIST_TOPICS),
            ("content-type", "application/proto"),
            ("authorization", f"Bearer {token}"),
        ]
        received = b""
        sock.setblocking(False)
        try:
            for i in range(streams):
                stream_id = conn.get_next_available_stream_id()
                conn.send_headers(stream_id, headers)
                conn.reset_stream(stream_id)
                if i % 50 == 0:
                    with contextlib.suppress(BlockingIOError):
                        sock.sendall(conn.data_to_send())
                    with contextlib.suppress(BlockingIOError):
                        received += sock.recv(1 << 20)
                    if goaway_code(received) is not None:
                        break
        except OSError:  # the server closed the connection: what it sent before is read below
            pass
        sock.settimeout(1.0)
        deadline = time.monotonic() + 5
        with contextlib.suppress(OSError):
            while goaway_code(received) is None and time.monotonic() < deadline and (chunk := sock.recv(1 << 20)):
                received += chunk
    return goaway_code(received)


def goaway_code(data: bytes) -> int | None:
    """The error code of the first GOAWAY frame among the server's frames (None: none)."""
    at = 0
    while at + 9 <= len(data):
        length, kind = int.from_bytes(data[at : at + 3], "big"), data[at + 3]
        if kind == 0x7 and at + 9 + 8 <= len(data):  # GOAWAY: last stream id, then error code
            return int.from_bytes(data[at + 13 : at + 17], "big")
        at += 9 + length
    return None


async def test_a_client_resetting_streams_as_fast_as_it_opens_them_is_cut_off(start_secured: StartSecured) -> None:
    """HTTP/2 rapid reset (CVE-2023-44487) on the console's port: 7,000 streams opened and reset
    on one connection held the loop for 2.2 s. Past 200 resets the connection gets GOAWAY
    (ENHANCE_YOUR_CALM) and is closed; the next connection is served."""
    s = await start_secured(server={"http_listen": "127.0.0.1:0"})
    assert s.server.console is not None
    console = s.server.console.url.split("//")[1].rstrip("/")
    async with asyncio.timeout(30), watch_loop() as watch:  # before: the flood wedged the console
        code = await asyncio.to_thread(rapid_reset, console, TOKENS["reader"], 5000)
    assert code == h2.errors.ErrorCodes.ENHANCE_YOUR_CALM
    assert watch.longest_gap_s < STALL_LIMIT_S
    status, _ = await post(
        s, LIST_TOPICS, b"{}", tokens=(TOKENS["reader"],), headers={"content-type": "application/json"}
    )
    assert status == 200
