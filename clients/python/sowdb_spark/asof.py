"""The state of a topic as of a bookmark, from an exported journal:
``python -m sowdb_spark.asof --journal PATH --topic T --bookmark B --out PATH``.

Each journal entry of a publish carries the whole record after the change (the server merges a
delta before journaling), and a delete or an expiration is an entry of its own; so the state as
of B is, for every SowKey of the topic, its last entry at or before B — kept when that entry is
a publish, dropped when it is a delete or an expiration (``max_by`` on the bookmark, no fold).
The result equals, record for record, the server's historical ``Sow`` of the topic at B, for a
point inside the topic's history window (granularity 0; with a coarser granularity the server
keeps one version per interval, and a point inside an interval may see an earlier one).

Output: Parquet with topic, sow_key, bookmark, timestamp, data (the JSON text).
"""

from __future__ import annotations

import argparse
import time

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812 (the PySpark convention)

from sowdb_spark.session import job_session


def as_of(journal: DataFrame, topic: str, bookmark: int) -> DataFrame:
    """The records of ``topic`` as of ``bookmark`` from journal rows (the export's columns)."""
    entries = journal.where((F.col("topic") == topic) & (F.col("bookmark") <= bookmark))
    last = entries.groupBy("topic", "sow_key").agg(
        F.max_by(F.struct("bookmark", "timestamp", "operation", "data"), F.col("bookmark")).alias("e")
    )
    return last.where(F.col("e.operation") == "publish").select(
        "topic",
        "sow_key",
        F.col("e.bookmark").alias("bookmark"),
        F.col("e.timestamp").alias("timestamp"),
        F.col("e.data").alias("data"),
    )


def main(argv: list[str] | None = None, *, spark: SparkSession | None = None) -> int:
    """Run the job (in ``spark`` when given, which is left running; else in a session of its own)."""
    p = argparse.ArgumentParser(prog="python -m sowdb_spark.asof", description=__doc__.splitlines()[0])
    p.add_argument("--journal", required=True, help="an exported journal (Parquet, python -m sowdb_spark.export)")
    p.add_argument("--topic", required=True, help="the topic")
    p.add_argument("--bookmark", required=True, type=int, help="the point: a bookmark number")
    p.add_argument("--out", required=True, help="the Parquet directory to write")
    p.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    a = p.parse_args(argv)
    own = spark is None
    spark = spark or job_session(a.master, "sowdb-asof")
    start = time.perf_counter()
    out = as_of(spark.read.parquet(a.journal), a.topic, a.bookmark)
    out.write.mode("overwrite").parquet(a.out)
    count = spark.read.parquet(a.out).count()
    print(f"{count:,} records of {a.topic} as of bookmark {a.bookmark} in {a.out} ({time.perf_counter() - start:.1f}s)")
    if own:
        spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
