"""A grpcio server that drops calls as it stops, every time (``test_server_shutdown``): run as
``python -m tests.client.stopping_server``, it prints its port, then ``holding`` when a health
check arrives. That check holds the server's event loop for :data:`HOLD_S`, so the server asks
gRPC core for no further call while others arrive, then stops it with no grace: the calls that
arrived meanwhile never reach a handler and core ends them with CANCELLED (grpc/grpc#41785).

The SDK's service is registered (and never reached), so that the SDK's calls are the ones a
real ``sowd`` would have taken; a call of each method sent before the others takes the one call
the server had asked core for before its loop was held.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from sowdb_api.v1 import sow_pb2_grpc

HOLD_S = 2.0
"""Seconds the health check holds the event loop: the calls sent meanwhile wait in core."""


async def serve() -> None:
    server = grpc.aio.server()

    class Health(health_pb2_grpc.HealthServicer):
        async def Check(
            self, request: health_pb2.HealthCheckRequest, context: grpc.aio.ServicerContext[Any, Any]
        ) -> health_pb2.HealthCheckResponse:
            print("holding", flush=True)
            time.sleep(HOLD_S)  # noqa: ASYNC251 (the point: no call is taken from core meanwhile)
            with contextlib.suppress(asyncio.CancelledError):  # stopping cancels this call too
                await server.stop(None)
            return health_pb2.HealthCheckResponse()

    health_pb2_grpc.add_HealthServicer_to_server(Health(), server)
    never_reached: Any = sow_pb2_grpc.SowServiceServicer  # its stubs call it abstract: it is not
    sow_pb2_grpc.add_SowServiceServicer_to_server(never_reached(), server)
    print(server.add_insecure_port("127.0.0.1:0"), flush=True)
    await server.start()
    with contextlib.suppress(asyncio.CancelledError):  # the stop cancels the waiters too
        await server.wait_for_termination()


if __name__ == "__main__":
    asyncio.run(serve())
