"""The console's HTTP application: its page, stylesheet and script, and the gateway beside them.

The page is three static files (``static/``): ``index.html`` and ``console.css`` are kept in the
repository, ``console.js`` is the TypeScript of ``clients/node/console`` bundled by esbuild
(``make setup`` builds it). Every other request goes to the Connect gateway, whose paths are
``/<service>/<method>``, so the two never overlap; ``/status`` says whether the server is ready
(while it loads its state at start-up the page's calls are answered ``unavailable: starting: N of
M records loaded``, which the page shows).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import orjson
from hypercorn.typing import ASGIReceiveCallable, ASGISendCallable, HTTPScope, Scope

from sowdb.auth import Authenticator
from sowdb.console.gateway import Gateway
from sowdb.engine.starting import StartProgress
from sowdb.errors import Unauthenticated

STATIC_DIR = Path(__file__).parent / "static"

STATUS_PATH = "/status"
"""Readiness as JSON: ``{"status": "starting", "message": "starting: 12 of 50 records loaded", ...}``."""


@dataclass(frozen=True)
class Asset:
    file: str
    content_type: str


ASSETS: dict[str, Asset] = {
    "/": Asset("index.html", "text/html; charset=utf-8"),
    "/console.css": Asset("console.css", "text/css; charset=utf-8"),
    "/console.js": Asset("console.js", "text/javascript; charset=utf-8"),
}

NOT_BUILT = (
    "The console's script (console.js) has not been built: run `make setup` in the sowdb checkout "
    "(it bundles clients/node/console with esbuild), then reload this page.\n"
)

_HEADERS = [
    # The page loads its own script and stylesheet and calls its own origin, nothing else; it may
    # not be framed (a token typed into a framed page could be watched by the framing site).
    (b"content-security-policy", b"default-src 'self'; frame-ancestors 'none'"),
    (b"x-content-type-options", b"nosniff"),
    (b"cache-control", b"no-cache"),
]


METHOD_RIGHTS: dict[str, str] = {
    **dict.fromkeys(["Publish", "SowDelete", "StageWrite"], "write"),
    **dict.fromkeys(["Sow", "SowAndSubscribe", "Subscribe", "OpenSnapshot", "ReadJournal", "DescribeJournal"], "read"),
    **dict.fromkeys(["Checkpoint", "Switchover"], "admin"),
}
"""The right a method needs on at least one topic (or the admin role); a caller with none of
it is refused on the headers. The gRPC port still checks the topic itself. Unlisted methods
answer every authenticated caller: ``ListTopics``, ``Stats``, ``ClusterStatus``, and those that
name a subscription, snapshot or stage by id, whose answer for another user's id must stay
NOT_FOUND, as for no such id (their bodies are small, and a JSON one is bounded)."""

ENVELOPE_ALLOWANCE = 64 * 1024
"""Bytes a request body may have beyond one message: Connect's envelopes and end message."""


class ConsoleApp:
    """ASGI: ``GET /`` and the page's two assets from :data:`STATIC_DIR`, the rest to the gateway.

    A gateway request is refused before its body is read when its token is not valid (``auth``)
    or its declared length is over a message (``max_body_bytes``): the gateway buffers a body
    whole, and 24 concurrent 16 MB bodies without a token, each answered 401 only once the gRPC
    port saw it, grew the process by 2.4 GB that it never gave back (issue 26). The gRPC port
    still makes the one authoritative check of every call that goes through.
    """

    def __init__(
        self,
        gateway: Gateway,
        static_dir: Path = STATIC_DIR,
        *,
        auth: Authenticator | None = None,
        max_body_bytes: int = 0,
        progress: StartProgress | None = None,
    ) -> None:
        self.gateway = gateway
        self.static_dir = static_dir
        self.auth = auth
        self.max_body_bytes = max_body_bytes
        self.progress = progress

    async def __call__(self, scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return  # no websockets here; the server closes the connection
        asset = ASSETS.get(scope["path"])
        if asset is not None and scope["method"] in ("GET", "HEAD"):
            await self._asset(scope, asset, send)
            return
        if scope["path"] == STATUS_PATH and scope["method"] in ("GET", "HEAD"):
            await self._status(scope, send)
            return
        refusal = self._refusal(scope)
        if refusal is not None:
            await _refuse(send, *refusal)
            return
        await self.gateway(scope, receive, send)

    def _refusal(self, scope: HTTPScope) -> tuple[int, str, str] | None:
        """(HTTP status, Connect code, message) for a request refused on its headers alone: a
        body over a message, two ``Authorization`` headers, no valid token, or a method that
        needs a right the caller holds on no topic (issue 37, findings 5, 6 and 14: a caller
        without rights had the gateway inflate 16 MB gzip bodies and decode 4.7 MB of JSON
        that the gRPC port then refused)."""
        headers = {k.lower(): v for k, v in scope["headers"]}
        length = headers.get(b"content-length", b"0")
        if self.max_body_bytes and (not length.isdigit() or int(length) > self.max_body_bytes + ENVELOPE_ALLOWANCE):
            return 413, "resource_exhausted", f"the request body is over the server's {self.max_body_bytes} bytes"
        if sum(1 for k, _ in scope["headers"] if k.lower() == b"authorization") > 1:
            return 400, "invalid_argument", "the request has two Authorization headers: send one"
        if self.auth is not None:
            authorization = headers.get(b"authorization")
            try:
                access = self.auth.access(authorization.decode("latin-1") if authorization is not None else None)
            except Unauthenticated as exc:
                return 401, "unauthenticated", exc.message
            method = scope["path"].rpartition("/")[2]
            right = METHOD_RIGHTS.get(method)
            if right is not None and not access.has_any(right):
                what = "an admin role" if right == "admin" else f"a {right} right on some topic"
                return 403, "permission_denied", f"user {access.user!r} may not call {method} (it needs {what})"
        return None

    async def _status(self, scope: HTTPScope, send: ASGISendCallable) -> None:
        """``GET /status``: whether the server serves, or how far its start-up has come (issue 36);
        503 while starting, so a load balancer's check may use it. No token: it says nothing a
        refused call would not."""
        ready = self.progress is None or self.progress.ready
        figures: dict[str, object] = {"status": "ready" if ready else "starting"}
        if self.progress is not None:
            figures |= {
                "message": self.progress.message(),
                "records_loaded": self.progress.loaded,
                "records_total": self.progress.total,
            }
        body = orjson.dumps(figures)
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *_HEADERS]
        status = 200 if ready else 503
        await send({"type": "http.response.start", "status": status, "headers": headers, "trailers": False})
        body = b"" if scope["method"] == "HEAD" else body
        await send({"type": "http.response.body", "body": body, "more_body": False})

    async def _asset(self, scope: HTTPScope, asset: Asset, send: ASGISendCallable) -> None:
        path = self.static_dir / asset.file
        try:
            body, status, content_type = path.read_bytes(), 200, asset.content_type
        except FileNotFoundError:
            body, status, content_type = NOT_BUILT.encode(), 503, "text/plain; charset=utf-8"
        headers = [(b"content-type", content_type.encode()), (b"content-length", str(len(body)).encode()), *_HEADERS]
        await send({"type": "http.response.start", "status": status, "headers": headers, "trailers": False})
        if scope["method"] == "HEAD":
            body = b""
        await send({"type": "http.response.body", "body": body, "more_body": False})


async def _refuse(send: ASGISendCallable, status: int, code: str, message: str) -> None:
    """A Connect error, sent without reading the request's body; the connection is closed after
    it (the unread body is never taken in)."""
    body = orjson.dumps({"code": code, "message": message})
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
        *_HEADERS,
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers, "trailers": False})
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def _lifespan(receive: ASGIReceiveCallable, send: ASGISendCallable) -> None:
    """Nothing to start or stop: the server owns the gateway's channel."""
    while True:
        event = await receive()
        if event["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif event["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
