"""``sowdb.v1.AdminService``: operations on a running server (backups, the operators' figures),
behind the same error boundary as the rest of the API."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import asdict

from google.protobuf import timestamp_pb2

from sowdb.api.convert import KINDS, duration
from sowdb.api.servicer import Context, Servicer, error_boundary
from sowdb.engine.access import Access
from sowdb.engine.stats import ServerFigures, StatsSnapshot
from sowdb.errors import FailedPrecondition
from sowdb_api.v1 import admin_pb2 as pb


class AdminServicer(Servicer):
    """``sowdb.v1.AdminService`` over an :class:`Engine`."""

    service = "AdminService"
    cluster: Callable[[], list[dict[str, object]]] | None = None
    """The node's status rows (``sowdb.cluster.node.Node.status``), on a server with ``[cluster]``."""
    switchover: Callable[[str], Awaitable[tuple[str, int, int]]] | None = None
    """``sowdb.cluster.node.Node.switchover``, on a server with ``[cluster]``."""

    @error_boundary
    async def Checkpoint(
        self, request: pb.CheckpointRequest, context: Context, access: Access
    ) -> pb.CheckpointResponse:
        directory, bookmark, size = self.engine.checkpoint(request.directory, access)
        return pb.CheckpointResponse(directory=directory, bookmark=bookmark, size_bytes=size)

    @error_boundary
    async def Stats(self, request: pb.StatsRequest, context: Context, access: Access) -> pb.StatsResponse:
        resp = stats_response(self.engine.stats(request.topic, topics_only=request.topics_only, access=access))
        if self.cluster is not None and access.admin:  # the node's role and lag (SPEC §13)
            resp.cluster.extend(_cluster_nodes(self.cluster()))
        return resp

    @error_boundary
    async def ClusterStatus(
        self, request: pb.ClusterStatusRequest, context: Context, access: Access
    ) -> pb.ClusterStatusResponse:
        access.require_admin("read the cluster's status")
        if self.cluster is None:
            raise FailedPrecondition("this server runs alone: its config has no [cluster]")
        return pb.ClusterStatusResponse(nodes=_cluster_nodes(self.cluster()))

    @error_boundary
    async def Switchover(
        self, request: pb.SwitchoverRequest, context: Context, access: Access
    ) -> pb.SwitchoverResponse:
        access.require_admin("hand the primary role over")
        if self.switchover is None:
            raise FailedPrecondition("this server runs alone: its config has no [cluster]")
        primary, epoch, previous = await self.switchover(request.to.strip())
        return pb.SwitchoverResponse(primary=primary, epoch=epoch, previous_epoch=previous)


def stats_response(snap: StatsSnapshot) -> pb.StatsResponse:
    """The snapshot as the StatsResponse message."""
    resp = pb.StatsResponse(bookmark=snap.bookmark, taken=_timestamp(snap.taken_us))
    for t in snap.topics:  # the figures' fields are the message's, but for the kind's enum
        resp.topics.add(**{**asdict(t), "kind": KINDS[t.kind]})
    for s in snap.subscriptions:
        fields = asdict(s)
        age = duration(fields.pop("age_s"))
        resp.subscriptions.add(**fields, age=age)
    if snap.server is not None:
        resp.server.CopyFrom(_server(snap.server))
    return resp


def _server(f: ServerFigures) -> pb.ServerStats:
    j = f.journal
    journal = pb.JournalStats(
        bytes=j.bytes, entries=j.entries, oldest_bookmark=j.oldest_bookmark, last_bookmark=j.last_bookmark
    )
    if j.oldest_timestamp_us:
        journal.oldest_timestamp.CopyFrom(_timestamp(j.oldest_timestamp_us))
    return pb.ServerStats(
        uptime=duration(f.uptime_s),
        cpu_seconds=f.cpu_seconds,
        resident_bytes=f.resident_bytes,
        disk_bytes=f.disk_bytes,
        journal=journal,
        subscriptions=f.subscriptions,
        queued_events=f.queued_events,
        slow_consumer_cutoffs=f.slow_consumer_cutoffs,
        rpcs=[pb.RpcStats(rpc=r.rpc, calls=r.calls, errors=r.errors, seconds=r.seconds) for r in f.rpcs],
        unconfigured_publishes=f.unconfigured_publishes,
        unconfigured_bytes_published=f.unconfigured_bytes_published,
    )


def _timestamp(us: int) -> timestamp_pb2.Timestamp:
    return timestamp_pb2.Timestamp(seconds=us // 1_000_000, nanos=(us % 1_000_000) * 1000)


def _cluster_nodes(rows: list[dict[str, object]]) -> list[pb.ClusterNode]:
    return [pb.ClusterNode(**row) for row in rows]  # type: ignore[arg-type]
