"""docs/spark-cluster.md runs as written: a Spark standalone master and worker (separate JVMs,
started by pyspark's own ``bin/spark-class``, bound to 127.0.0.1 on free ports), a job on
``spark://`` whose executors (more JVMs, with Python workers of their own) do the batch read,
the transactional write, the journal read and a streaming query against a real ``sowd``; then
the master and the worker are stopped by the page's last block, and killed here if it failed.

Slow (a minute or two: four JVMs start), so it runs in ``make test-spark-cluster`` (which
``.ci/run`` calls), not in ``make test``: it is skipped unless ``SOWDB_SPARK_CLUSTER=1``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.doc_pages import blocks
from tests.process.test_readme_tour import free_port
from tests.support import start_sowd

BIN = Path(sys.executable).parent

pytestmark = pytest.mark.skipif(
    os.environ.get("SOWDB_SPARK_CLUSTER") != "1", reason="a Spark cluster test: make test-spark-cluster"
)


def _block(text: str, master: int, ui: int, worker_ui: int, server: str) -> str:
    return (
        text.replace("127.0.0.1:7077", f"127.0.0.1:{master}")
        .replace("--port 7077", f"--port {master}")
        .replace("--webui-port 8080", f"--webui-port {ui}")
        .replace("--webui-port 8081", f"--webui-port {worker_ui}")
        .replace("127.0.0.1:9007", server)
    )


def _run(block: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    for name in ("SOW_TOKEN", "SOW_SERVER", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_HOME"):
        env.pop(name, None)
    return subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", block], cwd=cwd, env=env, capture_output=True, text=True, timeout=400
    )


def _end(pid_file: Path, stop: bool) -> None:
    """Make sure a JVM the page started ends: ``stop`` sends it SIGTERM (the page's last block
    did not run); then wait for it to go, and SIGKILL it after 30 s. Only that process, by its
    id; it is not this process's child, so there is no ``wait()`` for it."""
    if not pid_file.exists():
        return
    pid = int(pid_file.read_text())
    deadline = time.monotonic() + 30
    try:
        if stop:
            os.kill(pid, signal.SIGTERM)
        while time.monotonic() < deadline:
            os.kill(pid, 0)  # raises once it is gone
            time.sleep(0.2)
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def test_a_standalone_cluster_runs_the_pages_job(tmp_path: Path) -> None:
    start, job, stop = blocks("spark-cluster.md")
    sowd = start_sowd(tmp_path / "data")
    master, ui, worker_ui = free_port(), free_port(), free_port()
    cluster = tmp_path / "spark-cluster"
    began = time.monotonic()
    stopped = False
    try:
        started = _run(_block(start, master, ui, worker_ui, sowd.target), tmp_path)
        assert started.returncode == 0, f"{started.stderr}\n{(cluster / 'worker.log').read_text()}"
        up = time.monotonic()
        ran = _run(_block(job, master, ui, worker_ui, sowd.target), tmp_path)
        assert ran.returncode == 0, ran.stderr
        done = time.monotonic()
        assert ran.stdout.splitlines() == [
            f"workers: spark://127.0.0.1:{master} 2 cores",
            "read: 1000 orders, 4 partitions",
            "journal: 1000 publishes",
            "stream: 1000 notes",
        ]
        # the executors ran in the worker's JVMs, not in the driver's process
        executors = list((cluster / "work").glob("app-*/*/stderr"))
        assert executors, "no executor was started by the worker"
        stopped_run = _run(_block(stop, master, ui, worker_ui, sowd.target), tmp_path)
        stopped = stopped_run.returncode == 0
        assert stopped, stopped_run.stderr
        print(f"cluster up in {up - began:.1f} s, job in {done - up:.1f} s")
    finally:
        _end(cluster / "worker.pid", stop=not stopped)
        _end(cluster / "master.pid", stop=not stopped)
        sowd.stop()
