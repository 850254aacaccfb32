"""How one node dials another (a replica's Follow and CopyCheckpoint calls), and how it makes
sure the node it dials is the primary etcd names (issue 40).

**With node certificates** (``[cluster] cert``, ``key``, ``ca``) a replica dials the primary's
peer port (the ``peer`` of its leader key) over mutual TLS: it presents its own node
certificate, trusts only ``[cluster] ca``, and requires the primary's certificate to name the
node the leader key names (a DNS subjectAltName equal to the node's name: gRPC's host name
check, with the leader's node name as the name it expects). No token crosses the wire. Before
each stream it checks that itself (:func:`verify_primary`), so that a refusal says why and is
counted (``sowdb_cluster_refused_total``) rather than being one more connection failure:
whoever can write the leader key cannot make a node follow a server without the named
node's certificate.

**Without them** (a laptop cluster, or one configured before issue 40) it dials the primary's
client port as before: over TLS when its own config has ``[security] tls_cert`` (trusting
``[cluster] ca``, or else its own certificate; presenting its own where the nodes ask callers
for certificates), with an admin user's token from ``SOWDB_CLUSTER_TOKEN`` (A-1). The node
warns at start-up that anyone who can write etcd can then make it follow a primary of its own.
"""

from __future__ import annotations

import asyncio
import os
import ssl
from pathlib import Path

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from sowdb.cluster.dcs import Leader
from sowdb.config.cluster import ClusterConfig
from sowdb.config.security import SecurityConfig

TOKEN_ENV = "SOWDB_CLUSTER_TOKEN"
"""Without node certificates, a replica sends this token (an admin user's) when the primary
has security on (A-1)."""

Metadata = tuple[tuple[str, str], ...] | None

CHECK_TIMEOUT_S = 5.0
"""How long :func:`verify_primary` gives a TLS handshake."""


def peer_target(leader: Leader, cluster: ClusterConfig) -> str:
    """Where this node dials the primary ``leader``: its peer port with node certificates,
    its client port without (empty: the leader key names no peer port)."""
    return leader.peer if cluster.node_certs else leader.advertise


def peer_channel(leader: Leader, cluster: ClusterConfig, security: SecurityConfig | None) -> grpc.aio.Channel:
    """A channel to the primary ``leader``: mutual TLS with node certificates, the primary's
    certificate required to name ``leader.node``; else secured as this node's own port is.

    Raises:
        OSError: a certificate or key file cannot be read.
    """
    target = peer_target(leader, cluster)
    if cluster.node_certs:
        mine = (Path(p).read_bytes() for p in (cluster.ca, cluster.key, cluster.cert))
        credentials = grpc.ssl_channel_credentials(*mine)
        return grpc.aio.secure_channel(target, credentials, options=[("grpc.ssl_target_name_override", leader.node)])
    if security is None or not security.tls_cert:
        return grpc.aio.insecure_channel(target)
    roots = Path(cluster.ca or security.tls_cert).read_bytes()
    key = cert = None
    if security.client_ca:  # mutual TLS: the primary asks every caller for a certificate
        key, cert = Path(security.tls_key).read_bytes(), Path(security.tls_cert).read_bytes()
    return grpc.aio.secure_channel(target, grpc.ssl_channel_credentials(roots, key, cert))


def peer_metadata(cluster: ClusterConfig) -> Metadata:
    """The replication token as call metadata: None with node certificates (the certificate is
    the credential; no token ever crosses the wire between nodes), or without a token."""
    if cluster.node_certs:
        return None
    token = os.environ.get(TOKEN_ENV)
    return (("authorization", f"Bearer {token}"),) if token else None


async def verify_primary(leader: Leader, cluster: ClusterConfig) -> tuple[str, str] | None:
    """Whether the server at the primary's peer port proves it is ``leader.node``: a TLS
    handshake with this node's certificate that checks the server's chain against
    ``[cluster] ca`` and its name against ``leader.node``. Returns (reason, why) of a refusal
    — ``no_peer_port``, ``certificate`` (not signed by the cluster's CA), ``name`` (another
    node's), ``tls`` (no TLS there) — or None: it does, or it cannot be reached (not a
    refusal: the stream's own failure says so, as for any primary that is down)."""
    if not leader.peer:
        return "no_peer_port", f"the leader key names {leader.node!r} at {leader.advertise} with no peer port"
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=cluster.ca)
    context.load_cert_chain(cluster.cert, cluster.key)
    context.set_alpn_protocols(["h2"])
    host, _, port = leader.peer.rpartition(":")
    try:
        async with asyncio.timeout(CHECK_TIMEOUT_S):
            _, writer = await asyncio.open_connection(
                host.strip("[]"), int(port), ssl=context, server_hostname=leader.node
            )
    except ssl.SSLCertVerificationError as exc:
        reason = "name" if "mismatch" in (exc.verify_message or "").lower() else "certificate"
        return reason, f"{leader.peer} is no node {leader.node!r} of this cluster: {exc.verify_message}"
    except ssl.SSLError as exc:
        return "tls", f"{leader.peer} does not speak TLS with a node certificate: {exc.reason or exc}"
    except (OSError, TimeoutError, ValueError):
        return None
    writer.close()
    return None


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
