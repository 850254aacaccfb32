"""The gRPC side of start-up (issue 36): calls answered while the state loads.

sowd listens before it loads its state, so that a caller learns at once that it is starting, and
how far it has come, instead of waiting on a port that answers nothing. gRPC takes its services
before the server starts, but the servicers need the loaded engine; so the server registers one
:class:`StartupGate` in their place. While loading, it answers every call of the sowdb services
UNAVAILABLE with the progress (``starting: 120000 of 500000 records loaded``); once loaded it
hands each call to the services registered on it since (:func:`sowdb.api.service.add_service`
takes it as it takes a server). The health and reflection services are registered on the server
itself and answer throughout: health says NOT_SERVING, with the same line in the trailing
metadata key :data:`NOT_SERVING_KEY`, which ``sow ping`` shows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2

NOT_SERVING_KEY = "sowdb-not-serving"
"""Trailing metadata of a NOT_SERVING health check: why, in one line."""


class StartupGate(grpc.GenericRpcHandler):
    """Answers the calls of ``services`` (full names) UNAVAILABLE with ``message()`` until
    :meth:`open`, then hands them to the services added to it."""

    def __init__(self, services: Sequence[str], message: Callable[[], str]) -> None:
        self.message = message
        self._prefixes = tuple(f"/{name}/" for name in services)
        self._handlers: list[grpc.GenericRpcHandler] = []
        self._open = False
        self._refuse: grpc.RpcMethodHandler[Any, Any] = grpc.stream_stream_rpc_method_handler(self._unavailable)

    def add_generic_rpc_handlers(self, handlers: Sequence[grpc.GenericRpcHandler]) -> None:
        """Take services as a server does (their calls are answered once open)."""
        self._handlers.extend(handlers)

    def open(self) -> None:
        """The state is loaded: calls go to the services from now on."""
        self._open = True

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler[Any, Any] | None:
        if not self._open:
            method: str = handler_call_details.method
            # Of any kind: the request is not read, so a stream handler answers a unary call too.
            return self._refuse if method.startswith(self._prefixes) else None
        for handler in self._handlers:
            found = handler.service(handler_call_details)
            if found is not None:
                return found
        return None  # not one of ours: health, reflection, or an unknown method

    async def _unavailable(self, requests: Any, context: grpc.aio.ServicerContext[Any, Any]) -> None:
        await context.abort(grpc.StatusCode.UNAVAILABLE, self.message())


class Health(health.aio.HealthServicer):
    """gRPC's health service, whose NOT_SERVING says why (``reason()``: None when it cannot)."""

    def __init__(self, reason: Callable[[], str | None]) -> None:
        super().__init__()
        self.reason = reason

    async def Check(
        self, request: health_pb2.HealthCheckRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> health_pb2.HealthCheckResponse:
        response: health_pb2.HealthCheckResponse = await super().Check(request, context)
        if response.status != health_pb2.HealthCheckResponse.SERVING:
            why = self.reason()
            if why:
                context.set_trailing_metadata(((NOT_SERVING_KEY, why),))
        return response
