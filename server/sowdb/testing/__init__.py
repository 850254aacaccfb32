"""Start a throw-away ``sowd`` as a child process: the one launcher of the tests, the benchmarks,
the soaks and the Node SDK's tests (nats.py's model: one ``nats-server`` launcher for all).

It lives in the ``sowdb`` package, not under ``tests/`` or ``tools/``, because every one of its
users can import it from there with no path tricks: the benchmarks and soaks run as scripts
(``python tools/bench/x.py``, where only their own folder is on ``sys.path``), the tests import
it as a package, and the Node tests run it as ``python -m sowdb.testing`` from any directory. A
user of sowdb may start a server for their own tests the same way.

The launcher binds ``127.0.0.1:0`` (a free port, chosen by the kernel), reads the address back
from the ``sowd listening on HOST:PORT`` banner, and drains the server's output (stderr merged
into stdout) in a thread for as long as it runs, as a supervisor would: a talkative server (a
log line per refused call) never blocks on a full pipe, and :attr:`Sowd.output` says what it
printed when a test needs to show or check it.

Usage as a program (what the Node tests do)::

    python -m sowdb.testing --data-dir D [--config F] [SOWD FLAGS ...]

prints everything sowd prints (the banner included), and stops sowd (SIGTERM, then waits) when
it gets SIGTERM or SIGINT, or when its standard input is closed: a parent that dies, even by
``kill -9``, leaves no server behind.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import tomllib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

BANNER = "listening on "
"""What sowd prints, followed by its address, once it serves."""

START_TIMEOUT_S = 60.0
"""How long :func:`start` waits for the banner (recovery of a big data directory included)."""


class NotStarted(RuntimeError):
    """sowd ended, or printed no banner in time, instead of serving.

    Attributes:
        status: its exit status (``None``: still running when given up on, then killed).
        output: everything it printed.
    """

    def __init__(self, status: int | None, output: str) -> None:
        super().__init__(f"sowd did not start (exit status {status}):\n{output}")
        self.status = status
        self.output = output


class Sowd:
    """``sowd`` running as a child process, its output read as it comes (see the module)."""

    def __init__(self, proc: subprocess.Popen[str], echo: Callable[[str], None] | None = None) -> None:
        """Read the output of ``proc`` (stdout, text); ``echo``: also called with each line."""
        self.proc = proc
        self._echo = echo
        self.target = ""
        """``HOST:PORT`` it serves on (empty until the banner)."""
        self.banner = ""
        """The line sowd printed once serving (``sowd listening on ...``)."""
        self._lines: list[str] = []
        self._changed = threading.Condition()
        self._ended = False
        self._reader = threading.Thread(target=self._read, name="sowd-output", daemon=True)
        self._reader.start()

    def _take(self, line: str) -> None:
        if self._echo is not None:
            self._echo(line)
        with self._changed:
            self._lines.append(line)
            if not self.banner and BANNER in line:
                self.banner = line.strip()
                self.target = line.split(BANNER)[1].split()[0]
            self._changed.notify_all()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._take(line)
        with self._changed:
            self._ended = True
            self._changed.notify_all()

    def wait_serving(self, timeout: float = START_TIMEOUT_S) -> None:
        """Wait for the banner.

        Raises:
            NotStarted: sowd ended before it, or did not print it within ``timeout`` (then it is
                killed: a server nobody can reach must not outlive the caller).
        """
        with self._changed:
            self._changed.wait_for(lambda: bool(self.banner) or self._ended, timeout)
        if not self.banner:
            if not self._ended:
                self.proc.kill()
            status = self.proc.wait(timeout=30)
            self._reader.join(timeout=30)
            raise NotStarted(status, self.output)

    def wait_line(self, text: str, timeout: float = START_TIMEOUT_S) -> str:
        """The first line that holds ``text``, once printed (e.g. ``starting on``, printed while
        it loads its state); "" when sowd ended, or ``timeout`` passed, first."""

        def found() -> str:
            return next((line for line in self._lines if text in line), "")

        with self._changed:
            self._changed.wait_for(lambda: bool(found()) or self._ended, timeout)
            return found()

    @property
    def output(self) -> str:
        """Everything it printed so far."""
        with self._changed:
            return "".join(self._lines)

    @property
    def lines(self) -> list[str]:
        """What it printed so far, line by line."""
        with self._changed:
            return list(self._lines)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> tuple[int, str]:
        """Send ``sig`` (if it still runs) and wait for the end; the exit status and all the output."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        status = self.proc.wait(timeout=timeout)
        self._reader.join(timeout=timeout)
        return status, self.output

    def kill(self) -> int:
        """``kill -9`` (a crash, as the crash soak makes); the exit status."""
        return self.stop(signal.SIGKILL)[0]

    def __enter__(self) -> Sowd:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def command(*args: str) -> list[str]:
    """The command line of ``sowd ARGS`` with this interpreter (a virtual environment's ``sowd``
    script need not be on ``PATH``)."""
    return [sys.executable, "-m", "sowdb.main", *args]


def spawn(
    data_dir: str | Path,
    *args: str,
    config: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    echo: Callable[[str], None] | None = None,
) -> Sowd:
    """Start ``sowd`` on ``data_dir`` and a free port, without waiting for it to serve.

    Args:
        data_dir: its RocksDB directory (made if missing).
        *args: more flags (``--log-level``, ``--http-listen``, ...; a ``--config`` here works too).
        config: a TOML config file; without one (and no ``--config`` in ``args``), the built-in
            demo config.
        env: its whole environment (default: this process's), as ``subprocess`` takes it, so a
            caller can also leave a variable out.
        echo: called with each line it prints, as it comes.

    One process (``--workers 1``) unless ``args`` or the config name the workers: a test that
    kills its server kills the process that serves, and ``sowd --workers N`` groups are started
    by the tests about them (sowd's own default is the cores available). A build without the
    flag (a benchmark's older baseline) is one process anyway.
    """
    flags = ["--data-dir", str(data_dir), "--listen", "127.0.0.1:0"]
    if config is not None:
        flags += ["--config", str(config)]
    named = any(a == "--workers" or a.startswith("--workers=") for a in args) or _names_workers(config, args)
    if not named and takes_workers(env):
        flags += ["--workers", "1"]
    proc = subprocess.Popen(
        command(*flags, *args),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**(os.environ if env is None else env), "PYTHONUNBUFFERED": "1"},
    )
    return Sowd(proc, echo=echo)


def takes_workers(env: Mapping[str, str] | None) -> bool:
    """Whether the sowd ``env`` runs has ``--workers``: a benchmark's baseline (another checkout's
    ``server/`` on ``PYTHONPATH``) from before it was built has one process and no such flag."""
    for entry in (os.environ if env is None else env).get("PYTHONPATH", "").split(os.pathsep):
        main = Path(entry) / "sowdb" / "main.py"
        if entry and main.is_file():
            return '"--workers"' in main.read_text(encoding="utf-8")
    return True


def _names_workers(config: str | Path | None, args: Sequence[str]) -> bool:
    """Whether the config file (``config`` or a ``--config`` in ``args``) sets ``[server] workers``."""
    files = [config] if config is not None else [args[i + 1] for i, a in enumerate(args[:-1]) if a == "--config"]
    for file in files:
        try:
            table = tomllib.loads(Path(file).read_text(encoding="utf-8")).get("server", {})
        except (OSError, tomllib.TOMLDecodeError):
            continue  # sowd itself says what is wrong with it
        if isinstance(table, dict) and "workers" in table:
            return True
    return False


def start(
    data_dir: str | Path,
    *args: str,
    config: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = START_TIMEOUT_S,
) -> Sowd:
    """:func:`spawn`, then wait until it serves (its :attr:`Sowd.target` is set).

    Raises:
        NotStarted: it refused to start (a bad config, a locked data directory, ...).
    """
    sowd = spawn(data_dir, *args, config=config, env=env)
    sowd.wait_serving(timeout)
    return sowd


def run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run ``sowd ARGS`` to its end (a subcommand such as ``verify``, or a start that is refused);
    its output is captured."""
    return subprocess.run(command(*args), capture_output=True, text=True, timeout=timeout)


def serve(argv: Sequence[str]) -> int:
    """``python -m sowdb.testing``: see the module; sowd's exit status."""
    parser = argparse.ArgumentParser(prog="python -m sowdb.testing", description="Start a throw-away sowd.")
    parser.add_argument("--data-dir", required=True)
    known, flags = parser.parse_known_args(argv)
    sowd = spawn(known.data_dir, *flags, echo=lambda line: print(line, end="", flush=True))
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())

    def until_stdin_closes() -> None:
        sys.stdin.read()
        done.set()

    threading.Thread(target=until_stdin_closes, name="stdin", daemon=True).start()
    while not done.wait(0.2) and sowd.proc.poll() is None:
        pass
    status = sowd.stop()[0]
    return status if status >= 0 else 128 - status
