"""What the cluster's tests share beyond the harness of :mod:`sowdb.testing.cluster` (re-exported
here: a cluster of real ``sowd`` processes, its config, waits and reads): in-process elections
with a journal of their events across nodes that a test can wait on, the check that no two
nodes' acknowledge windows overlap, a publish retried until acknowledged, the sync set as etcd
holds it."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any

import grpc

from sowdb.cluster.dcs import ClusterView, SyncRecord
from sowdb.cluster.election import Election, ElectionEvent, Eligible
from sowdb.config.cluster import ClusterConfig
from sowdb.testing.cluster import TOPICS, TTL, Cluster, digest, journal, node_config, secure_config, until
from sowdb.testing.etcd import EtcdServer
from sowdb_client import Client, PublishAck, SowdbError

__all__ = [
    "TOPICS",
    "TTL",
    "Cluster",
    "Journal",
    "Node",
    "cluster_config",
    "digest",
    "journal",
    "node_config",
    "publish_acknowledged",
    "secure_config",
    "sync_record",
    "until",
]


def cluster_config(etcd: EtcdServer, node: str, name: str = "t", *, url: str = "") -> ClusterConfig:
    """Node ``node``'s ``[cluster]`` on ``etcd`` (or on ``url``, a proxy before it), with the
    credentials it asks for."""
    return ClusterConfig(
        name=name,
        node=node,
        advertise=f"127.0.0.1:{9000 + len(node)}",
        etcd=(url or etcd.url,),
        lease_ttl_s=TTL,
        etcd_access=etcd.access,
    )


@dataclass
class Journal:
    """Every node's election events in order, on the shared monotonic clock."""

    events: list[ElectionEvent] = field(default_factory=list)
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    def __call__(self, event: ElectionEvent) -> None:
        self.events.append(event)
        self._changed.set()

    def of(self, kind: str, node: str | None = None, after: float = 0.0) -> list[ElectionEvent]:
        return [e for e in self.events if e.kind == kind and (node is None or e.node == node) and e.at >= after]

    async def wait(self, condition: Callable[[], object], within: float = 20.0) -> None:
        """Until ``condition()`` holds (checked at each event), failing after ``within`` s."""
        give_up = time.monotonic() + within
        while not condition():
            self._changed.clear()
            left = give_up - time.monotonic()
            if left <= 0:
                raise AssertionError(f"not reached within {within}s; events: {self.events}")
            with suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), min(left, 0.2))

    def windows(self) -> list[tuple[str, int, float, float]]:
        """(node, epoch, from, to) of every span in which a node could acknowledge."""
        spans: list[tuple[str, int, float, float]] = []
        open_: dict[str, tuple[int, float]] = {}
        for e in self.events:
            if e.kind == "lead":
                open_[e.node] = (e.epoch, e.at)
            elif e.kind == "fenced" and e.node in open_:
                epoch, start = open_.pop(e.node)
                spans.append((e.node, epoch, start, e.at))
        spans.extend((node, epoch, start, float("inf")) for node, (epoch, start) in open_.items())
        return spans

    def assert_no_overlap(self) -> None:
        spans = sorted(self.windows(), key=lambda s: s[2])
        for a, b in itertools.pairwise(spans):
            assert a[3] <= b[2], f"two primaries acknowledging at once: {a} and {b}"
            # a new primary has a higher epoch; one node may resume its own (an abandoned switchover)
            assert a[1] < b[1] or (a[0], a[1]) == (b[0], b[1]), f"the epoch did not rise: {a} then {b}"


def _always(view: ClusterView) -> bool:
    return True


class Node:
    """An :class:`Election` running as a task of the test's loop."""

    def __init__(self, config: ClusterConfig, journal: Journal, eligible: Eligible | None = None) -> None:
        self.election = Election(config, listener=journal, eligible=eligible or _always)
        self.task = asyncio.get_running_loop().create_task(self.election.run())

    async def stop(self, *, resign: bool = True) -> None:
        self.task.cancel()
        with suppress(asyncio.CancelledError):
            await self.task
        await self.election.close(resign=resign)


def publish_acknowledged(target: str, topic: str, docs: list[dict[str, Any]], **options: Any) -> PublishAck:
    """Publish until acknowledged: a primary that the loaded test machine delayed past its
    fencing deadline answers UNAVAILABLE for a while (HA-1), and a request sent again is safe
    with a J-4 producer id in ``options`` (a duplicate then) or with keyed documents."""
    give_up = time.monotonic() + 30
    while True:
        try:
            with Client(target) as c:
                return c.publish(topic, docs, **options)
        except SowdbError as exc:
            if exc.code != grpc.StatusCode.UNAVAILABLE or time.monotonic() > give_up:
                raise
            time.sleep(0.05)


def sync_record(etcd: EtcdServer, name: str = "t") -> SyncRecord | None:
    """The cluster's sync set as etcd holds it (``/sowdb/NAME/sync``; None: never written)."""

    async def read() -> SyncRecord | None:
        client = etcd.client()
        try:
            found = await client.get(f"/sowdb/{name}/sync".encode())
        finally:
            await client.close()
        return SyncRecord.decode(found.value) if found is not None else None

    return asyncio.run(read())
