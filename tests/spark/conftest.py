"""One SparkSession (``local[2,4]``: two threads, and a failed task is tried again up to 4 times,
as on a cluster — plain ``local[2]`` never retries a task) and one ``sowd`` process for every
Spark test of the run: a session takes 8 to 10 s to start."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from sowdb_spark.session import session
from tests.support import Process, start_sowd

SPARK_CONFIG = """
[[topic]]
name = "books"
key = ["/id"]

[[topic]]
name = "mixed"
key = ["/id"]

[[topic]]
name = "written"
key = ["/id"]

[[topic]]
name = "failing"
key = ["/id"]

[[topic]]
name = "keyless"

[[topic]]
name = "ledger"
key = ["/id"]
history = { window = "1d" }

[[topic]]
name = "ticks"
key = ["/id"]

[[topic]]
name = "copied"
key = ["/id"]
"""


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    s = session("local[2,4]", "sowdb-tests")
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The address of a sowd process with the topics of :data:`SPARK_CONFIG`."""
    root: Path = tmp_path_factory.mktemp("spark-sowd")
    config = root / "sowdb.toml"
    config.write_text(SPARK_CONFIG)
    p: Process = start_sowd(root / "data", "--config", str(config))
    try:
        yield p.target
    finally:
        if p.proc.poll() is None:
            p.stop()
