"""Cheap subscribers for fan-out benchmarks: raw HTTP/2 streams that only count what arrives.

A ``grpc.aio`` subscriber costs its process ~20-40 µs of Python per frame, as much as the
server's side of it: 100 of them in one benchmark process measure the client, not the server.
These subscribers speak HTTP/2 through ``h2`` (each its own TCP connection, so that the
kernel's ``SO_REUSEPORT`` hash spreads them over a server's processes), open the flow-control
windows to 2 GiB, send one gRPC request and then count the records by a marker every record's
JSON carries (``bytes.count`` over each DATA frame's payload, a C loop; the marker's tail is
kept across frames). ``h2`` takes the frames apart and answers the server's PINGs and SETTINGS,
a few Python calls per 16 KiB frame, so the server's deliveries are what is measured. The
callers check the count against the deliveries expected.

Run in a child process (:func:`drain_in_child`) so the counting never shares a GIL with the
benchmark's own gRPC clients.
"""

from __future__ import annotations

import selectors
import socket
import time
from collections.abc import Sequence
from typing import Any

import h2.config
import h2.connection
import h2.events
import h2.settings

WINDOW = 2**31 - 1


def open_stream(
    target: str, path: str, request: bytes, metadata: Sequence[tuple[str, str]] = ()
) -> tuple[socket.socket, h2.connection.H2Connection]:
    """One server-streaming call of ``path`` with the serialized ``request`` on a connection of
    its own; returns the socket once the response headers came (the call is placed), non-blocking.

    Raises:
        ConnectionError: the server ended the call or the connection during the handshake.
    """
    host, port = target.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
    conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True, header_encoding=None))
    conn.initiate_connection()
    conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: WINDOW})
    conn.increment_flow_control_window(WINDOW - 65535)
    sid = conn.get_next_available_stream_id()
    headers = [
        (":method", "POST"),
        (":scheme", "http"),
        (":path", path),
        (":authority", target),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
        *metadata,
    ]
    conn.send_headers(sid, headers)
    conn.send_data(sid, b"\x00" + len(request).to_bytes(4, "big") + request, end_stream=True)
    sock.sendall(conn.data_to_send())
    placed = False
    while not placed:  # h2 acknowledges the server's SETTINGS (gRPC closes a connection that does not)
        data = sock.recv(65536)
        if not data:
            raise ConnectionError(f"{target} closed the connection during the handshake")
        for event in conn.receive_data(data):
            if isinstance(event, h2.events.ResponseReceived):
                placed = True
            elif isinstance(event, h2.events.StreamEnded | h2.events.StreamReset | h2.events.ConnectionTerminated):
                raise ConnectionError(f"{target} ended the call: {event}")
        if out := conn.data_to_send():
            sock.sendall(out)
    sock.setblocking(False)
    return sock, conn


def drain(
    streams: list[tuple[socket.socket, h2.connection.H2Connection]], marker: bytes, until: float, counts: Any
) -> None:
    """Read every socket until ``until`` (monotonic), adding the markers seen on socket ``i`` to
    ``counts[i]`` as they arrive (``counts``: a shared array, read by the parent meanwhile)."""
    sel = selectors.DefaultSelector()
    tails = [b""] * len(streams)
    for i, (s, _) in enumerate(streams):
        sel.register(s, selectors.EVENT_READ, i)
    keep = len(marker) - 1
    while (left := until - time.monotonic()) > 0:
        for key, _ in sel.select(min(left, 0.2)):
            i = key.data
            try:
                data = key.fileobj.recv(1 << 16)  # type: ignore[union-attr]
            except BlockingIOError:
                continue
            if not data:
                sel.unregister(key.fileobj)
                continue
            sock, conn = streams[i]
            # h2 takes the frames apart (a DATA frame's header may fall inside a marker) and
            # answers the server's PINGs and SETTINGS
            for event in conn.receive_data(data):
                if isinstance(event, h2.events.DataReceived):
                    chunk = tails[i] + event.data
                    counts[i] += chunk.count(marker)
                    tails[i] = chunk[-keep:] if keep else b""  # shorter than a marker: never counted twice
            if out := conn.data_to_send():
                sock.setblocking(True)
                sock.sendall(out)
                sock.setblocking(False)
    sel.close()
    for s, _ in streams:
        s.close()


def drain_in_child(
    target: str, path: str, requests: list[bytes], marker: bytes, seconds: float, counts: Any, ready: Any
) -> None:
    """A child process's body: place one stream per request, set ``ready``, drain for ``seconds``."""
    streams = [open_stream(target, path, r) for r in requests]
    ready.set()
    drain(streams, marker, time.monotonic() + seconds, counts)
