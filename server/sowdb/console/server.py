"""The console's HTTP side of ``sowd`` (SPEC §12): hypercorn serving :class:`ConsoleApp` on
``[server] http_listen``, in the server's own process and event loop.

The gateway reaches the gRPC server over a Unix socket in a private directory (mode 0700) that
the gRPC server listens on beside its TCP port. Over TCP it would have to present whatever the
gRPC port demands (TLS, a client certificate under mTLS) and trust the server's certificate for
a loopback name; the socket is plain and reachable by this user only, and every call on it is
still authenticated by its bearer token like any other. The HTTP side itself uses the gRPC
port's certificate when ``[security] tls_cert`` is set, and asks browsers for a client
certificate when ``client_ca`` is, so the console is never an easier way in than the gRPC port.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import shutil
import ssl
import tempfile
from pathlib import Path

from hypercorn.asyncio.run import worker_serve
from hypercorn.config import Config as HypercornConfig
from hypercorn.config import Sockets
from hypercorn.utils import wrap_app

from sowdb.auth import Authenticator
from sowdb.config import Config
from sowdb.console import http2
from sowdb.console.gateway import Forwarder, Gateway
from sowdb.console.web import ConsoleApp
from sowdb.engine.starting import StartProgress

log = logging.getLogger("sowdb.console")

SHUTDOWN_GRACE_S = 1.0
"""How long stopping waits for HTTP requests in flight (the gateway's calls end at once)."""


class ConsoleServer:
    """The console's listener: :meth:`bind` (before the store opens, so a port in use is
    refused at once), then :meth:`start` once the gRPC server serves, then :meth:`stop`."""

    def __init__(
        self, config: Config, auth: Authenticator | None = None, progress: StartProgress | None = None
    ) -> None:
        self.listen = config.server.http_listen
        self.progress = progress  # the server's start-up: GET /status
        self.auth = auth  # the server's own: calls with no valid token are refused before their body
        self.max_message_bytes = config.server.max_message_bytes
        self._dir = Path(tempfile.mkdtemp(prefix="sowd-console-"))  # mode 0700
        self.grpc_target = f"unix:{self._dir / 'grpc.sock'}"
        """Where the gRPC server must also listen for the gateway (``add_insecure_port``)."""
        self.port = 0
        self.scheme = "http"
        self._hypercorn = HypercornConfig()
        self._hypercorn.errorlog = logging.getLogger("sowdb.console.http")
        self._hypercorn.graceful_timeout = SHUTDOWN_GRACE_S
        self._hypercorn.ssl_handshake_timeout = config.server.handshake_timeout_s  # hypercorn's default: 60 s
        security = config.security
        if security is not None and security.tls_cert:
            self.scheme = "https"
            self._hypercorn.certfile = security.tls_cert
            self._hypercorn.keyfile = security.tls_key
            if security.client_ca:
                self._hypercorn.ca_certs = security.client_ca
                self._hypercorn.verify_mode = ssl.CERT_REQUIRED
        self._sockets: Sockets | None = None
        self._forwarder: Forwarder | None = None
        self._stopping = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        """The page's address, e.g. ``http://127.0.0.1:9080/``."""
        host = self.listen.rpartition(":")[0]
        return f"{self.scheme}://{host}:{self.port}/"

    def bind(self) -> int:
        """Bind ``http_listen``; returns the port.

        Raises:
            OSError: the address cannot be bound, in one line.
        """
        self._hypercorn.bind = [self.listen]
        try:
            self._sockets = self._hypercorn.create_sockets()
        except OSError as exc:
            reason = "the address is already in use" if exc.errno == errno.EADDRINUSE else exc.strerror or str(exc)
            raise OSError(f"cannot listen on {self.listen} (http_listen): {reason}") from None
        listening = self._sockets.secure_sockets or self._sockets.insecure_sockets
        for sock in listening:
            # Listening now, not when hypercorn's task first runs: a browser (or a test) that
            # connects as soon as start() returns waits in the backlog instead of being refused.
            sock.listen(self._hypercorn.backlog)
        self.port = int(listening[0].getsockname()[1])
        return self.port

    async def start(self) -> None:
        """Serve the page and the gateway (the gRPC server is already listening on
        :attr:`grpc_target`)."""
        assert self._sockets is not None, "bind() first"
        http2.install()
        self._forwarder = Forwarder(self.grpc_target, self.max_message_bytes)
        app = ConsoleApp(
            Gateway(self._forwarder, max_message_bytes=self.max_message_bytes),
            auth=self.auth,
            max_body_bytes=self.max_message_bytes,
            progress=self.progress,
        )
        self._task = asyncio.create_task(
            worker_serve(
                wrap_app(app, self._hypercorn.wsgi_max_body_size, "asgi"),
                self._hypercorn,
                sockets=self._sockets,
                shutdown_trigger=self._stopping.wait,
            ),
            name="sowdb-console",
        )
        log.info("console on %s", self.url)

    async def stop(self) -> None:
        """End the gateway's calls (live grids see their stream end), stop listening, and
        remove the socket directory."""
        if self._forwarder is not None:
            await self._forwarder.close()
        self._stopping.set()
        if self._task is not None:
            try:
                await self._task
            except Exception:
                log.exception("the console's HTTP server failed while stopping")
            self._task = None
        elif self._sockets is not None:  # bound, never started
            for sock in self._sockets.secure_sockets + self._sockets.insecure_sockets:
                sock.close()
        shutil.rmtree(self._dir, ignore_errors=True)
