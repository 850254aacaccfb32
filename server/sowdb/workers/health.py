"""A reader's health checks: answered from the writer's health as last seen, not relayed.

A health check is what a load balancer, ``sow ping`` and a supervisor's probe send every few
seconds; relayed, it waits for the writer's event loop, which one long step holds (a staged
commit of a million rows held it for seconds). The reader watches the writer's health over the
group's socket (gRPC's ``Watch``, which the writer pushes on every change) and answers a check
of a service it watches itself while the writer said ``SERVING``. Anything else (another
service, or the writer not serving, whose reason only the writer can say) is relayed.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from sowdb.api.service import SERVICE_NAME
from sowdb.workers.forward import Context, relay

log = logging.getLogger("sowdb.workers.health")

CHECK = "/grpc.health.v1.Health/Check"
WATCHED = ("", SERVICE_NAME)
SERVING = health_pb2.HealthCheckResponse.SERVING


class WriterHealth:
    """The writer's health per service, as its ``Watch`` streams last said (absent: unknown)."""

    def __init__(self, channel: grpc.aio.Channel) -> None:
        self.channel = channel
        self.status: dict[str, int] = {}
        self._tasks = [asyncio.ensure_future(self._watch(name)) for name in WATCHED]

    async def _watch(self, service: str) -> None:
        stub: Any = health_pb2_grpc.HealthStub(self.channel)
        while True:
            try:
                async for response in stub.Watch(health_pb2.HealthCheckRequest(service=service)):
                    self.status[service] = response.status
            except grpc.aio.AioRpcError as exc:
                log.debug("the writer's health watch of %r ended: %s", service, exc.code())
            self.status.pop(service, None)  # not known until the watch is back
            await asyncio.sleep(0.5)

    async def check(self, request: bytes, context: Context) -> bytes:
        """A ``Check``: answered here when the writer last said it serves the service."""
        service = health_pb2.HealthCheckRequest.FromString(request).service
        if self.status.get(service) == SERVING:
            return health_pb2.HealthCheckResponse(status=SERVING).SerializeToString()
        async for response in relay(self.channel, CHECK, request, context, streamed=False):
            return response
        return b""  # the relay ended the call with the writer's status

    def close(self) -> None:
        for task in self._tasks:
            task.cancel()

    def handler(self) -> grpc.RpcMethodHandler[Any, Any]:
        return grpc.unary_unary_rpc_method_handler(self.check)
