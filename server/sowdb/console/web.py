"""The console's HTTP application: its page, stylesheet and script, and the gateway beside them.

The page is three static files (``static/``): ``index.html`` and ``console.css`` are kept in the
repository, ``console.js`` is the TypeScript of ``clients/node/console`` bundled by esbuild
(``make setup`` builds it). Every other request goes to the Connect gateway, whose paths are
``/<service>/<method>``, so the two never overlap.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hypercorn.typing import ASGIReceiveCallable, ASGISendCallable, HTTPScope, Scope

from sowdb.console.gateway import Gateway

STATIC_DIR = Path(__file__).parent / "static"


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


class ConsoleApp:
    """ASGI: ``GET /`` and the page's two assets from :data:`STATIC_DIR`, the rest to the gateway."""

    def __init__(self, gateway: Gateway, static_dir: Path = STATIC_DIR) -> None:
        self.gateway = gateway
        self.static_dir = static_dir

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
        await self.gateway(scope, receive, send)

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


async def _lifespan(receive: ASGIReceiveCallable, send: ASGISendCallable) -> None:
    """Nothing to start or stop: the server owns the gateway's channel."""
    while True:
        event = await receive()
        if event["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif event["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
