"""A real etcd for tests, soaks and benchmarks (Debian's ``etcd-server``, which ``make setup``
installs): one member on 127.0.0.1 with free client and peer ports and its data in a directory,
started healthy; a test may pause it (SIGSTOP) to see what a cluster does without etcd. The one
etcd launcher: the cluster's tests, the failover soak and ``make bench-replication`` use it."""

from __future__ import annotations

import json
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import IO

ETCD = shutil.which("etcd") or "/usr/bin/etcd"


@dataclass
class EtcdServer:
    """A running etcd: its client URL, and its process to pause or stop."""

    process: subprocess.Popen[bytes]
    port: int
    log: IO[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def pause(self) -> None:
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.process.send_signal(signal.SIGCONT)

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/health", timeout=1) as reply:
                return bool(json.load(reply).get("health") == "true")
        except OSError:
            return False

    def stop(self) -> None:
        """SIGCONT first (should it be paused), then SIGTERM, then SIGKILL after 10 s."""
        self.resume()
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.log is not None:
            self.log.close()


def free_ports(n: int) -> list[int]:
    """``n`` ports that were free a moment ago (bound to port 0, then closed)."""
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [int(s.getsockname()[1]) for s in sockets]
    for s in sockets:
        s.close()
    return ports


def start_etcd(directory: Path, within: float = 30.0) -> EtcdServer:
    """One etcd member on 127.0.0.1 (free client and peer ports, data and log in ``directory``),
    once healthy.

    Raises:
        RuntimeError: etcd is not installed, ended, or was not healthy within ``within`` s.
    """
    if not Path(ETCD).exists():
        raise RuntimeError("etcd is not installed: run `make setup` (it installs Debian's etcd-server)")
    directory.mkdir(parents=True, exist_ok=True)
    client, peer = free_ports(2)
    log = (directory / "etcd.log").open("wb")
    process = subprocess.Popen(
        [
            ETCD,
            "--name=t",
            f"--data-dir={directory / 'etcd'}",
            f"--listen-client-urls=http://127.0.0.1:{client}",
            f"--advertise-client-urls=http://127.0.0.1:{client}",
            f"--listen-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-cluster=t=http://127.0.0.1:{peer}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    server = EtcdServer(process, client, log)
    give_up = time.monotonic() + within
    while not server.healthy():
        if process.poll() is not None or time.monotonic() > give_up:
            server.stop()
            raise RuntimeError(f"etcd did not start: {(directory / 'etcd.log').read_text()[-2000:]}")
        time.sleep(0.05)
    return server


def main(argv: list[str]) -> int:
    """``python -m sowdb.testing.etcd --dir D``: etcd for another language's tests (the Node,
    Go and Java SDKs' cluster tests), so that every test of the project starts etcd one way.
    Prints ``etcd listening on URL`` once healthy; ``pause`` and ``resume`` lines on stdin
    SIGSTOP and SIGCONT it (each answered ``ok``); stops etcd (SIGCONT, SIGTERM) when stdin
    closes or on SIGTERM, so a parent that dies leaves no etcd behind."""
    import argparse
    import sys
    import threading

    parser = argparse.ArgumentParser(prog="python -m sowdb.testing.etcd", description=main.__doc__)
    parser.add_argument("--dir", required=True, help="etcd's data and log go there")
    args = parser.parse_args(argv)
    try:
        server = start_etcd(Path(args.dir))
    except RuntimeError as exc:
        print(exc, file=sys.stderr, flush=True)
        return 1
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())

    def commands() -> None:
        for line in sys.stdin:
            if line.strip() in ("pause", "resume"):
                server.pause() if line.strip() == "pause" else server.resume()
                print("ok", flush=True)
        done.set()

    print(f"etcd listening on {server.url}", flush=True)
    threading.Thread(target=commands, name="stdin", daemon=True).start()
    while not done.wait(0.2) and server.process.poll() is None:
        pass
    server.stop()
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
