"""Assembles the gRPC server: the service, reflection, health, limits, graceful shutdown."""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import signal
from pathlib import Path
from typing import TYPE_CHECKING

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
from sowdb.api.starting import Health, StartupGate
from sowdb.auth import Authenticator, view_sources
from sowdb.config import Config, ConfigError, load_config
from sowdb.engine import Clock, Engine, Feed, FollowingClock, system_clock
from sowdb.engine.starting import HOLD_ENV, StartProgress
from sowdb.engine.stats import StatsSnapshot
from sowdb.engine.upkeep import run_upkeep
from sowdb.logs import REDACT
from sowdb.metrics import ClusterFigures, MetricsServer, serve_metrics
from sowdb.ports import bind, connection_limits, credentials
from sowdb.storage import Store, store_memory
from sowdb.workers.feed_rpc import serve_feed
from sowdb_api.v1 import admin_pb2, data_pb2

if TYPE_CHECKING:  # imported when a console is configured: HTTP, Connect and their protobuf runtime
    from sowdb.cluster.node import Node
    from sowdb.console.server import ConsoleServer

log = logging.getLogger("sowdb.server")

SHUTDOWN_GRACE_S = 5.0

GATED_SERVICES = (SERVICE_NAME, ADMIN_SERVICE_NAME, DATA_SERVICE_NAME, "sowdb.v1.ReplicationService")
"""The services whose calls are answered UNAVAILABLE while the state loads."""


class SowServer:
    """One sowd instance: engine + store + gRPC server.

    Usage: ``port = await server.start()``, then ``await server.stop()``.
    """

    def __init__(self, config: Config, *, clock: Clock = system_clock, worker_socket: str = "") -> None:
        self.config = config
        self.worker_socket = worker_socket  # the writer of ``sowd --workers``: its readers' Unix socket
        self.feed: Feed | None = None  # the writer's feed to its readers, once loaded
        self.clock = clock
        self.engine: Engine | None = None
        self.port = 0
        self.console: ConsoleServer | None = None
        """The console's HTTP side (SPEC §12), when ``[server] http_listen`` is set."""
        self._server: grpc.aio.Server | None = None
        self._store: Store | None = None
        self._starting()
        self._upkeep: asyncio.Task[None] | None = None
        self._health_updates: set[asyncio.Task[None]] = set()
        self.auth = Authenticator(config.security, view_sources(config))
        self.metrics: MetricsServer | None = None  # on [server] metrics_listen
        self.node: Node | None = None  # on [cluster] (SPEC §13)
        self.following = FollowingClock(clock)  # a node's clock: the journal's time on a replica

    def _starting(self) -> None:
        """The start-up's progress, gate and health service, as before a first start."""
        self.progress = StartProgress(os.environ.get(HOLD_ENV))
        """How far start-up has come: what calls are answered while the state loads (issue 36)."""
        self._gate = StartupGate(GATED_SERVICES, self.progress.message)
        self._health = Health(self._not_serving)

    async def start(self) -> int:
        """Listen, then load the state and serve (:meth:`listen`, :meth:`load`); returns the port."""
        port = await self.listen()
        await self.load()
        return port

    async def listen(self) -> int:
        """Take the port and the data directory, and answer calls while the state is not
        loaded yet; returns the bound port.

        The two things another process can hold — the port and the data directory's lock — are
        taken first, so that a second sowd, or a port in use, is refused at once rather than
        after a recovery or a load that can take minutes. Then the server answers: every call
        of the sowdb services UNAVAILABLE with the load's progress, health NOT_SERVING, the
        console's ``/status`` and ``/metrics`` not ready (issue 36), until :meth:`load` is done.

        Raises:
            OSError: the address cannot be bound (one line, e.g. already in use).
            StoreLocked: another process has the data directory open.
        """
        cfg = self.config.server
        limit = cfg.max_message_bytes
        worker_socket = self.worker_socket
        self._starting()  # fresh: a server stopped and started again begins its start-up anew
        # before the port opens: a client's first call may come while the state loads
        logging.getLogger("grpc._cython.cygrpc").addFilter(_CLIENT_GONE)
        logging.getLogger("grpc._cython.cygrpc").addFilter(REDACT)  # also where sowd's handler is not
        server = grpc.aio.server(
            options=[
                ("grpc.max_receive_message_length", limit),
                ("grpc.max_send_message_length", limit),
                ("grpc.so_reuseport", 1 if worker_socket else 0),  # a group shares its supervisor's port
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

            console = ConsoleServer(self.config, self.auth, self.progress)
        try:
            self.port = bind(server, cfg.listen, credentials(self.config.security), shared=bool(worker_socket))
            if worker_socket:
                serve_feed(server, worker_socket, lambda: self.feed, self.auth.rights)
            if console is not None:
                console.bind()
                server.add_insecure_port(console.grpc_target)
            if self.config.cluster is not None:
                from sowdb.cluster.catchup import install_checkpoint
                from sowdb.cluster.dcs import check_access

                await check_access(self.config.cluster)  # etcd refusing this node stops it: PermissionError
                install_checkpoint(cfg.data_dir)  # a checkpoint copied before the last stop goes in first
            self._store = Store(Path(cfg.data_dir), fsync=cfg.fsync, memory=store_memory(cfg))
        except BaseException:
            await _abandon(server, console)
            raise
        server.add_generic_rpc_handlers((self._gate,))
        health_pb2_grpc.add_HealthServicer_to_server(self._health, server)
        services = (SERVICE_NAME, ADMIN_SERVICE_NAME, DATA_SERVICE_NAME, reflection.SERVICE_NAME, health.SERVICE_NAME)
        reflection.enable_server_reflection(services, server)
        self._server = server
        try:
            if cfg.metrics_listen:
                self.metrics = serve_metrics(
                    cfg.metrics_listen,
                    self._stats,
                    self.config.security,
                    self.auth.metrics_guard(),
                    cluster=self._cluster_figures,
                    progress=self.progress,
                )
            await self._set_health(False)
            await server.start()
            if console is not None:
                await console.start()
                self.console = console
        except BaseException:
            await self.stop(0)
            if console is not None and self.console is None:
                await console.stop()
            raise
        return self.port

    async def load(self) -> None:
        """Recover and load the state (on a thread, while the event loop answers calls with its
        progress), then serve: the services take over from the start-up gate.

        Raises:
            StoreUnusable: the store cannot be used as it is (the server is stopped then).
        """
        assert self._server is not None and self._store is not None, "listen() first"
        store = self._store
        try:
            self.engine = await asyncio.to_thread(self._open_engine, store)
        except BaseException:
            await self.stop(0)
            raise
        tune_gc()
        if self.worker_socket:
            self.feed = self.engine.feed()
        add_service(SowServicer(self.engine, self.auth), self._gate)
        admin = AdminServicer(self.engine, self.auth)
        add_service(admin, self._gate, ADMIN_SERVICE, admin_pb2)
        if self.config.cluster is not None:  # SPEC §13: a node of a cluster (sowdb.cluster.node), its peer port
            from sowdb.api.replication import serve_node

            self.node = await serve_node(self.config, self.engine, self.auth, self._gate, self.port, self.following)
            admin.cluster, admin.switchover = self.node.status, self.node.switchover
        add_service(DataServicer(self.engine, self.auth), self._gate, DATA_SERVICE, data_pb2)
        self.progress.done()
        self._gate.open()
        if self.node is not None:
            await self.node.start()
        self._upkeep = asyncio.create_task(run_upkeep(self.engine), name="sowdb-upkeep")
        await self._set_health(store.writable)
        store.watch(self._storage_changed)

    def _open_engine(self, store: Store) -> Engine:
        """Recover and load (on the loading thread): a fork found before the last stop is cut
        first, on a node of a cluster, whose engine takes the journal's time while it is a
        replica (HA-2; its Node says when)."""
        if self.config.cluster is not None:
            from sowdb.cluster.fork import cut_at_fork

            cut_at_fork(store, self.config)
        clock = self.following if self.config.cluster is not None else self.clock
        return Engine.open(self.config, store, clock=clock, progress=self.progress)

    def addresses(self) -> str:
        """The console's and the metrics' addresses, as start-up lines end: ``; console URL``."""
        out = f"; console {self.console.url}" if self.console is not None else ""
        if self.metrics is not None:
            tls = self.config.security is not None and self.config.security.tls_cert
            host = self.config.server.metrics_listen.rpartition(":")[0]
            out += f"; metrics {'https' if tls else 'http'}://{host}:{self.metrics.port}/metrics"
        return out

    def _stats(self) -> StatsSnapshot | None:
        """The engine's figures for ``/metrics``; None while the state loads."""
        return self.engine.stats() if self.engine is not None else None

    def _not_serving(self) -> str | None:
        """Why health says NOT_SERVING, in one line (``sow ping`` shows it)."""
        if not self.progress.ready:
            return self.progress.message()
        if self._store is not None and not self._store.writable:
            return "the storage cannot be written (e.g. the disk is full); writes are refused until it can"
        return None

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
        return ClusterFigures.of(self.node.status(), self.node.sync.fallbacks, self.node.refused)

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
        if self.feed is not None:
            self.feed.rights()  # the readers reload at this point of the order
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
        elif self._store is not None:  # stopped before the state was loaded
            self._store.close()
        self._store = None


async def _abandon(server: grpc.aio.Server, console: ConsoleServer | None) -> None:
    """Let go of what a start that failed had taken: the ports and the console's socket."""
    if console is not None:
        await console.stop()
    await server.stop(None)


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


async def run(config: Config, worker_socket: str = "") -> None:
    """Run until SIGTERM or SIGINT, then shut down gracefully (``worker_socket``: as the writer
    of a ``sowd --workers`` group, :mod:`sowdb.workers`)."""
    server = SowServer(config, worker_socket=worker_socket)
    port = await server.listen()
    host = config.server.listen.rsplit(":", 1)[0]
    # Calls are answered from here on (UNAVAILABLE, with the progress, until the state is loaded).
    starting = f"sowd starting on {host}:{port}: loading the state from {config.server.data_dir}"
    print(f"{starting}{server.addresses()}", flush=True)
    await server.load()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if not config.source.startswith("<"):  # a file, not the built-in demo: SIGHUP re-reads its rights
        loop.add_signal_handler(signal.SIGHUP, _reload_from, server, config.source)
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
    if server.node is not None and server.node.restart.is_set():
        # what it serves is about to be cut or replaced: its calls are not waited for (a
        # subscriber's stream would hold the stop for the whole grace)
        log.info("shutting down at once: this node starts again to cut its journal or install a copy")
        await server.stop(grace=0.0)
    else:
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
