"""J-1: every acknowledged publish survives kill -9 of the server, and current equals the
replay of the journal (the cycle logic is shared with the longer soak in tools/soak)."""

from __future__ import annotations

from pathlib import Path

from tools.soak.crash_soak import run


def test_kill_9_at_random_moments_loses_no_acknowledged_message(tmp_path: Path) -> None:
    totals = run(10, tmp_path, seed=20261121, max_uptime=0.6)
    assert totals["cycles"] == 10
    assert totals["acknowledged"] > 500  # the cycles really published between the kills
    assert totals["journal"] >= totals["acknowledged"]
