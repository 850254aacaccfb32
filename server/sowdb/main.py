"""``sowd``: the server command.

    sowd [--config FILE] [--listen HOST:PORT] [--data-dir DIR] [--http-listen HOST:PORT]
         [--metrics-listen HOST:PORT] [--log-level LEVEL] [--log-format text|json] [--print-config]
         [--node NAME] [--advertise HOST:PORT]
    sowd rebuild    [--config FILE] [--data-dir DIR]
    sowd verify     [--config FILE] [--data-dir DIR]
    sowd repair     [--config FILE] [--data-dir DIR]
    sowd checkpoint DIR [--config FILE] [--data-dir DIR] [--server HOST:PORT]
    sowd switchover [--config FILE] [--server HOST:PORT] [--to NODE]
    sowd cut-epoch  --epoch E | --from-bookmark N [--config FILE] [--data-dir DIR]
    sowd hash-token [TOKEN | --generate]
    sowd --version

With no config it serves the built-in demo config on 127.0.0.1:9007 with data in ./data.
``rebuild`` recreates ``current`` and ``history`` from the journal (J-2); ``verify`` reads the
whole store back and checks it; ``repair`` makes a data directory that cannot be opened openable
again — all three with the server stopped. ``checkpoint`` writes a consistent copy of the store
while the server runs (through the server, or directly when none is running). ``switchover``
asks a cluster's primary to hand its role to a replica (``--to``, else the most advanced one)
with nothing lost (SPEC §13, HA-4). ``cut-epoch`` cuts a stopped node's journal back to just
before an epoch etcd never granted (issue 40), the entries cut kept in its lost-writes file.
A port in use, a
data directory held by another sowd, or one that cannot be opened as it is, is reported in one
line, before any recovery or loading.
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import sys
from importlib.metadata import PackageNotFoundError, version

from sowdb.auth import hash_token
from sowdb.config import (
    Config,
    ConfigError,
    config_toml,
    demo_config,
    load_config,
    parse_listen,
    with_cluster_overrides,
    with_overrides,
)
from sowdb.engine import LOAD, Engine
from sowdb.logs import LOG_FORMATS, configure_logging
from sowdb.operations import AdminCaller, checkpoint, cut_epoch, switchover, verify
from sowdb.server import run
from sowdb.storage import Store, repair, store_memory
from sowdb.workers.reader import run_reader
from sowdb.workers.supervisor import supervise

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="sowd", description="sowdb State-of-the-World server")
    parser.add_argument(
        "command",
        nargs="?",
        default="serve",
        choices=["serve", "rebuild", "verify", "repair", "checkpoint", "switchover", "cut-epoch", "hash-token"],
        help="serve (the default); rebuild current/history from the journal; verify the store; repair a data "
        "directory that cannot be opened; checkpoint DIR (a consistent copy, while serving); switchover (a "
        "cluster's primary hands its role to a replica); cut-epoch (cut a poisoned epoch out of a stopped "
        "node's journal); hash-token (the SHA-256 a users file holds for a token)",
    )
    parser.add_argument(
        "directory",
        nargs="?",
        metavar="ARG",
        help="checkpoint: the new directory to write the copy into; hash-token: the token (else read from stdin)",
    )
    parser.add_argument("--epoch", type=int, help="cut-epoch: the epoch whose entries, and all after, are cut")
    parser.add_argument("--from-bookmark", type=int, help="cut-epoch: cut from this bookmark on (instead of --epoch)")
    parser.add_argument("--generate", action="store_true", help="hash-token: make a new random token, and its hash")
    parser.add_argument(
        "--server", help="checkpoint, switchover: the running sowd to ask (default: the config's listen address)"
    )
    parser.add_argument(
        "--to", metavar="NODE", help="switchover: the replica to hand over to (default: the most advanced)"
    )
    parser.add_argument("--token", help="checkpoint, switchover: an admin user's token (default $SOW_TOKEN)")
    parser.add_argument(
        "--cacert", metavar="FILE", help="checkpoint over TLS: the CA to trust (default: the config's tls_cert)"
    )
    parser.add_argument("--cert", metavar="FILE", help="checkpoint with mutual TLS: the client certificate")
    parser.add_argument("--key", metavar="FILE", help="checkpoint with mutual TLS: its private key")
    parser.add_argument("--config", help="TOML config file (default: the built-in demo config)")
    parser.add_argument("--listen", help="HOST:PORT to listen on (overrides [server] listen)")
    parser.add_argument("--data-dir", help="RocksDB data directory (overrides [server] data_dir)")
    parser.add_argument(
        "--workers",
        metavar="N",
        help="processes serving the port (overrides [server] workers): auto (the default) = the cores available; "
        "1 = this one; N > 1 = a writer and N - 1 readers that serve queries and subscriptions",
    )
    parser.add_argument("--worker-role", choices=["writer", "reader"], help=argparse.SUPPRESS)
    parser.add_argument("--worker-socket", help=argparse.SUPPRESS)
    parser.add_argument(
        "--http-listen",
        metavar="HOST:PORT",
        help="serve the web console there (overrides [server] http_listen), e.g. 127.0.0.1:9080",
    )
    parser.add_argument("--node", help="this node's name in its [cluster] (overrides [cluster] node)")
    parser.add_argument(
        "--advertise", metavar="HOST:PORT", help="what clients and replicas dial (overrides [cluster] advertise)"
    )
    parser.add_argument(
        "--metrics-listen",
        metavar="HOST:PORT",
        help="serve Prometheus metrics there, at /metrics (overrides [server] metrics_listen), e.g. 127.0.0.1:9107",
    )
    parser.add_argument(
        "--print-config",
        action="store_true",
        help="print the effective config (the file or the built-in demo, with the flags applied) as TOML, and exit",
    )
    parser.add_argument(
        "--log-level",
        default="INFO",
        type=str.upper,
        choices=LOG_LEVELS,
        metavar="LEVEL",
        help=f"{', '.join(LOG_LEVELS)} (default INFO; any case, e.g. --log-level debug)",
    )
    parser.add_argument(
        "--log-format",
        default="text",
        choices=LOG_FORMATS,
        help="text (default) or json: one JSON object a line, with each event's fields (e.g. a refused call's "
        "code, rpc, user, peer, topic)",
    )
    parser.add_argument("--version", action="version", version=f"sowd {_version()}")
    args = parser.parse_intermixed_args(argv)  # "checkpoint --server S DIR" too
    if args.command == "hash-token":
        return _hash_token(args.directory, args.generate)
    configure_logging(args.log_level, args.log_format)
    try:
        config = load_config(args.config) if args.config else demo_config()
        config = with_overrides(
            config,
            listen=args.listen,
            data_dir=args.data_dir,
            http_listen=args.http_listen,
            metrics_listen=args.metrics_listen,
            workers=args.workers,
        )
        serving = args.command == "serve"
        config = with_cluster_overrides(config, node=args.node, advertise=args.advertise, serving=serving)
    except ConfigError as exc:
        print(f"sowd: invalid config: {exc}", file=sys.stderr)
        return 2
    if args.print_config:
        sys.stdout.write(config_toml(config))
        return 0
    if args.command == "checkpoint":
        caller = AdminCaller(args.server, args.token, args.cacert, args.cert, args.key)
        return checkpoint(config, args.directory, caller)
    if args.command == "switchover":
        return switchover(config, args.to, AdminCaller(args.server, args.token, args.cacert, args.cert, args.key))
    if args.command == "cut-epoch":
        return cut_epoch(config, args.epoch, args.from_bookmark)
    if args.command in ("rebuild", "verify", "repair"):
        return {"rebuild": _rebuild, "verify": verify, "repair": _repair}[args.command](config)
    if args.worker_role == "reader":
        with asyncio.Runner(loop_factory=_timed_loop) as runner:
            return runner.run(run_reader(config, parse_listen(config.server.listen)[1], args.worker_socket))
    if args.worker_role is None and config.server.processes > 1:
        return supervise(config, _without_workers(sys.argv[1:] if argv is None else argv))
    try:
        with asyncio.Runner(loop_factory=_timed_loop) as runner:
            runner.run(run(config, worker_socket=args.worker_socket or ""))
    except OSError as exc:  # a port in use, a data directory locked by another sowd, ...
        print(f"sowd: {exc}", file=sys.stderr)
        return 1
    return 0


def _without_workers(argv: list[str]) -> list[str]:
    """The command line a group's processes start with: the supervisor's, less ``--workers``
    (each is told its role; a config's ``workers`` is ignored in a process with a role)."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--workers":
            skip = True
        elif not arg.startswith("--workers="):
            out.append(arg)
    return out


def _timed_loop() -> asyncio.AbstractEventLoop:
    """The server's loop, its idle time measured: live delivery batches by how busy it is
    (:mod:`sowdb.engine.live.loop_load`)."""
    return asyncio.SelectorEventLoop(LOAD.selector())


def _version() -> str:
    """The installed distribution's version (what ``pip`` installed), or "unknown"."""
    try:
        return version("sowdb")
    except PackageNotFoundError:
        return "unknown"


def _rebuild(config: Config) -> int:
    try:
        store = Store(config.server.data_dir, fsync=config.server.fsync, memory=store_memory(config.server))
    except OSError as exc:
        print(f"sowd rebuild: {exc}", file=sys.stderr)
        return 1
    try:
        report = Engine.rebuild(store, config)
    finally:
        store.close()
    if report is None:
        print("sowd rebuild: the journal is empty; nothing to rebuild")
    else:
        print(
            f"sowd rebuild: replayed {report.entries} journal entries (bookmarks {report.first}..{report.last}) "
            f"in {report.seconds:.2f} s ({report.rate:,.0f} entries/s)"
        )
    return 0


def _hash_token(token: str | None, generate: bool) -> int:
    """Print the SHA-256 of a token for a users file (the token itself is never stored)."""
    if generate:
        token = secrets.token_urlsafe(32)
        print(f'token = "{token}"        # give this to the user, once')
        print(f'token_sha256 = "{hash_token(token)}"')
        return 0
    token = token if token is not None else sys.stdin.readline().strip()
    if not token:
        print("sowd hash-token: give a token (an argument, or one line on stdin), or --generate", file=sys.stderr)
        return 2
    print(hash_token(token))
    return 0


def _repair(config: Config) -> int:
    try:
        done = repair(config.server.data_dir)
    except OSError as exc:
        print(f"sowd repair: {exc}", file=sys.stderr)
        return 1
    print(f"sowd repair: {done}; now run `sowd verify`")
    return 0


if __name__ == "__main__":
    sys.exit(main())
