"""The browser's side of the gateway, spoken by hand over ``http.client``: Connect unary calls,
and Connect or gRPC-web server streams read one envelope at a time (blocking: call through
``asyncio.to_thread``)."""

from __future__ import annotations

import base64
import http.client
import json
import struct
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

from google.protobuf.message import Message
from google.rpc import error_details_pb2, status_pb2

END_STREAM = 0x02
"""Connect's flag of the last envelope (its JSON holds the error, if any)."""
GRPC_WEB_TRAILERS = 0x80
"""gRPC-web's flag of the envelope that carries the trailers."""

CONTENT_TYPES = {"connect": "application/connect+proto", "grpc-web": "application/grpc-web+proto"}


@dataclass
class WireError:
    """A call's error as the browser receives it: code, message, and the details unpacked."""

    code: str
    message: str
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def error_info(self) -> error_details_pb2.ErrorInfo:
        return error_details_pb2.ErrorInfo.FromString(self.details["google.rpc.ErrorInfo"])

    @property
    def bad_request(self) -> error_details_pb2.BadRequest:
        return error_details_pb2.BadRequest.FromString(self.details["google.rpc.BadRequest"])


def _b64(text: str) -> bytes:
    return base64.b64decode(text + "=" * (-len(text) % 4))


def connect_error(body: dict[str, Any]) -> WireError:
    """A Connect error object (``{"code", "message", "details": [{"type", "value"}]}``)."""
    details = {d["type"]: _b64(d["value"]) for d in body.get("details", [])}
    return WireError(body["code"], body.get("message", ""), details)


def _connection(base_url: str) -> http.client.HTTPConnection:
    url = urlsplit(base_url)
    host, port = url.hostname, url.port
    assert host is not None, base_url
    assert port is not None, base_url
    return http.client.HTTPConnection(host, port, timeout=15)


def unary(base_url: str, path: str, request: Message, token: str = "") -> tuple[int, bytes]:
    """A Connect unary call: (HTTP status, body: the response message, or a JSON error)."""
    conn = _connection(base_url)
    headers = {"content-type": "application/proto", **({"authorization": f"Bearer {token}"} if token else {})}
    conn.request("POST", path, body=request.SerializeToString(), headers=headers)
    response = conn.getresponse()
    body = response.read()
    conn.close()
    return response.status, body


class Stream:
    """A server-streaming call: :meth:`next` gives each message's bytes, then raises
    :class:`StopIteration` at a clean end or returns the :class:`WireError` it ended with."""

    def __init__(self, base_url: str, path: str, request: Message, *, protocol: str = "connect", token: str = ""):
        self.protocol = protocol
        self.conn = _connection(base_url)
        body = request.SerializeToString()
        headers = {"content-type": CONTENT_TYPES[protocol]}
        if token:
            headers["authorization"] = f"Bearer {token}"
        self.conn.request("POST", path, body=struct.pack(">BI", 0, len(body)) + body, headers=headers)
        self.response = self.conn.getresponse()
        assert self.response.status == 200, (self.response.status, self.response.read())

    def next(self) -> bytes | WireError:
        flags, size = struct.unpack(">BI", self.response.read(5))
        payload = self.response.read(size)
        if self.protocol == "connect" and flags & END_STREAM:
            end = json.loads(payload or b"{}")
            if "error" not in end:
                raise StopIteration
            return connect_error(end["error"])
        if self.protocol == "grpc-web" and flags & GRPC_WEB_TRAILERS:
            trailers = dict(line.split(":", 1) for line in payload.decode().strip().split("\r\n"))
            trailers = {k.strip().lower(): v.strip() for k, v in trailers.items()}
            if trailers.get("grpc-status", "0") == "0":
                raise StopIteration
            details: dict[str, Any] = {}
            if "grpc-status-details-bin" in trailers:
                status = status_pb2.Status.FromString(_b64(trailers["grpc-status-details-bin"]))
                details = {d.type_url.rsplit("/", 1)[-1]: d.value for d in status.details}
            return WireError(trailers["grpc-status"], unquote(trailers.get("grpc-message", "")), details)
        return payload

    def close(self) -> None:
        self.conn.close()


def post(
    base_url: str, path: str, body: bytes, content_type: str, token: str = ""
) -> tuple[int, dict[str, str], bytes]:
    """One POST as any HTTP client makes it: (HTTP status, headers, the whole body)."""
    conn = _connection(base_url)
    headers = {"content-type": content_type, **({"authorization": f"Bearer {token}"} if token else {})}
    conn.request("POST", path, body=body, headers=headers)
    response = conn.getresponse()
    out = response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    conn.close()
    return out


def frames(*messages: dict[str, Any]) -> bytes:
    """Connect streaming frames of JSON messages (flags 0, big-endian length, the JSON)."""
    out = b""
    for message in messages:
        data = json.dumps(message).encode()
        out += struct.pack(">BI", 0, len(data)) + data
    return out


def read_frames(body: bytes) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The JSON messages of a Connect streaming response, and its end-of-stream JSON."""
    messages: list[dict[str, Any]] = []
    at = 0
    while at < len(body):
        flags, size = struct.unpack(">BI", body[at : at + 5])
        payload = json.loads(body[at + 5 : at + 5 + size] or b"{}")
        at += 5 + size
        if flags & END_STREAM:
            assert at == len(body), "bytes after the end of the stream"
            return messages, payload
        messages.append(payload)
    raise AssertionError("the stream has no end frame")
