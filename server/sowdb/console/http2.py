"""A guard for hypercorn 0.18's HTTP/2 side: data that arrives on a stream already answered.

A gRPC client (``grpcurl -plaintext HOST:9080 list``) speaks HTTP/2 with prior knowledge and
sends its request body after the headers. The console answers such a request at once, and
hypercorn forgets the stream when the answer is complete; the body's DATA frame that then
arrives makes hypercorn look the stream up (``self.streams[stream_id]``), raise ``KeyError``
and drop the connection with an "Unhandled exception in client_connected_cb" traceback in the
server's log. Upstream has the fix proposed (pgjones/hypercorn#334, #312) but not released;
until it is, such DATA is acknowledged for flow control and otherwise ignored, exactly as
hypercorn already does for the stream's END_STREAM.

It also ends a connection whose client resets streams as fast as it opens them (HTTP/2 "rapid
reset", CVE-2023-44487; issue 37, finding 15): each stream costs an ASGI task (and a gateway
call) before its RST_STREAM is read, and 7,000 of them on one connection held the event loop
for 2.2 s. Past :data:`MAX_CLIENT_RESETS` resets within :data:`RESET_WINDOW_S`, the connection
gets GOAWAY (ENHANCE_YOUR_CALM) and is closed; the rest of its frames are not handled.
"""

from __future__ import annotations

import time

import h2.errors
import h2.events
import hypercorn.protocol
from hypercorn.events import Closed
from hypercorn.protocol.h2 import H2Protocol

MAX_CLIENT_RESETS = 200
"""Streams a client may reset within :data:`RESET_WINDOW_S` (a browser cancels a grid's stream
when its page changes: a few a second at most)."""

RESET_WINDOW_S = 10.0


class _H2Protocol(H2Protocol):
    _resets = 0
    _window_start = 0.0
    _calmed = False

    async def _handle_events(self, events: list[h2.events.Event]) -> None:
        if self._calmed:
            return
        if self._too_many_resets(events):
            self._calmed = True
            self.connection.close_connection(error_code=h2.errors.ErrorCodes.ENHANCE_YOUR_CALM)
            await self._flush()
            await self.send(Closed())
            return
        for event in events:  # one at a time: an answer can close a stream between two of them
            if isinstance(event, h2.events.DataReceived) and event.stream_id not in self.streams:
                self.connection.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                continue
            await super()._handle_events([event])

    def _too_many_resets(self, events: list[h2.events.Event]) -> bool:
        """Count the client's resets among ``events`` (before any of them is handled: a batch of
        frames may hold thousands of HEADERS and RST_STREAM)."""
        resets = sum(1 for e in events if isinstance(e, h2.events.StreamReset) and e.remote_reset)
        if not resets:
            return False
        now = time.monotonic()
        if now - self._window_start > RESET_WINDOW_S:
            self._window_start, self._resets = now, 0
        self._resets += resets
        return self._resets > MAX_CLIENT_RESETS


def install() -> None:
    """Make hypercorn's connections use the guarded protocol (idempotent)."""
    hypercorn.protocol.H2Protocol = _H2Protocol  # type: ignore[attr-defined]
