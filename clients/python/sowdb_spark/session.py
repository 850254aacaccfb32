"""A SparkSession for sowdb's jobs and tests: local by default, any cluster by ``--master``.

The jobs (``python -m sowdb_spark.export``, ``.asof``, ``.stream``) start theirs with
:func:`job_session`, which first says that the JVM is starting (20-40 s in which nothing else
would be printed) and shows Spark's console progress bar; a streaming job waits with
:func:`until_stopped`, which ends it on Ctrl-C in one line (issue 36: an interrupted
``awaitTermination`` printed some 60 lines of py4j traceback).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from types import FrameType

from pyspark import SparkContext
from pyspark.sql import SparkSession
from pyspark.sql.streaming.query import StreamingQuery

import sowdb_spark


def session(master: str = "local[2]", app: str = "sowdb", **conf: str) -> SparkSession:
    """A session with the sowdb sources registered, its UI off and Python workers on this
    interpreter (so that they import the same sowdb packages)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
    )
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    sowdb_spark.register(spark)
    return spark


STARTING = "starting Spark (the JVM takes 20-40 s)..."
"""What a job prints (on stderr) before it starts its session."""

INTERRUPTED = 130
"""A job's exit status after Ctrl-C (128 + SIGINT), as a shell reports an interrupted command."""


def add_job_flags(parser: argparse.ArgumentParser) -> None:
    """The flags every job takes after its own: the Spark master and how to reach sowd (token,
    TLS files); :func:`connection_options` makes them the data source's options."""
    parser.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    parser.add_argument("--token", default="", help="the token of a user with the read right (default $SOW_TOKEN)")
    parser.add_argument("--tls", action="store_true", help="connect over TLS, trusting the system's CAs")
    for name, what in (("cacert", "the CA to trust"), ("cert", "client certificate"), ("key", "its private key")):
        parser.add_argument(f"--{name}", default="", metavar="FILE", help=f"TLS: {what} (PEM)")


def connection_options(args: argparse.Namespace, *more: str) -> dict[str, str]:
    """The data source's options from :func:`add_job_flags`' flags (and the job's own flags
    ``more``), those given only, and ``tls``."""
    given = {name: value for name in ("token", "cacert", "cert", "key", *more) if (value := getattr(args, name))}
    return {"tls": str(args.tls).lower(), **given}


def job_session(master: str, app: str) -> SparkSession:
    """A job's session (:func:`session`), announced on stderr, with Spark's progress bar."""
    print(STARTING, file=sys.stderr, flush=True)
    return session(master, app, **{"spark.ui.showConsoleProgress": "true"})


ABORT_LOGGERS = ("org.apache.spark.sql.execution.datasources.v2.WriteToDataSourceV2Exec",)
"""Where Spark reports a micro-batch's write aborted: on Ctrl-C that abort is the user's wish."""


def _stop_quietly(query: StreamingQuery, settle_s: float = 5.0) -> None:
    """Stop ``query`` after its micro-batch in flight, if one is, has finished (up to
    ``settle_s``); a batch still writing is then aborted by the stop, which Spark would report
    on two ERROR lines ("is aborting", "aborted") after the job's own start lines, though
    nothing failed: the user asked for it. So those loggers are silenced first."""
    give_up = time.monotonic() + settle_s
    while query.status.get("isTriggerActive") and time.monotonic() < give_up:
        time.sleep(0.05)
    jvm = SparkContext._jvm
    if jvm is not None:
        log4j = jvm.org.apache.logging.log4j
        for name in ABORT_LOGGERS:
            log4j.core.config.Configurator.setLevel(name, log4j.Level.OFF)
    query.stop()


def until_stopped(query: StreamingQuery, poll_s: int = 1) -> int:
    """Wait for a streaming query to end: 0 when it ends by itself; on Ctrl-C (SIGINT) stop it,
    print ``stopped (Ctrl-C)`` on stderr and return :data:`INTERRUPTED`.

    The wait is in short steps with SIGINT caught by a flag, never raised inside a py4j call:
    a KeyboardInterrupt there breaks the JVM connection in the middle of a command, which py4j
    and Spark's threads then report over dozens of lines.

    Raises:
        StreamingQueryException: the query failed.
    """
    if threading.current_thread() is not threading.main_thread():  # signals reach the main thread only
        query.awaitTermination()
        return 0
    interrupted = threading.Event()

    def on_sigint(signum: int, frame: FrameType | None) -> None:
        interrupted.set()

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        while not interrupted.is_set():
            if query.awaitTermination(poll_s):
                return 0
        _stop_quietly(query)
    finally:
        signal.signal(signal.SIGINT, previous)
    print("stopped (Ctrl-C)", file=sys.stderr, flush=True)
    return INTERRUPTED
