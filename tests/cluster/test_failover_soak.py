"""``tools/soak/failover_soak.py --cycles 1`` ends well: etcd and three ``sowd`` under ``sync``
load, the primary killed with SIGKILL, its successor acknowledging, the killed node back as a
replica; nothing acknowledged lost, nothing unexpected, every node's journal and ``current`` the
same (the checks are the soak's; this runs one cycle of it, a few seconds), plain and secured
(TLS and tokens, issue 38, and node certificates: the replicas follow over mutual TLS on the
peer port, issue 40), etcd secured in both (issue 40)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SOAK = Path(__file__).resolve().parents[2] / "tools" / "soak" / "failover_soak.py"


@pytest.mark.parametrize("secured", [False, True], ids=["plaintext", "secured"])
def test_one_failover_cycle_loses_nothing_and_leaves_every_node_identical(tmp_path: Path, secured: bool) -> None:
    done = subprocess.run(
        [sys.executable, str(SOAK), "--cycles", "1", "--work-dir", str(tmp_path), *(["--secured"] if secured else [])],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = done.stdout.splitlines()
    table = lines[lines.index(next(line for line in lines if line.split()[:2] == ["cycle", "killed"])) + 1].split()
    assert table[0] == "1"
    assert (table[3], table[4]) == ("0", "0")  # lost, unexpected
    assert 0 < float(table[2]) < 2 + 8  # the failover: lease_ttl plus a few seconds on a loaded machine
    assert "lost 0, unexpected 0" in done.stdout
    assert "every node: bookmark" in done.stdout
    assert ("TLS, tokens and node certificates" if secured else "plaintext") in done.stdout
    assert "etcd TLS + auth" in done.stdout  # the soak's etcd is secured as docs/cluster.md does it
