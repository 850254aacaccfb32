"""``ReplicationService`` (SPEC §13): the gRPC side of journal shipping and checkpoint copies,
and the peer port that serves it to the other nodes.

A thin layer like every other service: it checks the caller, delegates to the cluster
(:func:`sowdb.cluster.shipping.ship`, :func:`sowdb.cluster.catchup.checkpoint_chunks`) and lets
the error boundary map the domain errors those raise through the status table: a forked
follower gets FAILED_PRECONDITION with the ErrorInfo reason ``JOURNAL_FORKED``, a follower
behind the retained journal OUT_OF_RANGE, a node that is not the primary FAILED_PRECONDITION.

Who may call it (issue 40). With node certificates (``[cluster] cert``) the service is served
on the **peer port** alone, a port of its own that asks every caller for a certificate signed
by ``[cluster] ca`` (mutual TLS) and serves nothing else: the caller is the node its
certificate names (``peer_dns``, its DNS subjectAltNames), no token is asked or sent. On the
client port the service then refuses everyone, admins included (PERMISSION_DENIED, counted as
``token``): a user's token does not make a node. Without node certificates it is served on the
client port as before, to an admin's token (the journal is every topic's).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from pathlib import Path

import grpc

from sowdb.api.service import Registrar, add_service
from sowdb.api.servicer import Context, Servicer, error_boundary
from sowdb.auth import Authenticator
from sowdb.cluster.catchup import checkpoint_chunks
from sowdb.cluster.node import Node
from sowdb.cluster.shipping import ship
from sowdb.config import Config
from sowdb.engine import Engine
from sowdb.engine.access import Access
from sowdb.engine.clock import FollowingClock
from sowdb.errors import FailedPrecondition, PermissionDenied
from sowdb.ports import bind, connection_limits
from sowdb_api.v1 import replication_pb2 as pb

log = logging.getLogger("sowdb.cluster")

__all__ = ["REPLICATION_SERVICE", "ReplicationServicer", "pb", "serve_node"]

REPLICATION_SERVICE = pb.DESCRIPTOR.services_by_name["ReplicationService"]


class ReplicationServicer(Servicer):
    """The primary's side: one Follow stream per replica, and checkpoint copies.

    ``peers``: this instance serves the peer port (callers proved by their certificates);
    else the client port (callers by their tokens, and none at all with node certificates).
    """

    service = "ReplicationService"

    def __init__(self, engine: Engine, node: Node, auth: Authenticator, *, peers: bool = False) -> None:
        super().__init__(engine, auth)
        self.node = node
        self.peers = peers

    def _caller(self, context: Context, access: Access, what: str) -> frozenset[str] | None:
        """The node names the caller's certificate carries (on the peer port), or None: an
        admin's token on the client port of a cluster without node certificates.

        Raises:
            PermissionDenied: the client port of a cluster with node certificates, or no admin.
        """
        if self.peers:
            return frozenset(name.decode() for name in context.auth_context().get("peer_dns", ()))
        if self.node.cluster.node_certs:
            self.node.refuse("token", f"user {access.user!r} asked to {what} on the client port")
            raise PermissionDenied(
                f"{what} takes a node certificate, on the cluster's peer port: a user's token is not enough"
            )
        access.require_admin(f"{what} (replication)")
        return None

    @error_boundary
    async def Follow(
        self, request_iterator: AsyncIterator[pb.FollowRequest], context: Context, access: Access
    ) -> AsyncIterator[pb.FollowResponse]:
        names = self._caller(context, access, "follow the journal")
        async for frame in ship(self.node, request_iterator, names):
            yield frame

    @error_boundary
    async def CopyCheckpoint(
        self, request: pb.CopyCheckpointRequest, context: Context, access: Access
    ) -> AsyncIterator[pb.CopyCheckpointResponse]:
        names = self._caller(context, access, "copy the store")
        if names is not None and request.node not in names:
            why = f"a node calls itself {request.node!r} with a certificate for {sorted(names)}"
            self.node.refuse("name", why)
            raise PermissionDenied(f"{why}: refused")
        if not self.node.election.is_leader:
            raise FailedPrecondition(f"node {self.node.cluster.node} is not the primary")
        log.info("cluster: node %s copies a checkpoint", request.node)
        async for chunk in checkpoint_chunks(self.node.engine):
            yield chunk


async def serve_node(
    config: Config, engine: Engine, auth: Authenticator, clients: Registrar, port: int, clock: FollowingClock
) -> Node:
    """Make the cluster node of a server whose client port is ``port``, served by ``clients`` (SPEC
    §13): its replication service there, and, with node certificates, its peer port, started
    here and stopped with the node. Not started yet (:meth:`Node.start`).

    Raises:
        OSError: the peer port cannot be bound, or a certificate read.
    """
    cluster = config.cluster
    assert cluster is not None, "a node needs [cluster]"
    peers, peer_port = _peer_port(config) if cluster.node_certs else (None, 0)
    node = Node(cluster, engine.replication, port, clock, peer_port)
    add_service(ReplicationServicer(engine, node, auth), clients, REPLICATION_SERVICE, pb)
    if peers is not None:
        add_service(ReplicationServicer(engine, node, Authenticator(None), peers=True), peers, REPLICATION_SERVICE, pb)
        await peers.start()
        node.closers.append(lambda: peers.stop(0))
        where = node.cluster.peer
        log.info("cluster %s: node %s serves the nodes on %s (mutual TLS)", cluster.name, cluster.node, where)
    return node


def _peer_port(config: Config) -> tuple[grpc.aio.Server, int]:
    """The peer port's server, bound (``[cluster] peer_listen``, else any free port on the
    client port's host): it asks every caller for a certificate the cluster's CA signed, and
    bounds what a connection that never proves itself may hold as the client port does."""
    cluster = config.cluster
    assert cluster is not None
    key, cert, ca = (Path(p).read_bytes() for p in (cluster.key, cluster.cert, cluster.ca))
    credentials = grpc.ssl_server_credentials([(key, cert)], root_certificates=ca, require_client_auth=True)
    peers = grpc.aio.server(options=[("grpc.so_reuseport", 0), *connection_limits(config.server)])
    listen = cluster.peer_listen or f"{config.server.listen.rpartition(':')[0]}:0"
    return peers, bind(peers, listen, credentials)
