"""``sowd --workers N``: the supervisor of one writer and N - 1 readers on one port.

The supervisor takes the port first (a port in use is refused before anything starts) and holds
it, bound with ``SO_REUSEPORT`` and not listening, while its processes bind it too; the kernel
then spreads the clients' connections over them. It starts the writer, waits until it serves,
starts the readers, and prints ``sowd listening on HOST:PORT`` once every process serves.

It keeps the group whole: a reader that dies is started again (its clients reconnect to any
process of the port); when the writer dies, the readers end their subscriptions UNAVAILABLE
(their feed ended) and the whole group is started again. SIGTERM or SIGINT stops them all
together; SIGHUP goes to the writer, which reloads the rights and tells the readers through
its feed. Their output and errors are passed on (to the supervisor's standard output and error), each
line prefixed with the process it came from.
"""

from __future__ import annotations

import ctypes
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from sowdb.config import Config, parse_listen

log = logging.getLogger("sowdb.workers")

READY = {"writer": "sowd listening on ", "reader": "sowd reader "}
"""What each kind of process prints once it serves."""

WORKER_ENV = "SOWD_WORKER"
"""The environment variable that names a process of the group to itself (``writer``, ``reader-1``:
its name in the output's prefixes and in the metrics' ``process`` label)."""

POLL_S = 0.2
STOP_S = 15.0


def _die_with_the_supervisor() -> None:
    """In a child, before it runs: SIGTERM when the supervisor dies (``kill -9`` included), so a
    group never outlives it holding the port and the data directory (Linux ``PR_SET_PDEATHSIG``)."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


PR_SET_PDEATHSIG = 1


class _Child:
    """One process of the group and its output, passed on line by line."""

    def __init__(self, role: str, command: Sequence[str]) -> None:
        self.role = role
        self.ready = threading.Event()  # its banner came, or it ended
        self.serving = False  # its banner came
        self.banner = ""  # the line it came in
        self.complained = False  # it wrote to its standard error
        self.proc = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
            env={**os.environ, WORKER_ENV: role},
            preexec_fn=_die_with_the_supervisor,  # one system call, no lock: safe beside the pump threads
        )
        threading.Thread(target=self._pump, name=f"sowd-{role}-output", daemon=True).start()
        threading.Thread(target=self._pump_errors, name=f"sowd-{role}-errors", daemon=True).start()

    def _pump_errors(self) -> None:
        """Its standard error onto the supervisor's, prefixed, except the writer's until it
        serves: the writer runs alone then, and its refusal to start (a locked data directory,
        a damaged store) reads as a single process's would, one line."""
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.complained = True
            alone = self.role == "writer" and not self.serving
            sys.stderr.write(line if alone else f"[{self.role} {self.proc.pid}] {line}")
            sys.stderr.flush()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        banner = READY[self.role.split("-")[0]]
        for line in self.proc.stdout:
            if banner in line:
                self.serving, self.banner = True, line.strip()
                self.ready.set()
                line = line.replace("listening on ", "serving ")  # the group's banner is the supervisor's
            sys.stdout.write(f"[{self.role} {self.proc.pid}] {line}")
            sys.stdout.flush()
        self.ready.set()  # ended: nobody waits for it any longer

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)


def _reserve(host: str, port: int) -> socket.socket:
    """The port, bound with ``SO_REUSEPORT`` (not listening) for as long as the group serves.

    Raises:
        OSError: the port is in use (by anything bound without ``SO_REUSEPORT`` too).
    """
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    address = (host.strip("[]") or "0.0.0.0", port)
    if port:
        with socket.socket(family, socket.SOCK_STREAM) as probe:  # refused if anything holds it
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(address)
            except OSError as exc:
                raise OSError(f"cannot listen on {host}:{port}: the address is already in use") from exc
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind(address)
    return sock


def supervise(config: Config, argv: Sequence[str]) -> int:
    """Run the group of ``config.server.processes`` processes until SIGTERM or SIGINT.

    ``argv``: the command line the group's processes are started with (the supervisor's own,
    without ``--workers``); each gets the port taken and the group's socket.
    """
    host, port = parse_listen(config.server.listen)
    try:
        held = _reserve(host, port)
    except OSError as exc:
        print(f"sowd: {exc}", file=sys.stderr)
        return 1
    port = held.getsockname()[1]
    run_dir = Path(tempfile.mkdtemp(prefix="sowdb-workers-"))  # 0700: only this user reaches the socket
    base = [
        sys.executable,
        "-m",
        "sowdb.main",
        *argv,
        "--listen",
        f"{host}:{port}",
        "--worker-socket",
        str(run_dir / "writer.sock"),
    ]
    stopping = threading.Event()
    group: dict[str, _Child] = {}

    def on_signal(sig: int, _frame: object) -> None:
        if sig == signal.SIGHUP:
            if "writer" in group:
                group["writer"].stop(signal.SIGHUP)
            return
        stopping.set()

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)
    status = 0
    served = False
    try:
        while not stopping.is_set():
            failed = _start_group(group, base, config.server.processes, stopping)
            if failed is not None:
                status = failed
                break
            served = True
            readers = ", ".join(str(c.proc.pid) for r, c in group.items() if r != "writer")
            addresses = group["writer"].banner.partition(f"config {config.source})")[2]  # "; console URL"...
            writer = group["writer"].proc.pid
            print(
                f"sowd listening on {host}:{port} ({config.server.processes} workers: writer {writer}, "
                f"readers {readers}; data {config.server.data_dir}, config {config.source}){addresses}",
                flush=True,
            )
            status = _watch(group, base, stopping)
    finally:
        _stop_all(group)
        held.close()
        shutil.rmtree(run_dir, ignore_errors=True)
    if served:  # a group that never served ends as a single process refused at start: its error alone
        print("sowd stopped", flush=True)
    return status


def _start_group(group: dict[str, _Child], base: list[str], workers: int, stopping: threading.Event) -> int | None:
    """Start the writer, then the readers once it serves; None once all serve, else the exit
    status the supervisor ends with (the writer's, when it ended instead of serving: a port or
    a data directory it could not take, a bad store; 0 when asked to stop meanwhile)."""
    writer = group["writer"] = _Child("writer", [*base, "--worker-role", "writer"])
    while not writer.ready.wait(POLL_S):
        if stopping.is_set():
            return 0
    if not writer.serving:
        status = writer.proc.wait()
        if not writer.complained:  # it said nothing of why (a signal): say that much
            print(f"sowd: the writer ended before it served (exit status {status})", file=sys.stderr, flush=True)
        stopping.set()
        return status or 1
    for i in range(1, workers):
        group[f"reader-{i}"] = _Child(f"reader-{i}", [*base, "--worker-role", "reader"])
    for child in list(group.values()):
        while not child.ready.wait(POLL_S):
            if stopping.is_set():
                return 0
    return None


def _watch(group: dict[str, _Child], base: list[str], stopping: threading.Event) -> int:
    """Keep the group whole until asked to stop; returns the writer's last exit status."""
    while not stopping.wait(POLL_S):
        writer = group["writer"]
        if writer.proc.poll() is not None:
            print(f"sowd: the writer ended (exit status {writer.proc.returncode}); restarting the group", flush=True)
            _stop_all(group)
            return writer.proc.returncode or 0
        for role, child in list(group.items()):
            if role != "writer" and child.proc.poll() is not None:
                status = child.proc.returncode
                print(
                    f"sowd: {role} (pid {child.proc.pid}) ended (exit status {status}); starting it again", flush=True
                )
                group[role] = _Child(role, [*base, "--worker-role", "reader"])
    return 0


def _stop_all(group: dict[str, _Child]) -> None:
    """Readers first (their subscriptions end with the group), then the writer; killed after
    :data:`STOP_S`."""
    for role in sorted(group, key=lambda r: r == "writer"):
        group[role].stop()
    deadline = time.monotonic() + STOP_S
    for child in group.values():
        try:
            child.proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.proc.kill()
            child.proc.wait()
    group.clear()
