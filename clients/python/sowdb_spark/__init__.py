"""PySpark data sources for sowdb (SPEC §9): ``sowdb`` and ``sowdb.journal``.

Usage::

    import sowdb_spark
    sowdb_spark.register(spark)
    df = spark.read.format("sowdb").option("topic", "orders").load()

``python -m sowdb_spark.export`` writes a journal range to Parquet, ``python -m sowdb_spark.asof``
computes a topic's state as of a bookmark from such an export.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

# grpcio 1.85's fork handlers restart its epoll poller in a child forked by subprocess.Popen with
# a preexec_fn, which is how PySpark launches its JVM: with a gRPC channel open in the process,
# the child dies before exec and the session fails with JAVA_GATEWAY_EXITED (grpc/grpc#43055).
# Spark's driver forks only to exec, so gRPC's fork support is of no use here; read by grpc at
# import, so this holds where sowdb_spark is imported first (a user's own setting is kept).
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

from sowdb_spark.arrow import JOURNAL_SCHEMA, RECORD_SCHEMA
from sowdb_spark.rpc import SowdbSparkError
from sowdb_spark.sources import SowdbDataSource, SowdbJournalDataSource
from sowdb_spark.workers import check_workers

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "JOURNAL_SCHEMA",
    "RECORD_SCHEMA",
    "SowdbDataSource",
    "SowdbJournalDataSource",
    "SowdbSparkError",
    "register",
]


def register(spark: SparkSession, *, check: bool = True) -> None:
    """Register the ``sowdb`` and ``sowdb.journal`` formats with a session.

    Args:
        spark: the session.
        check: first make sure Spark's Python workers can import ``sowdb_spark`` (one tiny
            job), so that a wrong ``PYSPARK_PYTHON`` is one clear sentence now rather than a
            ``ModuleNotFoundError`` deep in the first query's traceback.

    Raises:
        SowdbSparkError: the workers cannot import ``sowdb_spark``; the message says what to set.
    """
    if check:
        check_workers(spark)
    spark.dataSource.register(SowdbDataSource)
    spark.dataSource.register(SowdbJournalDataSource)
