"""The gRPC server's ports: binding an address with a one-line refusal, TLS credentials, and
the limits on what connections cost (split from :mod:`sowdb.server`, which assembles the server)."""

from __future__ import annotations

import errno
import resource
import socket
from pathlib import Path

import grpc

from sowdb.config import SecurityConfig, ServerConfig


def connection_limits(cfg: ServerConfig) -> list[tuple[str, int]]:
    """gRPC core's channel arguments that bound what connections cost before any call (issue 26:
    20,000 half-open TCP connections that never started TLS were each held 120 s, until a new
    admin client could not connect).

    - ``grpc.server_handshake_timeout_ms`` (core's default 120 s): the time a connection has to
      finish the TLS handshake and send the HTTP/2 preface and SETTINGS; past it core drops it.
    - ``grpc.max_allowed_incoming_connections`` (core's connection quota; no limit by default):
      past it a new connection is closed at once, so the process never runs out of descriptors
      (then nothing, not even the operator, gets in); by default half the open-files limit,
      leaving the rest to the store, the journal and the console.

    - ``grpc.max_connection_idle_ms`` (``idle_timeout``, 30 s; core's default: never): a
      connection with no call open for that long gets GOAWAY and is closed (issue 37, finding 4:
      an unauthenticated client that completed its handshakes and never called held every slot
      of the cap for ever, and an admin was refused). An honest client idle between calls
      reconnects on its next call (one handshake); one with a subscription open is never idle.
    """
    cap = cfg.max_connections
    if not cap:
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        cap = max(64, soft // 2) if soft != resource.RLIM_INFINITY else 65_536
    limits = [
        ("grpc.server_handshake_timeout_ms", max(1, int(cfg.handshake_timeout_s * 1000))),
        ("grpc.max_allowed_incoming_connections", cap),
    ]
    if cfg.idle_timeout_s > 0:
        limits.append(("grpc.max_connection_idle_ms", max(1, int(cfg.idle_timeout_s * 1000))))
    return limits


def credentials(security: SecurityConfig | None) -> grpc.ServerCredentials | None:
    """TLS on the gRPC port when ``tls_cert`` is set; client certificates required when
    ``client_ca`` is (mutual TLS)."""
    if security is None or not security.tls_cert:
        return None
    key = Path(security.tls_key).read_bytes()
    cert = Path(security.tls_cert).read_bytes()
    ca = Path(security.client_ca).read_bytes() if security.client_ca else None
    return grpc.ssl_server_credentials([(key, cert)], root_certificates=ca, require_client_auth=ca is not None)


def bind(
    server: grpc.aio.Server, listen: str, credentials: grpc.ServerCredentials | None = None, *, shared: bool = False
) -> int:
    """Bind ``listen`` (HOST:PORT) for the server; returns the port. ``shared``: a process of
    ``sowd --workers`` binds a port its supervisor holds (``SO_REUSEPORT``; not probed).

    A port in use is first looked for with a plain socket, as gRPC binds (``SO_REUSEADDR``, so
    a previous server's connections in TIME_WAIT do not count): gRPC's own failure is a log line
    from its core plus an exception that says only "failed to bind".

    Raises:
        OSError: the address cannot be bound, in one line.
    """
    host, _, port_text = listen.rpartition(":")
    if port_text.isdigit() and int(port_text) != 0 and not shared:
        try:
            addresses = socket.getaddrinfo(host.strip("[]") or None, int(port_text), type=socket.SOCK_STREAM)
        except socket.gaierror as exc:
            raise OSError(f"cannot listen on {listen}: {exc.strerror}") from None
        for family, kind, proto, _, address in addresses:
            with socket.socket(family, kind, proto) as probe:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:
                    probe.bind(address)
                except OSError as exc:
                    if exc.errno == errno.EADDRINUSE:
                        raise OSError(f"cannot listen on {listen}: the address is already in use") from None
                    # anything else (e.g. no IPv6 here): gRPC binds what it can, and judges
    try:
        port = server.add_insecure_port(listen) if credentials is None else server.add_secure_port(listen, credentials)
    except RuntimeError:
        port = 0
    if port == 0:
        raise OSError(f"cannot listen on {listen}")
    return port
