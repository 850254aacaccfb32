"""The docs/ pages' other code blocks run as written (issue 32): the blocks the README held
before, untested there, that a test can run without a cluster or a second terminal.

The tour's Python SDK examples run against a sowd on the demo config (``make run``'s), the page's
``127.0.0.1:9007`` (and the default ``Client()``) pointed at it; the configuration page's sample
config is one sowd accepts; the contributors' filter-engine example runs in this process's
Python. Not run: docs/spark.md's blocks (Spark jobs; tests/spark runs the sources and jobs they
show), the console's ``sowd --http-listen`` (a server on the fixed port 9007, started by hand;
tests/console starts the same) and the README's ``make run`` / ``make test`` (CI runs the latter).
"""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.doc_pages import DOC_ADDRESS, blocks
from tests.support import Process, sowd_command

pytestmark = pytest.mark.readme


def run_python(block: str, target: str) -> subprocess.CompletedProcess[str]:
    """A page's Python block as a script, its server (``make run``'s, or the default) at ``target``."""
    code = block.replace(f'"{DOC_ADDRESS}"', repr(target)).replace("Client()", f"Client({target!r})")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


def test_the_tours_python_sdk_examples_run_as_written(sowd_process: Process) -> None:
    first, history = blocks("tour.md", "With the Python SDK", lang="python")
    run = run_python(first, sowd_process.target)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == "1 {'orderId': 1, 'symbol': 'SYM1', 'price': 120}"
    assert lines[1] == "1"  # records_matched
    assert lines[2].startswith("filter 9 expected an operand")
    run = run_python(history, sowd_process.target)
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr


def test_the_configuration_pages_sample_is_a_config_sowd_accepts(tmp_path: Path) -> None:
    (sample,) = blocks("configuration.md", "Configuration", lang="toml")
    config = tmp_path / "sowd.toml"
    config.write_text(sample)
    run = sowd_command("--config", str(config), "--print-config")
    assert run.returncode == 0, run.stderr
    effective = tomllib.loads(run.stdout)
    assert [t["name"] for t in effective["topic"]] == ["orders", "quotes"]
    assert [v["name"] for v in effective["view"]] == ["orders_by_symbol"]
    assert [c["name"] for c in effective["conflated_topic"]] == ["orders_5s"]


def test_the_filter_engine_example_runs_and_shows_what_it_returns() -> None:
    """Each statement of the example runs; a statement whose comment is a Python literal
    (``# -2``, ``# {'a': 1, 'b': {'c': 2}}``) returns that value."""
    (example,) = blocks("architecture.md", "The filter engine (for contributors)", lang="python")
    lines = example.splitlines()
    namespace: dict[str, object] = {"record": {"price": 191, "orderId": 7}}  # the one name left to the reader
    checked = 0
    for statement in ast.parse(example).body:
        code = ast.get_source_segment(example, statement)
        assert code is not None
        shown = lines[(statement.end_lineno or statement.lineno) - 1].partition("  # ")[2]
        if not isinstance(statement, ast.Expr):
            exec(compile(code, "docs/architecture.md", "exec"), namespace)  # the page's own code
            continue
        value = eval(compile(code, "docs/architecture.md", "eval"), namespace)  # the page's own code
        try:
            expected = ast.literal_eval(shown.strip())
        except (ValueError, SyntaxError):
            continue  # a comment in words
        assert value == expected, f"{code} is {value!r}, the page says {expected!r}"
        checked += 1
    assert checked >= 4, checked
