"""The benchmarks still run: each ``make bench-*`` script, at a tiny size, ends well and prints
the figures docs/performance.md quotes.

A benchmark is not a test of speed here (figures on a shared machine mean nothing at this
size); it is code that reaches into the engine, and when the engine changes under it, it must
fail here rather than on the day someone wants the figures.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "tools" / "bench"
DATASET = ROOT.parent / "shared" / "bench" / "make_orders.py"  # the benchmarks' orders (bench/README.md)

RUNS = {
    "bench_server.py": (["--orders", "2000", "--rounds", "1"], ["query-range", "query-eq", "server RSS"]),
    "bench_history.py": (["--orders", "2000", "--rounds", "1"], ["query then", "recovery", "start-up"]),
    "bench_views.py": (["--orders", "2000", "--updates", "1000"], ["page upkeep", "view upkeep", "view end to end"]),
    "bench_latency.py": (
        ["--rounds", "1", "--seconds", "1.5", "--parts", "latency,lookup", "--subscribers", "1"],
        ["publish -> receive", "point lookup", "floor-stream", "floor-stream3", "targets (issue 29)"],
    ),
    "bench_expr.py": (["--messages", "2000", "--rounds", "1", "--compiles", "20"], ["eval", "compile"]),
    "bench_memory.py": (["--records", "2000"], ["after loading", "after the peer queries", "after a restart"]),
    "bench_replication.py": (["--quick"], ["sync/alone", "failover", "lag", "spread/primary"]),
}
SELF_CONTAINED = {"bench_expr.py", "bench_replication.py"}
"""The benchmarks that make their own messages (the others need the shared dataset)."""


@pytest.mark.parametrize("script", sorted(RUNS))
def test_benchmark_runs_at_a_tiny_size(script: str) -> None:
    if script not in SELF_CONTAINED and not DATASET.exists():
        pytest.skip(f"the benchmarks' dataset generator is not beside this checkout ({DATASET})")
    args, figures = RUNS[script]
    done = subprocess.run(
        [sys.executable, script, *args], cwd=BENCH, capture_output=True, text=True, timeout=240, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    for figure in figures:
        assert figure in done.stdout, f"{script} no longer prints {figure!r}:\n{done.stdout}"
