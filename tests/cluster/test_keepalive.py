"""A primary whose event loop is saturated keeps its lease (HA-1, the lease keeper): the refresh
that its fencing deadline rests on runs in a thread of its own, apart from the data path, so a
loop held by queries, fan-out or a long commit for longer than a lease no longer makes a healthy
primary step down; with etcd gone as well it still stops acknowledging before its lease lapses.

The loop is held by plain Python work (no await), the worst a handler can do to it: the keeper
runs anyway, between the interpreter's thread switches."""

from __future__ import annotations

import time

from tests.cluster.conftest import EtcdServer
from tests.cluster.support import TTL, Journal, Node, cluster_config


def hold_the_loop(seconds: float, probe: Node) -> list[tuple[float, bool]]:
    """Run Python on the event loop's thread for ``seconds`` without yielding to the loop;
    every 20 ms, whether the node may acknowledge."""
    samples: list[tuple[float, bool]] = []
    end = time.monotonic() + seconds
    next_sample = 0.0
    while (now := time.monotonic()) < end:
        if now >= next_sample:
            samples.append((now, probe.election.may_acknowledge()))
            next_sample = now + 0.02
    return samples


async def test_a_primary_whose_loop_is_held_past_its_lease_keeps_acknowledging(etcd: EtcdServer) -> None:
    journal = Journal()
    a = Node(cluster_config(etcd, "a"), journal)
    try:
        await journal.wait(lambda: journal.of("lead", "a"))
        epoch = a.election.epoch
        samples = hold_the_loop(3 * TTL, a)
        refused = [t for t, ok in samples if not ok]
        assert not refused, f"stopped acknowledging {refused[0] - samples[0][0]:.2f}s into a held loop"
        assert a.election.keeper.extended > 0
        await journal.wait(lambda: a.election.rounds >= 2)  # the round runs again, and leads on
        assert a.election.epoch == epoch
        assert a.election.may_acknowledge()
        assert not journal.of("fenced", "a")
    finally:
        await a.stop()


async def test_a_held_primary_with_etcd_gone_still_stops_before_its_lease_lapses(etcd: EtcdServer) -> None:
    journal = Journal()
    a = Node(cluster_config(etcd, "a"), journal)
    try:
        await journal.wait(lambda: journal.of("lead", "a"))
        etcd.pause()
        paused = time.monotonic()
        try:
            samples = hold_the_loop(2 * TTL, a)
        finally:
            etcd.resume()
        refused = [t for t, ok in samples if not ok]
        assert refused, "acknowledged for two leases with etcd stopped"
        assert refused[0] - paused < TTL, "acknowledged past the lease's lifetime"
        assert all(not ok for t, ok in samples if t >= refused[0]), "acknowledged again after the deadline"
    finally:
        await a.stop()
