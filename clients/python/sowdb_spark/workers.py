"""The check :func:`sowdb_spark.register` makes of Spark's Python workers, before any query.

Spark starts its Python workers with ``PYSPARK_PYTHON`` (else ``python3`` from the PATH), read
when the SparkContext is created, not with the interpreter of the driver. A script run as
``.venv/bin/python job.py`` without the venv activated gets workers that cannot import
``sowdb_spark``, and its first read fails deep in a Spark traceback with a
``ModuleNotFoundError``. One tiny job at registration asks the workers themselves (on a
cluster, the executors' Python, which the driver's file system cannot tell), so the failure is
one sentence saying what to set, before any query is planned.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from sowdb_spark.rpc import SowdbSparkError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def probe(_: object) -> str:
    """Run on a worker: unpickling this function imports :mod:`sowdb_spark` there (it is pickled
    by reference), which is the whole test; the answer names the worker's interpreter."""
    return sys.executable


def check_workers(spark: SparkSession) -> None:
    """Fail unless Spark's Python workers can import ``sowdb_spark``.

    A Spark Connect session has no SparkContext here: its workers are the Connect server's,
    set up where that server runs, and are not checked.

    Raises:
        SowdbSparkError: one sentence naming the workers' Python and what to set.
    """
    try:
        sc = spark.sparkContext
    except Exception:  # Spark Connect: no context on the client
        return
    try:
        sc.parallelize([0], 1).map(probe).collect()
    except Exception as exc:
        errors = [line.strip() for line in str(exc).splitlines() if "Error:" in line]
        cause = errors[-1] if errors else type(exc).__name__
        raise SowdbSparkError(
            f"Spark's Python workers run {sc.pythonExec!r}, which cannot import sowdb_spark ({cause}): set "
            f"PYSPARK_PYTHON={sys.executable} (or spark.pyspark.python) before the SparkSession is created, "
            "or make the session with sowdb_spark.session.session()"
        ) from None
