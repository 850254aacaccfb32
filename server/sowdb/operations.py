"""``sowd verify``, ``sowd checkpoint``, ``sowd switchover`` and ``sowd cut-epoch``: the
operator's checks and backups of a store, the planned hand-over of a cluster's primary role
(SPEC §13, HA-4), and the cut of a poisoned epoch (issue 40, :func:`sowdb.cluster.fork.cut_epoch`).

``verify`` opens the store (the server must be stopped — or verify a checkpoint of a running one)
and reads all of it back: every block against its checksum, the journal's sequences contiguous,
each topic's records against its count. ``checkpoint`` asks the running server for a consistent
copy (``sowdb.v1.AdminService/Checkpoint``), or, when none answers, copies the stopped store
directly. Restoring is starting a server on the copy (``sowd --data-dir COPY``), or putting the
copy in place of the data directory while the server is stopped.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

import grpc

from sowdb.config import Config
from sowdb.storage import Store
from sowdb.storage.verify import verify as verify_store
from sowdb_address import dial_target
from sowdb_api.v1 import admin_pb2, admin_pb2_grpc


def cut_epoch(config: Config, epoch: int | None, from_bookmark: int | None) -> int:
    """``sowd cut-epoch``: print what was cut; 0 when done, 1 when the store cannot be opened,
    2 when the epoch is not the node's (nothing cut)."""
    from sowdb.cluster.fork import LOST_WRITES, EpochNotFound
    from sowdb.cluster.fork import cut_epoch as cut

    if not epoch and not from_bookmark:
        print("sowd cut-epoch: give --epoch E (or --from-bookmark N)", file=sys.stderr)
        return 2
    try:
        kept, count = cut(config, epoch or 0, from_bookmark or 0)
    except EpochNotFound as exc:
        print(f"sowd cut-epoch: {exc}; nothing cut", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"sowd cut-epoch: {exc} (stop the node first)", file=sys.stderr)
        return 1
    where = Path(config.server.data_dir) / LOST_WRITES
    print(f"sowd cut-epoch: the journal ends at bookmark {kept}; {count} entries cut, kept in {where}")
    return 0


def verify(config: Config) -> int:
    """Print what the check found; 0 when the store is whole, 1 otherwise."""
    path = config.server.data_dir
    try:
        store = Store(path)
    except OSError as exc:
        print(f"sowd verify: {exc}", file=sys.stderr)
        if "in use" in str(exc):
            print(
                "  a running server's store: `sowd checkpoint DIR`, then `sowd verify --data-dir DIR`", file=sys.stderr
            )
        return 1
    try:
        topics = [t.name for t in config.topics if t.durability == "persistent"]
        report = verify_store(store, topics)
    finally:
        store.close()
    print(f"sowd verify: {path}")
    print(f"  journal: {report.journal_entries} entries (bookmarks {report.journal_first}..{report.journal_last})")
    for topic, count in sorted(report.records.items()):
        print(f"  current {topic}: {count} records")
    print(f"  history: {report.history_versions} versions")
    for problem in report.problems:
        print(f"  PROBLEM: {problem}")
    print(
        "  the store is whole"
        if report.ok
        else f"  {len(report.problems)} problem(s); see `sowd repair`, `sowd rebuild`"
    )
    return 0 if report.ok else 1


@dataclass(frozen=True)
class AdminCaller:
    """How ``sowd checkpoint`` and ``sowd switchover`` reach a running server, secured or not (SPEC §11).

    Attributes:
        server: HOST:PORT (None: the config's listen address).
        token: an admin user's token (None: ``$SOW_TOKEN``, if set).
        cacert: the CA to trust for the server's certificate (None with TLS on: the config's own
            ``tls_cert``, right for a self-signed certificate).
        cert: a client certificate, for a server with mutual TLS.
        key: its private key.
    """

    server: str | None = None
    token: str | None = None
    cacert: str | None = None
    cert: str | None = None
    key: str | None = None

    def channel(self, config: Config) -> grpc.Channel:
        """Raises: OSError: a file cannot be read; ValueError: ``server``'s port is out of range."""
        target = dial_target(self.server) if self.server else config.server.listen
        security = config.security
        cacert = self.cacert or (security.tls_cert if security and security.tls_cert else None)
        if cacert is None:
            return grpc.insecure_channel(target)
        pair = [Path(f).read_bytes() for f in (self.key, self.cert)] if self.cert and self.key else [None, None]
        credentials = grpc.ssl_channel_credentials(Path(cacert).read_bytes(), pair[0], pair[1])
        return grpc.secure_channel(target, credentials)

    def metadata(self) -> tuple[tuple[str, str], ...]:
        token = self.token or os.environ.get("SOW_TOKEN")
        return (("authorization", f"Bearer {token}"),) if token else ()


def checkpoint(config: Config, directory: str | None, caller: AdminCaller) -> int:
    """Write a checkpoint into ``directory``: through the running server, else directly."""
    if not directory:
        print("sowd checkpoint: give the directory to write the copy into (a new one)", file=sys.stderr)
        return 2
    target = caller.server or config.server.listen
    try:
        channel = caller.channel(config)
    except (OSError, ValueError) as exc:
        print(f"sowd checkpoint: {exc}", file=sys.stderr)
        return 2
    with channel:
        stub = admin_pb2_grpc.AdminServiceStub(channel)
        request = admin_pb2.CheckpointRequest(directory=str(Path(directory).resolve()))
        try:
            resp = stub.Checkpoint(request, timeout=600, metadata=caller.metadata())
        except grpc.RpcError as err:
            code = err.code()
            if code != grpc.StatusCode.UNAVAILABLE or caller.server:
                print(f"sowd checkpoint: {code.name}: {err.details()}", file=sys.stderr)
                return 1
            return _checkpoint_stopped(config, directory)
    size = f"{resp.size_bytes:,} bytes"
    print(f"sowd checkpoint: {resp.directory}: bookmarks up to {resp.bookmark}, {size} (through {target})")
    return 0


def _checkpoint_stopped(config: Config, directory: str) -> int:
    """No server answered: copy the store directly (it must not be open elsewhere)."""
    if Path(directory).exists():
        print(f"sowd checkpoint: {directory} exists already; a checkpoint goes into a new directory", file=sys.stderr)
        return 1
    try:
        store = Store(config.server.data_dir)
    except OSError as exc:
        print(f"sowd checkpoint: no server answered, and {exc}", file=sys.stderr)
        return 1
    try:
        size = store.checkpoint(str(Path(directory).resolve()))
        last = store.last_sequence()
    finally:
        store.close()
    print(
        f"sowd checkpoint: {Path(directory).resolve()}: bookmarks up to {last}, {size:,} bytes (the server is stopped)"
    )
    return 0


def switchover(config: Config, to: str | None, caller: AdminCaller) -> int:
    """Ask the primary (``--server``, else the config's listen address) to hand its role to
    ``to`` (None: its most advanced replica); prints the new primary and its epoch."""
    try:
        channel = caller.channel(config)
    except (OSError, ValueError) as exc:
        print(f"sowd switchover: {exc}", file=sys.stderr)
        return 2
    with channel:
        stub = admin_pb2_grpc.AdminServiceStub(channel)
        try:
            resp = stub.Switchover(admin_pb2.SwitchoverRequest(to=to or ""), timeout=600, metadata=caller.metadata())
        except grpc.RpcError as err:
            print(f"sowd switchover: {err.code().name}: {err.details()}", file=sys.stderr)
            return 1
    print(f"sowd switchover: {resp.primary} is the primary at epoch {resp.epoch} (was epoch {resp.previous_epoch})")
    return 0
