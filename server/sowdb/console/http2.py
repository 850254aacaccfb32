"""A guard for hypercorn 0.18's HTTP/2 side: data that arrives on a stream already answered.

A gRPC client (``grpcurl -plaintext HOST:9080 list``) speaks HTTP/2 with prior knowledge and
sends its request body after the headers. The console answers such a request at once, and
hypercorn forgets the stream when the answer is complete; the body's DATA frame that then
arrives makes hypercorn look the stream up (``self.streams[stream_id]``), raise ``KeyError``
and drop the connection with an "Unhandled exception in client_connected_cb" traceback in the
server's log. Upstream has the fix proposed (pgjones/hypercorn#334, #312) but not released;
until it is, such DATA is acknowledged for flow control and otherwise ignored, exactly as
hypercorn already does for the stream's END_STREAM.
"""

from __future__ import annotations

import h2.events
import hypercorn.protocol
from hypercorn.protocol.h2 import H2Protocol


class _H2Protocol(H2Protocol):
    async def _handle_events(self, events: list[h2.events.Event]) -> None:
        for event in events:  # one at a time: an answer can close a stream between two of them
            if isinstance(event, h2.events.DataReceived) and event.stream_id not in self.streams:
                self.connection.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                continue
            await super()._handle_events([event])


def install() -> None:
    """Make hypercorn's connections use the guarded protocol (idempotent)."""
    hypercorn.protocol.H2Protocol = _H2Protocol  # type: ignore[attr-defined]
