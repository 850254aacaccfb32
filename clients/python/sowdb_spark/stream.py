"""Stream a topic's changes to the console: ``python -m sowdb_spark.stream --topic orders``.

A streaming query of ``format("sowdb")`` (``--from now``: the changes from now on; ``0``: the
whole retained journal first) into Spark's console sink, one table per micro-batch, until
Ctrl-C, which stops it in one line (``stopped (Ctrl-C)``, exit status 130). ``--schema`` picks
the columns (default: the source's own, the document as JSON in ``data``); ``--filter`` is
evaluated by the server. A secured server: ``--token`` (default ``$SOW_TOKEN``), ``--tls`` or
``--cacert``, ``--cert``/``--key``, as the export job.
"""

from __future__ import annotations

import argparse
import sys
import tempfile

from pyspark.sql import SparkSession

from sowdb_client.cli.args import default_server, server_address
from sowdb_spark.session import add_job_flags, connection_options, job_session, until_stopped

RUNNING = "streaming the changes of {topic} to the console (Ctrl-C stops it)"
"""What the job prints (on stderr) once its query runs."""


def main(argv: list[str] | None = None, *, spark: SparkSession | None = None) -> int:
    """Run the job (in ``spark`` when given, which is left running; else in a session of its own);
    0 when the query ended by itself, 130 after Ctrl-C."""
    p = argparse.ArgumentParser(
        prog="python -m sowdb_spark.stream",
        description=__doc__.replace("``", ""),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--server", default=default_server(), type=server_address, help="sowd address (default %(default)s)")
    p.add_argument("--topic", required=True, help="a topic name or regex")
    p.add_argument("--filter", default="", help="only the changes whose record matches (the filter language)")
    p.add_argument("--from", dest="from_bookmark", default="now", help="'now' (default), 0, or a bookmark")
    p.add_argument("--schema", default="", help='the columns, e.g. "orderId long, price long, _bookmark long"')
    p.add_argument("--max-entries-per-batch", default="10000", help="admission control (default 10000)")
    p.add_argument("--checkpoint", default="", help="the query's checkpoint directory (default: a temporary one)")
    add_job_flags(p)
    a = p.parse_args(argv)
    own = spark is None
    spark = spark or job_session(a.master, "sowdb-stream")
    options = {
        "server": a.server,
        "topic": a.topic,
        "from_bookmark": a.from_bookmark,
        "max_entries_per_batch": a.max_entries_per_batch,
        **connection_options(a, "filter"),
    }
    with tempfile.TemporaryDirectory(prefix="sowdb-stream-") as tmp:
        reader = spark.readStream.format("sowdb").options(**options)
        if a.schema:
            reader = reader.schema(a.schema)
        query = (
            reader.load()
            .writeStream.format("console")
            .option("truncate", "false")
            .option("checkpointLocation", a.checkpoint or tmp)
            .start()
        )
        print(RUNNING.format(topic=a.topic), file=sys.stderr, flush=True)
        status = until_stopped(query)
    if own:
        spark.stop()
    return status


if __name__ == "__main__":
    raise SystemExit(main())
