"""The layering of SPEC §1: the engine, filter language, storage and config never import grpc."""

from __future__ import annotations

import subprocess
import sys


def test_engine_storage_and_expr_never_import_grpc() -> None:
    code = (
        "import sys, sowdb.engine, sowdb.expr, sowdb.storage, sowdb.config, sowdb.errors;"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('grpc', 'sowdb_api', 'google'));"
        "print(' '.join(bad)); sys.exit(1 if bad else 0)"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, f"protocol modules imported below the API layer: {run.stdout}{run.stderr}"


def test_a_subscriber_leaving_mid_send_is_not_logged_as_an_error() -> None:
    import logging

    from sowdb.server import _CLIENT_GONE

    def record(msg: str) -> logging.LogRecord:
        return logging.LogRecord("grpc._cython.cygrpc", logging.ERROR, __file__, 1, msg, None, None)

    assert not _CLIENT_GONE.filter(record("ExecuteBatchError raised in core by servicer method [/x]"))
    assert _CLIENT_GONE.filter(record("Unexpected error in the server"))


def test_mirror_applies_a_whole_stream_including_delta_merges_and_removals() -> None:
    from sowdb_client import Event, Mirror
    from sowdb_client.types import Record

    def rec(key: str, bookmark: int, data: str) -> Record:
        return Record("t", key, bookmark, 0, data.encode())

    mirror = Mirror(delta=True)
    mirror.apply_all(
        [
            Event("subscribed", sub_id="s", bookmark=2),
            Event("group_begin", bookmark=2),
            Event("sow", (rec("1", 1, '{"id":1,"a":{"x":1},"b":1}'), rec("2", 2, '{"id":2}'))),
            Event("group_end"),
            Event("publish", (rec("1", 3, '{"id":1,"a":{"y":2}}'),)),  # a delta: merged
            Event("oof", (rec("2", 4, '{"id":2}'),), reason="deleted"),
            Event("completed", bookmark=4),
        ]
    )
    assert mirror.ready and mirror.bookmark == 4
    assert mirror.values() == [{"id": 1, "a": {"x": 1, "y": 2}, "b": 1}]
