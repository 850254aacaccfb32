"""A gRPC client pointed at the console's port by mistake (``grpcurl -plaintext HOST:9080 list``:
HTTP/2 with prior knowledge, a request body still arriving after the answer) gets an answer and
a clean connection, and the server's log gets no traceback (issue 27)."""

from __future__ import annotations

import socket
from pathlib import Path

import h2.connection
import h2.events

from tests.support import start_sowd


def _events(sock: socket.socket, conn: h2.connection.H2Connection) -> list[h2.events.Event]:
    data = sock.recv(65536)
    assert data, "the console closed the connection"
    events = conn.receive_data(data)
    sock.sendall(conn.data_to_send())
    return events


def test_a_body_arriving_after_the_answer_leaves_no_traceback_in_the_log(tmp_path: Path) -> None:
    sowd = start_sowd(tmp_path / "data", "--http-listen", "127.0.0.1:0")
    try:
        host, port = sowd.banner.rsplit("console http://", 1)[1].rstrip("/").rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            conn = h2.connection.H2Connection()
            conn.initiate_connection()
            headers = [
                (":method", "POST"),
                (":scheme", "http"),
                (":authority", f"{host}:{port}"),
                (":path", "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"),
                ("content-type", "application/grpc"),
                ("te", "trailers"),
            ]
            conn.send_headers(1, headers)  # the body follows, as a streaming call's does
            sock.sendall(conn.data_to_send())
            ended = False
            while not ended:  # the console answers (and closes its side) before the body
                ended = any(isinstance(e, h2.events.StreamEnded) and e.stream_id == 1 for e in _events(sock, conn))
            conn.send_data(1, b"\x00\x00\x00\x00\x02\x3a\x00", end_stream=True)  # list_services
            conn.ping(b"12345678")
            sock.sendall(conn.data_to_send())
            acked = False
            while not acked:  # the connection is still served after the late body
                acked = any(isinstance(e, h2.events.PingAckReceived) for e in _events(sock, conn))
    finally:
        code, output = sowd.stop()
    assert code == 0, output
    assert "Traceback" not in output, output
    assert "Unhandled exception" not in output, output
