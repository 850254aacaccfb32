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
