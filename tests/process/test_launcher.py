"""The one ``sowd`` launcher (:mod:`sowdb.testing`) that the tests, benchmarks, soaks and Node
tests share: the address from the banner, a refusal with its reason, output drained so a
talkative child never blocks, and ``python -m sowdb.testing`` leaving no server behind."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from sowdb import testing
from sowdb_client import Client
from tests.support import TOPICS_TOML


def test_start_serves_on_the_banners_address_and_stop_ends_it(tmp_path: Path) -> None:
    sowd = testing.start(tmp_path / "data", config=TOPICS_TOML)
    with Client(sowd.target) as c:
        assert "pulses" in {t.name for t in c.list_topics()}  # the tests' topic file
    assert sowd.target.startswith("127.0.0.1:")
    assert sowd.banner.startswith(f"sowd listening on {sowd.target} ")
    status, output = sowd.stop()
    assert status == 0
    assert "sowd stopped" in output


def test_a_refused_start_says_why(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[[topic]]\nname = "a"\nbogus = 1\n')
    with pytest.raises(testing.NotStarted) as refused:
        testing.start(tmp_path / "data", config=bad)
    assert refused.value.status == 2
    assert "unknown setting 'bogus'" in refused.value.output


def test_a_child_that_prints_much_after_its_banner_is_never_blocked(tmp_path: Path) -> None:
    """A pipe holds 64 KiB: a child writing 4 MiB after its banner finishes only if someone reads."""
    script = textwrap.dedent("""
        import sys
        print("sowd listening on 127.0.0.1:1 (a stand-in)", flush=True)
        for _ in range(4096):
            sys.stdout.write("x" * 1023 + "\\n")
        print("the end", flush=True)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    child = testing.Sowd(proc)
    child.wait_serving(timeout=30)
    assert child.target == "127.0.0.1:1"
    assert proc.wait(timeout=30) == 0  # it was not blocked on a full pipe
    status, output = child.stop()
    assert status == 0
    assert output.endswith("the end\n")
    assert len(child.lines) == 4096 + 2


def test_the_program_stops_sowd_when_its_parent_goes(tmp_path: Path) -> None:
    """``python -m sowdb.testing`` (the Node tests' launcher) prints sowd's output and stops it
    when its standard input closes, as it does when the process that started it dies."""
    data = tmp_path / "data"
    launcher = subprocess.Popen(
        [sys.executable, "-m", "sowdb.testing", "--data-dir", str(data), "--config", str(TOPICS_TOML)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    shown = testing.Sowd(launcher)
    shown.wait_serving()
    with Client(shown.target) as c:
        assert c.ping() >= 0
    assert launcher.stdin is not None
    launcher.stdin.close()
    assert launcher.wait(timeout=30) == 0
    assert "sowd stopped" in shown.stop()[1]
    again = testing.start(data, config=TOPICS_TOML)  # the data directory's lock was let go
    assert again.stop()[0] == 0
