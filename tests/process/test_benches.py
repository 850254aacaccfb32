"""The benchmarks still run: each ``make bench-*`` script, at a tiny size, ends well and prints
the figures docs/performance.md quotes.

A benchmark is not a test of speed here (figures on a shared machine mean nothing at this
size); it is code that reaches into the engine, and when the engine changes under it, it must
fail here rather than on the day someone wants the figures (issue 36: ``make bench-spark``
crashed at its last step, which no test ran). Every ``make bench-*`` target is here; their
orders are ``tools/demo/make_orders.py``'s, so none needs anything beside the checkout. A peer
that is not installed (PostgreSQL, Redis, NATS) is left out by ``peers.py`` itself, which then
measures sowdb alone.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "tools" / "bench"
NODE_DIR = ROOT / "clients" / "node"

RUNS = {
    "bench_server.py": (
        ["--orders", "2000", "--rounds", "1", "--store", "arena"],
        ["update", "query-range", "query-eq", "server RSS"],
    ),
    "bench_history.py": (["--orders", "2000", "--rounds", "1"], ["query then", "recovery", "start-up"]),
    "bench_views.py": (
        ["--orders", "2000", "--updates", "1000"],
        ["page upkeep", "view upkeep", "join upkeep", "view end to end"],
    ),
    "bench_latency.py": (
        ["--rounds", "1", "--seconds", "1.5", "--parts", "latency,lookup", "--subscribers", "1"],
        ["publish -> receive", "point lookup", "floor-stream", "floor-stream3", "targets (issue 29)"],
    ),
    "bench_arena.py": (["--records", "2000"], ["RSS growth", "chunked", "point read"]),
    "bench_store_publish.py": (
        ["--orders", "2000", "--rounds", "1", "--history"],
        ["with history", "insert", "update again", "median"],
    ),
    "bench_store_server.py": (["--orders", "2000", "--rounds", "1"], ["round 1", "median", "arena/objects"]),
    "bench_queries.py": (
        ["--orders", "2000", "--rounds", "1", "--floor"],
        ["round 1", "range ms", "point ms", "indexed floor ms", "arena/objects"],
    ),
    "bench_expr.py": (["--messages", "2000", "--rounds", "1", "--compiles", "20"], ["eval", "compile"]),
    "bench_memory.py": (["--records", "2000"], ["after loading", "after the peer queries", "after a restart"]),
    "bench_replication.py": (["--quick"], ["sync/alone", "failover", "lag", "spread/primary"]),
    "bench_long_commit.py": (
        ["--rows", "3000", "--rounds", "1", "--clients", "2"],
        ["workers 1:", "workers 2:", "ping (", "query ("],
    ),
    "bench_enrichment.py": (
        ["--orders", "2000", "--rounds", "1"],
        ["insert msg/s", "insert msg/cpu-s", "replace msg/s", "replace msg/cpu-s", "enriched/plain"],
    ),
    "bench_subscriptions.py": (
        ["--orders", "2000", "--rounds", "1", "--seconds", "1", "--snapshot", "500", "--absent", "40"],
        ["slow consumer publish", "latency ", "fan-out ", "symbols ", "snapshot "],
    ),
    "bench_security.py": (
        ["--orders", "2000", "--rounds", "1", "--latency-seconds", "1"],
        ["publish msg/s", "query-range ms", "query-eq ms", "latency p50 ms", "latency p99 ms"],
    ),
    "bench_metrics.py": (
        ["--orders", "2000", "--rounds", "1", "--baseline", ""],
        ["publish msg/s", "the metrics cost"],
    ),
    "bench_console.py": (
        ["--seconds", "2", "--rate", "20"],
        ["publish -> received by the page", "publish -> drawn"],
    ),
    "peers.py": (
        ["--records", "2000", "--rounds", "1"],
        ["| upsert 2,000", "| update", "3 % range filter", "indexed equality", "unindexed scan", "| memory"],
    ),
    "bench_spark.py": (
        ["--orders", "2000", "--seconds", "2"],
        ["server publish", "read + count/sum", "df.write", "journal → Parquet", "streaming, 1k msg/s", "engine commit"],
    ),
    "bench_sdks.py": (
        ["--records", "2000", "--publish", "1000", "--rounds", "1"],
        ["sow 2,000 orders: Python", "publish 1,000 orders: Python"],
    ),
    "node": (
        ["--orders", "2000", "--publish", "1000", "--rounds", "1"],
        ["sow 2,000 orders: Node", "publish 1,000 orders: Node"],
    ),
}
"""Every ``make bench-*`` target's script (``node``: clients/node/bench/run.py), its tiny size,
and the figures it must print."""


def _missing(script: str) -> str | None:
    """Why ``script`` cannot run here, or None."""
    if script == "bench_console.py" and not (
        shutil.which("chromium") or shutil.which("chromium-browser") or Path("/usr/bin/chromium").exists()
    ):
        return "no chromium (make setup installs it)"
    if script == "node" and not (NODE_DIR / "dist").is_dir():
        return "the Node SDK is not built (make setup)"
    if script == "bench_spark.py" and importlib.util.find_spec("pyspark") is None:
        return "pyspark is not installed (the [spark] extra)"
    return None


def test_every_make_bench_target_is_run_here() -> None:
    """A new ``make bench-*`` target joins :data:`RUNS`, or this fails."""
    recipes = re.findall(r"^(bench[\w-]*):.*\n\t(.*)$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert len(recipes) >= len(RUNS)
    for target, recipe in recipes:
        script = "node" if "$(NODE_DIR)/bench/run.py" in recipe else re.findall(r"(\w+\.py)", recipe)[0]
        assert script in RUNS, f"make {target} runs {script}, which test_benchmark_runs_at_a_tiny_size does not"


@pytest.mark.timeout(900)  # bench_spark starts a JVM and runs five jobs: minutes on a loaded machine
@pytest.mark.parametrize("script", sorted(RUNS))
def test_benchmark_runs_at_a_tiny_size(script: str) -> None:
    why = _missing(script)
    if why:
        pytest.skip(why)
    args, figures = RUNS[script]
    command = [sys.executable, str(NODE_DIR / "bench" / "run.py") if script == "node" else script, *args]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(command, cwd=BENCH, capture_output=True, text=True, timeout=840, check=False, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    if script == "peers.py" and _postgres():
        figures = [*figures, "PostgreSQL COPY"]
    if script == "bench_sdks.py" and (ROOT / "clients" / "java" / "target" / "classpath.txt").exists():
        figures = [*figures, "Java/Python"]  # the Java SDK is built (make setup): it must be measured
    for figure in figures:
        assert figure in done.stdout, f"{script} no longer prints {figure!r}:\n{done.stdout}"


STORE_RUNS = {
    "bench_subscriptions.py": (
        ["--orders", "2000", "--rounds", "1", "--seconds", "1", "--snapshot", "500", "--absent", "40"],
        ["10 subs msg/cpu-s", "symbols CPU-µs/msg", "latency p99 ms", "fan-out deliv./cpu-s", "snapshot 100 s"],
    ),
    "bench_views.py": (
        ["--orders", "2000", "--updates", "1000", "--rounds", "1"],
        ["page µs/update", "view µs/update", "join µs/update", "grpc view msg/cpu-s"],
    ),
    "bench_history.py": (
        ["--orders", "2000", "--rounds", "1", "--store-rounds", "1"],
        ["load msg/cpu-s", "then server CPU ms", "rebuild entries/cpu-s", "start-up CPU s"],
    ),
}
"""The benchmarks that measure the arena against the objects store in one run (``--store both``,
issue 39's "within 5 %" targets): their tiny size and the figures their table must hold."""


@pytest.mark.timeout(600)
@pytest.mark.parametrize("script", sorted(STORE_RUNS))
def test_store_comparison_runs_at_a_tiny_size(script: str) -> None:
    """``--store both`` alternates the two record stores and prints a table of medians with
    arena/objects beside each figure."""
    args, figures = STORE_RUNS[script]
    command = [sys.executable, script, *args, "--store", "both"]
    done = subprocess.run(command, cwd=BENCH, capture_output=True, text=True, timeout=540, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    table = done.stdout[done.stdout.index("arena/objects") :]
    for figure in figures:
        assert re.search(rf"^{re.escape(figure)} +[\d,.]+ +[\d,.]+ +(?:[\d.]+|nan)$", table, re.MULTILINE), (
            f"{script} --store both has no arena/objects row for {figure!r}:\n{done.stdout}"
        )


def _postgres() -> bool:
    """Whether peers.py measures PostgreSQL here: its server and its Python client installed
    (as ``peers_pg.find_bindir`` finds the server)."""
    server = shutil.which("initdb") or Path("/usr/lib/postgresql/15/bin/initdb").exists()
    return bool(server) and importlib.util.find_spec("psycopg") is not None
