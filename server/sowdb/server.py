"""Assembles the gRPC server: the service, reflection, health, limits, graceful shutdown."""

from __future__ import annotations

import asyncio
import errno
import gc
import logging
import resource
import signal
import socket
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from sowdb.api.admin import AdminServicer
from sowdb.api.data import DataServicer
from sowdb.api.service import (
    ADMIN_SERVICE,
    ADMIN_SERVICE_NAME,
    DATA_SERVICE,
    DATA_SERVICE_NAME,
    SERVICE_NAME,
    add_service,
)
from sowdb.api.servicer import SowServicer
from sowdb.auth import Authenticator, view_sources
from sowdb.config import Config, ConfigError, SecurityConfig, ServerConfig, load_config, parse_listen
from sowdb.engine import Clock, Engine, FollowingClock, system_clock
from sowdb.engine.upkeep import run_upkeep
from sowdb.logs import REDACT
from sowdb.metrics import ClusterFigures, MetricsServer, serve_metrics
from sowdb.storage import Store, store_memory
from sowdb_api.v1 import admin_pb2, data_pb2

if TYPE_CHECKING:  # imported when a console is configured: HTTP, Connect and their protobuf runtime
    from sowdb.cluster.node import Node
    from sowdb.console.server import ConsoleServer

log = logging.getLogger("sowdb.server")

SHUTDOWN_GRACE_S = 5.0


class SowServer:
    """One sowd instance: engine + store + gRPC server.

    Usage: ``port = await server.start()``, then ``await server.stop()``.
    """

    def __init__(self, config: Config, *, clock: Clock = system_clock) -> None:
        self.config = config
        self.clock = clock
        self.engine: Engine | None = None
        self.port = 0
        self.console: ConsoleServer | None = None
        """The console's HTTP side (SPEC §12), when ``[server] http_listen`` is set."""
        self._server: grpc.aio.Server | None = None
        self._health = health.aio.HealthServicer()
        self._upkeep: asyncio.Task[None] | None = None
        self._health_updates: set[asyncio.Task[None]] = set()
        self.auth = Authenticator(config.security, view_sources(config))
        self.metrics: MetricsServer | None = None  # on [server] metrics_listen
        self.node: Node | None = None  # on [cluster] (SPEC §13)
        self.following = FollowingClock(clock)  # a node's clock: the journal's time on a replica

    async def start(self) -> int:
        """Listen, open the store, load state, serve; returns the bound port.

        The two things another process can hold — the port and the data directory's lock — are
        taken first, so that a second sowd, or a port in use, is refused at once rather than
        after a recovery or a load that can take minutes. The port is bound here but accepts
        connections only once the state is loaded (``server.start()``).

        Raises:
            OSError: the address cannot be bound (one line, e.g. already in use).
            StoreLocked: another process has the data directory open.
        """
        cfg = self.config.server
        limit = cfg.max_message_bytes
        server = grpc.aio.server(
            options=[
                ("grpc.max_receive_message_length", limit),
                ("grpc.max_send_message_length", limit),
                ("grpc.so_reuseport", 0),
                # clients ping idle connections (HA-5: a blackholed server is noticed in seconds);
                # gRPC's defaults would answer a ping more often than every 5 min with GOAWAY
                ("grpc.keepalive_permit_without_calls", 1),
                ("grpc.http2.min_ping_interval_without_data_ms", 500),
                *connection_limits(cfg),
            ]
        )
        console = None
        if cfg.http_listen:
            from sowdb.console.server import ConsoleServer

            console = ConsoleServer(self.config, self.auth)
        try:
            self.port = _bind(server, cfg.listen, _credentials(self.config.security))
            if console is not None:
                console.bind()
                server.add_insecure_port(console.grpc_target)
            if self.config.cluster is not None:  # a checkpoint copied before the last stop goes in first
                from sowdb.cluster.catchup import install_checkpoint

                install_checkpoint(cfg.data_dir)
            store = Store(Path(cfg.data_dir), fsync=cfg.fsync, memory=store_memory(cfg))
        except BaseException:
            await _abandon(server, console)
            raise
        try:
            if self.config.cluster is not None:  # a fork found before the last stop is cut first
                from sowdb.cluster.fork import cut_at_fork

                cut_at_fork(store, self.config)
            # a node's engine takes the journal's time while it is a replica (HA-2; its Node says when)
            clock = self.following if self.config.cluster is not None else self.clock
            self.engine = Engine.open(self.config, store, clock=clock)
        except BaseException:
            store.close()
            await _abandon(server, console)
            raise
        if cfg.metrics_listen:
            try:
                self.metrics = serve_metrics(
                    cfg.metrics_listen,
                    self.engine.stats,
                    self.config.security,
                    self.auth.metrics_guard(),
                    cluster=self._cluster_figures,
                )
            except BaseException:
                self.engine.close()
                self.engine = None
                await _abandon(server, console)
                raise
        tune_gc()
        logging.getLogger("grpc._cython.cygrpc").addFilter(_CLIENT_GONE)
        logging.getLogger("grpc._cython.cygrpc").addFilter(REDACT)  # also where sowd's handler is not
        add_service(SowServicer(self.engine, self.auth), server)
        admin = AdminServicer(self.engine, self.auth)
        add_service(admin, server, ADMIN_SERVICE, admin_pb2)
        if self.config.cluster is not None:  # SPEC §13: a node of a cluster (sowdb.cluster.node)
            from sowdb.cluster.node import Node
            from sowdb.cluster.replication import ReplicationServicer
            from sowdb_api.v1 import replication_pb2

            self.node = Node(self.config.cluster, self.engine, self.port, self.following)
            admin.cluster = self.node.status
            admin.switchover = self.node.switchover
            replication = replication_pb2.DESCRIPTOR.services_by_name["ReplicationService"]
            add_service(ReplicationServicer(self.node, self.auth), server, replication, replication_pb2)
        add_service(DataServicer(self.engine, self.auth), server, DATA_SERVICE, data_pb2)
        health_pb2_grpc.add_HealthServicer_to_server(self._health, server)
        services = (SERVICE_NAME, ADMIN_SERVICE_NAME, DATA_SERVICE_NAME, reflection.SERVICE_NAME, health.SERVICE_NAME)
        reflection.enable_server_reflection(services, server)
        await server.start()
        self._server = server
        if console is not None:
            await console.start()
            self.console = console
        if self.node is not None:
            await self.node.start()
        self._upkeep = asyncio.create_task(run_upkeep(self.engine), name="sowdb-upkeep")
        await self._set_health(store.writable)
        store.watch(self._storage_changed)
        return self.port

    async def _set_health(self, serving: bool) -> None:
        """SERVING, or NOT_SERVING while the storage cannot be written (E-2): a load balancer
        or supervisor then stops sending writes, and health says when they may resume."""
        status = health_pb2.HealthCheckResponse.SERVING if serving else health_pb2.HealthCheckResponse.NOT_SERVING
        for name in ("", SERVICE_NAME):
            await self._health.set(name, status)

    def _cluster_figures(self) -> ClusterFigures | None:
        """The node's figures for ``/metrics`` (None: a server alone, or a node not started yet)."""
        if self.node is None:
            return None
        return ClusterFigures.of(self.node.status(), self.node.sync.fallbacks)

    def _storage_changed(self, writable: bool) -> None:
        task = asyncio.get_running_loop().create_task(self._set_health(writable))
        self._health_updates.add(task)
        task.add_done_callback(self._health_updates.discard)

    def reload(self, config: Config) -> int:
        """A-4: take the users and roles of ``config`` (the rest of a config needs a restart): new
        calls get the new rights at once, and live subscriptions that lost theirs end with
        PERMISSION_DENIED; returns how many ended."""
        self.auth.load(config.security)  # the views stay those the server started with
        ended = self.engine.reauthorize(self.auth.rights) if self.engine is not None else 0
        users = len(config.security.users) if config.security else 0
        log.info("reloaded users and roles from %s: %d users; %d subscriptions ended", config.source, users, ended)
        return ended

    async def stop(self, grace: float = SHUTDOWN_GRACE_S) -> None:
        """Stop accepting calls, let running ones finish for ``grace`` seconds, close the store."""
        await self._health.enter_graceful_shutdown()
        if self.console is not None:  # first: its calls are calls on the gRPC server
            await self.console.stop()
            self.console = None
        if self.metrics is not None:
            await self.metrics.stop()
            self.metrics = None
        if self.node is not None:
            await self.node.stop()
            self.node = None
        if self._upkeep is not None:
            self._upkeep.cancel()
            await asyncio.gather(self._upkeep, return_exceptions=True)
            self._upkeep = None
        if self._server is not None:
            await self._server.stop(grace)
            self._server = None
        if self.engine is not None:
            self.engine.close()
            self.engine = None


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

    Not used: ``grpc.max_connection_idle_ms`` would also close the idle connections of honest
    clients between calls, which the handshake timeout and the cap make unnecessary.
    """
    cap = cfg.max_connections
    if not cap:
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        cap = max(64, soft // 2) if soft != resource.RLIM_INFINITY else 65_536
    return [
        ("grpc.server_handshake_timeout_ms", max(1, int(cfg.handshake_timeout_s * 1000))),
        ("grpc.max_allowed_incoming_connections", cap),
    ]


async def _abandon(server: grpc.aio.Server, console: ConsoleServer | None) -> None:
    """Let go of what a start that failed had taken: the ports and the console's socket."""
    if console is not None:
        await console.stop()
    await server.stop(None)


def _credentials(security: SecurityConfig | None) -> grpc.ServerCredentials | None:
    """TLS on the gRPC port when ``tls_cert`` is set; client certificates required when
    ``client_ca`` is (mutual TLS)."""
    if security is None or not security.tls_cert:
        return None
    key = Path(security.tls_key).read_bytes()
    cert = Path(security.tls_cert).read_bytes()
    ca = Path(security.client_ca).read_bytes() if security.client_ca else None
    return grpc.ssl_server_credentials([(key, cert)], root_certificates=ca, require_client_auth=ca is not None)


def _bind(server: grpc.aio.Server, listen: str, credentials: grpc.ServerCredentials | None = None) -> int:
    """Bind ``listen`` (HOST:PORT) for the server; returns the port.

    A port in use is first looked for with a plain socket, as gRPC binds (``SO_REUSEADDR``, so
    a previous server's connections in TIME_WAIT do not count): gRPC's own failure is a log line
    from its core plus an exception that says only "failed to bind".

    Raises:
        OSError: the address cannot be bound, in one line.
    """
    host, _, port_text = listen.rpartition(":")
    if port_text.isdigit() and int(port_text) != 0:
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


class _ClientGoneFilter(logging.Filter):
    """Drops grpcio's ERROR record for a stream write that failed because the client had gone.

    grpcio logs ``ExecuteBatchError raised in core`` whenever a subscriber disconnects while a
    frame is being sent; for a subscription that is the client leaving, which the stream's own
    cleanup handles, so it would only teach operators to ignore ERROR lines.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return "ExecuteBatchError raised in core" not in record.getMessage()


def tune_gc() -> None:
    """Keep the cyclic garbage collector off the publish path.

    Every stored record is a few long-lived container objects, so with a million records a
    default-tuned collector spends a large share of the publish time re-scanning them. The
    records loaded at start are moved out of its sight (``gc.freeze``), and young collections
    run every 10,000 allocations instead of 700; nothing in the engine relies on prompt cycle
    collection.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(10_000, 20, 100)


_CLIENT_GONE = _ClientGoneFilter()


async def run(config: Config) -> None:
    """Run until SIGTERM or SIGINT, then shut down gracefully."""
    server = SowServer(config)
    port = await server.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if not config.source.startswith("<"):  # a file, not the built-in demo: SIGHUP re-reads its rights
        loop.add_signal_handler(signal.SIGHUP, _reload_from, server, config.source)
    host = config.server.listen.rsplit(":", 1)[0]
    # Printed only once the signal handlers are in place, so a supervisor that waits for this
    # line can stop the server at once without killing it half-way.
    console = f"; console {server.console.url}" if server.console is not None else ""
    print(
        f"sowd listening on {host}:{port} (data {config.server.data_dir}, config {config.source}){console}", flush=True
    )
    waits = [asyncio.ensure_future(stop.wait())]
    if server.node is not None:  # a cluster node whose journal forked stops, to cut it at start
        waits.append(asyncio.ensure_future(server.node.restart.wait()))
    await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    for w in waits:
        w.cancel()
    log.info("shutting down")
    await server.stop()
    print("sowd stopped", flush=True)


def _reload_from(server: SowServer, source: str) -> None:
    try:
        config = load_config(source)
    except ConfigError as exc:
        log.error("SIGHUP: the config cannot be reloaded, the rights stay as they were: %s", exc)
        return
    server.reload(config)


def with_overrides(
    config: Config,
    *,
    listen: str | None,
    data_dir: str | None,
    http_listen: str | None = None,
    metrics_listen: str | None = None,
) -> Config:
    """The config with the command-line flags applied, their addresses checked as a config
    file's are.

    Raises:
        ConfigError: a flag's address is not HOST:PORT with a port of 0..65535.
    """
    addresses = {"listen": listen, "http_listen": http_listen, "metrics_listen": metrics_listen}
    changes: dict[str, Any] = {}
    for key, value in addresses.items():
        if value:
            try:
                parse_listen(value)
            except ValueError as exc:
                raise ConfigError(f"--{key.replace('_', '-')}: {exc}") from None
            changes[key] = value
    if data_dir:
        changes["data_dir"] = data_dir
    return replace(config, server=replace(config.server, **changes))
