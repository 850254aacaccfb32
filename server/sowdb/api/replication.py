"""``ReplicationService`` (SPEC §13): the gRPC side of journal shipping and checkpoint copies.

A thin layer like every other service: it checks the caller (with security on, only an admin
may follow: the journal is every topic's), delegates to the cluster
(:func:`sowdb.cluster.shipping.ship`, :func:`sowdb.cluster.catchup.checkpoint_chunks`) and lets
the error boundary map the domain errors those raise through the status table: a forked
follower gets FAILED_PRECONDITION with the ErrorInfo reason ``JOURNAL_FORKED``, a follower
behind the retained journal OUT_OF_RANGE, a node that is not the primary FAILED_PRECONDITION.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

from sowdb.api.servicer import Context, Servicer, error_boundary
from sowdb.auth import Authenticator
from sowdb.cluster.catchup import checkpoint_chunks
from sowdb.cluster.node import Node
from sowdb.cluster.shipping import ship
from sowdb.engine import Engine
from sowdb.engine.access import Access
from sowdb.errors import FailedPrecondition
from sowdb_api.v1 import replication_pb2 as pb

log = logging.getLogger("sowdb.cluster")

__all__ = ["REPLICATION_SERVICE", "ReplicationServicer", "pb"]

REPLICATION_SERVICE = pb.DESCRIPTOR.services_by_name["ReplicationService"]


class ReplicationServicer(Servicer):
    """The primary's side: one Follow stream per replica, and checkpoint copies."""

    service = "ReplicationService"

    def __init__(self, engine: Engine, node: Node, auth: Authenticator) -> None:
        super().__init__(engine, auth)
        self.node = node

    @error_boundary
    async def Follow(
        self, request_iterator: AsyncIterator[pb.FollowRequest], context: Context, access: Access
    ) -> AsyncIterator[pb.FollowResponse]:
        access.require_admin("follow the journal (replication)")
        async for frame in ship(self.node, request_iterator):
            yield frame

    @error_boundary
    async def CopyCheckpoint(
        self, request: pb.CopyCheckpointRequest, context: Context, access: Access
    ) -> AsyncIterator[pb.CopyCheckpointResponse]:
        access.require_admin("copy the store (replication)")
        if not self.node.election.is_leader:
            raise FailedPrecondition(f"node {self.node.cluster.node} is not the primary")
        log.info("cluster: node %s copies a checkpoint", request.node)
        async for chunk in checkpoint_chunks(self.node.engine):
            yield chunk
