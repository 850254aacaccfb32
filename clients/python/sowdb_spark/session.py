"""A SparkSession for sowdb's jobs and tests: local by default, any cluster by ``--master``."""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

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
