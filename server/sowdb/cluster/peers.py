"""How one node dials another (a replica's Follow and CopyCheckpoint calls): over the transport
the primary serves, with the replication token.

A node with ``[security]`` TLS serves TLS only. Replicas once dialled their primary in plaintext
whatever the config said, so a secured cluster never replicated: every Follow failed ("Socket
closed") while a ``sync`` primary acknowledged alone. Here a replica speaks TLS whenever its own
config has ``tls_cert`` (the nodes of a cluster share one config): it trusts ``[cluster] ca``,
the CA that signed the nodes' certificates, or else its own certificate (one self-signed
certificate shared by the nodes); where the nodes ask callers for certificates
(``client_ca``), it presents its own. It authenticates with an admin user's token from
``SOWDB_CLUSTER_TOKEN`` (A-1).
"""

from __future__ import annotations

import os
from pathlib import Path

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from sowdb.config.cluster import ClusterConfig
from sowdb.config.security import SecurityConfig

TOKEN_ENV = "SOWDB_CLUSTER_TOKEN"
"""A replica sends this token (an admin user's) when the primary has security on (A-1)."""

Metadata = tuple[tuple[str, str], ...] | None


def peer_channel(target: str, cluster: ClusterConfig, security: SecurityConfig | None) -> grpc.aio.Channel:
    """A channel to the node at ``target``, secured as this node's own port is.

    Raises:
        OSError: a certificate or key file cannot be read.
    """
    if security is None or not security.tls_cert:
        return grpc.aio.insecure_channel(target)
    roots = Path(cluster.ca or security.tls_cert).read_bytes()
    key = cert = None
    if security.client_ca:  # mutual TLS: the primary asks every caller for a certificate
        key, cert = Path(security.tls_key).read_bytes(), Path(security.tls_cert).read_bytes()
    return grpc.aio.secure_channel(target, grpc.ssl_channel_credentials(roots, key, cert))


def peer_metadata() -> Metadata:
    """The replication token as call metadata (None without one)."""
    token = os.environ.get(TOKEN_ENV)
    return (("authorization", f"Bearer {token}"),) if token else None


def reason_of(exc: grpc.RpcError) -> str:
    """The ErrorInfo reason (``JOURNAL_FORKED``) of a peer's refusal, "" when it has none: what
    a node acts on, rather than the words of the message."""
    try:
        status = rpc_status.from_call(exc)  # type: ignore[arg-type]  # an AioRpcError is a call's outcome
    except ValueError:
        return ""
    for detail in status.details if status is not None else ():
        info = error_details_pb2.ErrorInfo()
        if detail.Unpack(info):
            return str(info.reason)
    return ""
