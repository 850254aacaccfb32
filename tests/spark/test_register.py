"""``register(spark)`` checks that Spark's Python workers can import ``sowdb_spark``: a script run
as ``.venv/bin/python job.py`` without the venv activated gets workers on ``python3`` from the
PATH, which fail the first read deep in a traceback; register says so in one sentence instead."""

from __future__ import annotations

import sys
import sysconfig
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

import sowdb_spark
from sowdb_spark import SowdbSparkError


def test_workers_that_cannot_import_sowdb_spark_are_one_clear_error(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a Python with pyspark (what the workers need to start) but without the sowdb packages
    bare = tmp_path / "bare-python"
    # (no site processing: the venv's packages on the path, not the editable install's .pth)
    packages = sysconfig.get_paths()["purelib"]
    bare.write_text(f'#!/bin/sh\nPYTHONPATH={packages} exec {sys.executable} -S "$@"\n')
    bare.chmod(0o755)
    # what PYSPARK_PYTHON (read when the context is created) decides for every job after it
    monkeypatch.setattr(spark.sparkContext, "pythonExec", str(bare))
    with pytest.raises(SowdbSparkError) as refused:
        sowdb_spark.register(spark)
    message = str(refused.value)
    assert message.startswith(f"Spark's Python workers run '{bare}', which cannot import sowdb_spark (")
    assert f"set PYSPARK_PYTHON={sys.executable}" in message
    assert "No module named 'sowdb_spark'" in message
    assert "\n" not in message


def test_workers_that_can_import_it_pass(spark: SparkSession) -> None:
    sowdb_spark.register(spark)  # the session's workers run this interpreter
    assert spark.read.format("sowdb").options(topic="books").load().columns  # registered
