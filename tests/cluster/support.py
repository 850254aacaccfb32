"""What the cluster's tests share: a node's config, a journal of election events across nodes
that a test can wait on, and the check that no two nodes' acknowledge windows overlap."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field

from sowdb.cluster.election import Election, ElectionEvent, Eligible
from sowdb.config.cluster import ClusterConfig

TTL = 2  # seconds: etcd's shortest lease, so that the tests stay quick


def cluster_config(etcd_url: str, node: str, name: str = "t") -> ClusterConfig:
    return ClusterConfig(
        name=name, node=node, advertise=f"127.0.0.1:{9000 + len(node)}", etcd=(etcd_url,), lease_ttl_s=TTL
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


async def _always() -> bool:
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
