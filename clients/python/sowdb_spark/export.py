"""Export the journal to Parquet: ``python -m sowdb_spark.export --out PATH``.

Reads the journal range ``(--from, --to]`` (default: all of the retained journal up to now) of
``--topic`` (a name or regex; default every topic) through ``format("sowdb.journal")`` in
``--partitions`` parallel bookmark ranges and writes it as Parquet (columns bookmark, timestamp,
topic, sow_key, operation, data). With ``--incremental CHECKPOINT`` it runs the streaming source
into Spark's Parquet sink with ``trigger(availableNow=True)`` instead: each run appends exactly
the entries since the last run (the checkpoint holds the last bookmark), the way to keep a lake
copy of the transaction log up to date.

Any cluster: ``--master spark://host:7077`` (or ``yarn``, ``k8s://...``); ``--server`` must then
be an address the executors can reach. A secured server (SPEC §11): ``--token`` (default
``$SOW_TOKEN``), ``--tls`` or ``--cacert``, ``--cert``/``--key``, the sources' options of the
same names.
"""

from __future__ import annotations

import argparse
import time

from pyspark.sql import SparkSession

from sowdb_client.cli.args import default_server, server_address
from sowdb_spark.session import INTERRUPTED, add_job_flags, connection_options, job_session, until_stopped


def main(argv: list[str] | None = None, *, spark: SparkSession | None = None) -> int:
    """Run the job (in ``spark`` when given, which is left running; else in a session of its own)."""
    p = argparse.ArgumentParser(
        prog="python -m sowdb_spark.export",
        description=__doc__.replace("``", ""),  # the module's help, without its reST markup
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--server", default=default_server(), type=server_address, help="sowd address (default %(default)s)")
    p.add_argument("--out", required=True, help="the Parquet directory to write (or append to)")
    p.add_argument("--topic", default="", help="a topic name or regex (default: every topic)")
    p.add_argument("--from", dest="from_bookmark", default="0", help="entries after this bookmark (default 0)")
    p.add_argument("--to", dest="to_bookmark", default="0", help="up to this bookmark (default: the latest)")
    p.add_argument("--partitions", default="2", help="parallel bookmark ranges (default 2)")
    p.add_argument("--incremental", metavar="CHECKPOINT", help="append what is new since the last run")
    add_job_flags(p)
    a = p.parse_args(argv)
    own = spark is None
    spark = spark or job_session(a.master, "sowdb-export")
    start = time.perf_counter()
    options = {"server": a.server, "from_bookmark": a.from_bookmark, **connection_options(a)}
    if a.topic:
        options["topic"] = a.topic
    if a.incremental:
        reader = spark.readStream.format("sowdb.journal").options(partitions=a.partitions, **options)
        query = (
            reader.load()
            .writeStream.format("parquet")
            .option("path", a.out)
            .option("checkpointLocation", a.incremental)
            .trigger(availableNow=True)
            .start()
        )
        if until_stopped(query) == INTERRUPTED:
            if own:
                spark.stop()
            return INTERRUPTED
        rows = sum(int(p.get("numInputRows", 0)) for p in query.recentProgress)
    else:
        df = (
            spark.read.format("sowdb.journal")
            .options(to_bookmark=a.to_bookmark, partitions=a.partitions, **options)
            .load()
        )
        df.write.mode("append").parquet(a.out)
        rows = spark.read.parquet(a.out).count() if a.out else 0
    took = time.perf_counter() - start
    print(f"exported {rows:,} journal entries to {a.out} in {took:.1f}s")
    if own:
        spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
