"""The server's log: what gRPC logs when a subscriber goes away mid-send is not an error."""

from __future__ import annotations

import logging

from sowdb.server import _CLIENT_GONE


def test_a_subscriber_leaving_mid_send_is_not_logged_as_an_error() -> None:
    def record(msg: str) -> logging.LogRecord:
        return logging.LogRecord("grpc._cython.cygrpc", logging.ERROR, __file__, 1, msg, None, None)

    assert not _CLIENT_GONE.filter(record("ExecuteBatchError raised in core by servicer method [/x]"))
    assert _CLIENT_GONE.filter(record("Unexpected error in the server"))
