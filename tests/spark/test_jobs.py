"""The Spark jobs as a person runs them (issue 36): a job says at once that the JVM is starting,
and the streaming job stops on Ctrl-C with one line and exit status 130, not ~60 lines of py4j
traceback."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from sowdb_client import Client
from sowdb_spark.session import INTERRUPTED, STARTING
from sowdb_spark.stream import RUNNING


class _Lines:
    """A pipe's lines as they come, read on a thread; :meth:`wait` for one that holds a text."""

    def __init__(self, pipe: object) -> None:
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._read, args=(pipe,), daemon=True)
        self._thread.start()

    def _read(self, pipe: object) -> None:
        for line in pipe:  # type: ignore[attr-defined]
            # Spark's progress bar redraws one line with carriage returns: not a line of its own
            parts = [p for p in line.rstrip("\n").split("\r") if p.strip() and not p.startswith("[Stage")]
            with self._changed:
                self.lines.extend(parts)
                self._changed.notify_all()

    def wait(self, text: str, timeout: float) -> bool:
        """Whether a line holding ``text`` (a row of the console sink, spaces aside) came in time."""
        with self._changed:
            return self._changed.wait_for(lambda: any(text in line.replace(" ", "") for line in self.lines), timeout)

    def join(self) -> list[str]:
        self._thread.join(timeout=30)
        return self.lines


def test_the_streaming_job_starts_saying_so_and_stops_on_ctrl_c_in_one_line(server: str, tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "sowdb_spark.stream", "--server", server, "--topic", "ticks", "--schema", "id long"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        start_new_session=True,  # its own process group, signalled as a terminal's Ctrl-C signals one
    )
    try:
        out, err = _Lines(proc.stdout), _Lines(proc.stderr)
        assert err.wait(STARTING.replace(" ", ""), 30), err.lines  # before the JVM: at once
        running = RUNNING.format(topic="ticks")
        assert err.wait(running.replace(" ", ""), 180), err.lines
        deadline = time.monotonic() + 120
        with Client(server) as c:  # a micro-batch on the console: it runs
            while not out.wait("|42|", 2) and time.monotonic() < deadline:
                c.publish("ticks", [{"id": 42}])
        assert out.wait("|42|", 0), out.lines
        os.killpg(proc.pid, signal.SIGINT)
        status = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    lines = err.join()
    out.join()
    assert status == INTERRUPTED
    assert lines[0] == STARTING
    after = lines[lines.index(running) + 1 :]
    assert after == ["stopped (Ctrl-C)"], "\n".join(lines)
