"""A narrow asyncio interface over etcd (through ``aetcd``): the operations :class:`~sowdb.cluster.dcs.Dcs` needs.

Consensus comes from etcd, never from sowdb (SPEC §13): every decision the election makes rests
on one of etcd's linearizable operations — a key created only if absent, a lease kept alive, a
delete guarded by the key's ``create_revision``. Every call is bounded by ``timeout`` (the
election's ``retry_timeout``), so that a partitioned or paused etcd turns into an error the
election can act on, never into a call that hangs past the leader's deadline (HA-1). On an error
the next call goes to the next endpoint of the list.

Over ``https://`` the node checks etcd's certificate against ``etcd_ca`` and shows its own client
certificate and/or authenticates as ``etcd_user`` (:class:`~sowdb.config.etcd.EtcdAccess`).
``aetcd`` 1.0 dials plaintext only, so :class:`_Client` opens its channel with TLS; the rest
(the token of a user that authenticated, sent with every call) is ``aetcd``'s. An error that
says etcd refused the node's credentials is :class:`EtcdRefused`: a configuration to fix,
which retrying does not cure.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import aetcd
import grpc
from aetcd import exceptions as etcd_errors
from aetcd import rpc

from sowdb.config.etcd import EtcdAccess

log = logging.getLogger("sowdb.cluster")
T = TypeVar("T")


class EtcdUnavailable(Exception):
    """etcd did not answer within the time allowed (a partition, a paused or a dead etcd)."""


class EtcdRefused(EtcdUnavailable):
    """etcd answered, but refused this node: a certificate it does not trust (or that does not
    trust it), a wrong user or password, or a user without rights on the cluster's keys."""


# what etcd and gRPC say when they refuse a node's credentials (lower case): a TLS handshake
# that failed either way, and etcd's own authentication and permission errors
_REFUSALS = (
    "ssl",
    "handshake",
    "certificate",
    "tsi_",
    "permission denied",
    "authentication failed",
    "user name is empty",
    "user name not found",
)


@dataclass(frozen=True)
class KeyValue:
    """A key as etcd holds it: its value, the revision that created it (an election's epoch)
    and the lease it lives under."""

    value: bytes
    create_revision: int
    mod_revision: int
    lease: int


class Etcd:
    """One node's connection to etcd (one of the cluster's endpoints at a time)."""

    def __init__(self, endpoints: Sequence[str], timeout: float, access: EtcdAccess | None = None) -> None:
        """Args:
        endpoints: ``http://HOST:PORT`` or ``https://HOST:PORT`` URLs of the etcd cluster's
            members.
        timeout: the longest any call may take, in seconds.
        access: the credentials shown to etcd (None: none, plaintext).
        """
        self._endpoints = [urlsplit(e) for e in endpoints]
        self._next = 0
        self._timeout = timeout
        self._access = access or EtcdAccess()
        self._client: Any = None

    @property
    def endpoint(self) -> str:
        """The endpoint the next call goes to."""
        return self._endpoints[self._next % len(self._endpoints)].geturl()

    async def close(self) -> None:
        """Drop the connection (a later call opens a new one)."""
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(TimeoutError, aetcd.ClientError, OSError):
                async with asyncio.timeout(self._timeout):
                    await client.close()

    async def grant(self, ttl: int) -> tuple[int, int]:
        """A new lease of ``ttl`` seconds: (its id, the TTL etcd granted, which may be longer)."""
        lease = await self._call(lambda c: c.lease(ttl))
        return int(lease.id), int(lease.ttl)

    async def refresh(self, lease_id: int) -> int:
        """Keep a lease alive: the TTL it now has, 0 when it has already lapsed (etcd forgot it)."""
        reply = await self._call(lambda c: c.refresh_lease(lease_id))
        return int(reply.TTL) if reply is not None else 0

    async def remaining(self, lease_id: int) -> int:
        """Whole seconds a lease has left on etcd; -1 when it has lapsed (or never was)."""
        info = await self._call(lambda c: c.get_lease_info(lease_id, keys=False))
        return int(info.TTL)

    async def revoke(self, lease_id: int) -> None:
        """End a lease now, deleting the keys under it (a clean step-down frees the key at once)."""
        await self._call(lambda c: c.revoke_lease(lease_id))

    async def create(
        self, key: bytes, value: bytes, lease_id: int, unchanged: tuple[bytes, int] | None = None
    ) -> tuple[bool, KeyValue | None]:
        """Create ``key`` under the lease only if it is absent, in one transaction.

        Args:
            unchanged: (another key, its mod_revision when read; 0: absent): also only if that
                key has not changed since (the sync set that the node's eligibility was judged
                by: a node paused between judging and creating cannot act on a stale set).

        Returns:
            (True, the new key) when this call created it, its ``create_revision`` being the
            epoch; (False, the key that is there) when another holds it; (False, None) when
            the key is absent but ``unchanged`` changed.
        """

        async def txn(c: Any) -> tuple[bool, Any]:
            t = c.transactions
            guards = [t.mod(unchanged[0]) == unchanged[1]] if unchanged is not None else []
            return await c.transaction(  # type: ignore[no-any-return]
                compare=[t.version(key) == 0, *guards],
                success=[t.put(key, value, lease=lease_id), t.get(key)],
                failure=[t.get(key)],
            )

        succeeded, responses = await self._call(txn)
        found = responses[-1]
        return bool(succeeded), _kv(found[0][1]) if found else None

    async def put(self, key: bytes, value: bytes, lease_id: int) -> None:
        """Write ``key`` under the lease (a node's own member record)."""
        await self._call(lambda c: c.put(key, value, lease=lease_id))

    async def put_if(self, key: bytes, value: bytes, guard: bytes, create_revision: int) -> bool:
        """Write ``key`` (no lease: it outlives the writer) only while ``guard`` is still the key
        created at ``create_revision``: the primary's sync set, which a deposed primary (whose
        leader key is gone or is a successor's) can no longer write. True when written."""

        async def txn(c: Any) -> tuple[bool, Any]:
            t = c.transactions
            return await c.transaction(  # type: ignore[no-any-return]
                compare=[t.create(guard) == create_revision], success=[t.put(key, value)], failure=[]
            )

        succeeded, _ = await self._call(txn)
        return bool(succeeded)

    async def get(self, key: bytes) -> KeyValue | None:
        """A linearizable read of ``key`` (None: absent)."""
        found = await self._call(lambda c: c.get(key))
        return _kv(found) if found is not None else None

    async def get_prefix(self, prefix: bytes) -> list[tuple[bytes, KeyValue]]:
        """Every key under a prefix, in one linearizable read (a cluster's snapshot)."""
        found = await self._call(lambda c: c.get_prefix(prefix))
        return [(bytes(kv.key), _kv(kv)) for kv in found]

    async def delete_if(self, key: bytes, create_revision: int) -> bool:
        """Delete ``key`` only if it is still the one created at ``create_revision`` (a leader
        hands over its own key, never a successor's). True when this call deleted it."""

        async def txn(c: Any) -> tuple[bool, Any]:
            t = c.transactions
            return await c.transaction(  # type: ignore[no-any-return]
                compare=[t.create(key) == create_revision], success=[t.delete(key)], failure=[]
            )

        succeeded, _ = await self._call(txn)
        return bool(succeeded)

    async def _connected(self) -> Any:
        if self._client is None:
            url = self._endpoints[self._next % len(self._endpoints)]
            # a channel of its own (no subchannel shared with another client of this process),
            # so that closing it really drops this node's connection; and reconnecting within a
            # second, not gRPC's default of up to two minutes, which would outlast any lease
            options = {
                "grpc.use_local_subchannel_pool": 1,
                "grpc.initial_reconnect_backoff_ms": 100,
                "grpc.max_reconnect_backoff_ms": 1000,
            }
            access = self._access
            user, password = (access.user, access.password()) if access.user else (None, None)
            self._client = _Client(
                _credentials(access),
                host=url.hostname,
                port=url.port,
                username=user,
                password=password,
                timeout=self._timeout,
                options=options,
            )
        return self._client

    async def _call(self, call: Any) -> Any:
        """Run one call against the current endpoint within the timeout; on a failure raise
        :class:`EtcdUnavailable`, and move on to the next endpoint if there is another (with
        one, the channel stays: gRPC reconnects it, and a connection still being set up on a
        loaded machine is not thrown away at every slow call)."""
        try:
            client = await self._connected()
            # asyncio.timeout, not wait_for: Python 3.11's wait_for can swallow a cancellation
            # that arrives as the call completes, leaving the election's loop running
            async with asyncio.timeout(self._timeout):
                awaitable: Awaitable[Any] = call(client)
                return await awaitable
        except (TimeoutError, aetcd.ClientError, OSError, asyncio.CancelledError) as exc:
            if isinstance(exc, asyncio.CancelledError) and _cancelled_by_caller():
                raise
            endpoint = self.endpoint
            if len(self._endpoints) > 1 or isinstance(exc, etcd_errors.UnauthenticatedError):
                # an unauthenticated call: the user's token lapsed (etcd restarted, or forgot it),
                # so the next call connects, and authenticates, again
                self._next += 1
                await self.close()
            if any(word in str(exc).lower() for word in _REFUSALS):
                raise EtcdRefused(f"etcd at {endpoint} refused this node: {type(exc).__name__}: {exc}") from None
            raise EtcdUnavailable(f"etcd: {type(exc).__name__}: {exc}") from None


class _Client(aetcd.Client):  # type: ignore[misc]  # aetcd has no type hints
    """``aetcd.Client`` over a channel with ``credentials`` (TLS) when there are any: its
    ``connect`` with the channel made here, and no watcher (the cluster watches nothing)."""

    def __init__(self, credentials: grpc.ChannelCredentials | None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._credentials = credentials

    async def connect(self) -> None:
        if self._credentials is None:
            await super().connect()
            return
        if self._connected.is_set():
            return
        target = f"{self._host}:{self._port}"
        self.channel = rpc.secure_channel(target, self._credentials, options=self._options.items())
        try:
            if self._username is not None:
                self.auth_stub = rpc.AuthStub(self.channel)
                request = rpc.AuthenticateRequest(name=self._username, password=self._password)
                reply = await self.auth_stub.Authenticate(request, timeout=self._timeout)
                self.metadata = (("token", reply.token),)
        except BaseException as exc:  # a refusal, a timeout, a cancellation: no channel left open
            channel = self.channel
            self._init_channel_attrs()
            with contextlib.suppress(Exception):
                await channel.close()
            if isinstance(exc, rpc.AioRpcError):
                etcd_errors._handle_exception(exc)  # raises aetcd's error for it, as aetcd's connect does
            raise
        self.kvstub = rpc.KVStub(self.channel)
        self.clusterstub = rpc.ClusterStub(self.channel)
        self.leasestub = rpc.LeaseStub(self.channel)
        self.maintenancestub = rpc.MaintenanceStub(self.channel)
        self._connected.set()


def _credentials(access: EtcdAccess) -> grpc.ChannelCredentials | None:
    """TLS that trusts ``access.ca`` and shows the client certificate if there is one."""
    if not access.tls:
        return None
    key = Path(access.key).read_bytes() if access.key else None
    cert = Path(access.cert).read_bytes() if access.cert else None
    return grpc.ssl_channel_credentials(Path(access.ca).read_bytes(), key, cert)


def _cancelled_by_caller() -> bool:
    """Whether a CancelledError is this task's own cancellation, rather than gRPC cancelling a
    call (a closed channel, a call etcd ended), which is one more way for etcd to be unavailable
    and must never end the election's loop."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _kv(found: Any) -> KeyValue:
    return KeyValue(bytes(found.value), int(found.create_revision), int(found.mod_revision), int(found.lease))
