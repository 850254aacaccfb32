"""A real etcd for tests, soaks and benchmarks (Debian's ``etcd-server``, which ``make setup``
installs): one member on 127.0.0.1 with free client and peer ports and its data in a directory,
started healthy; a test may pause it (SIGSTOP) to see what a cluster does without etcd. The one
etcd launcher: the cluster's tests, the failover soak and ``make bench-replication`` use it.

Secured (the default of :func:`start_etcd`, issue 40) it is etcd as docs/cluster.md sets it up:
TLS with a CA of its own (``DIR/etcd-pki``, made by :class:`~sowdb.testing.pki.Certs`), client
certificates required (``--client-cert-auth``), and etcd's authentication on: a ``root`` user,
and a ``sowdb`` user whose role may read and write only the cluster's keys (``/sowdb/t/``), whom
the nodes are through their client certificate (its common name). A party without such a
certificate cannot even connect; one with a certificate of another user (``client``, which
the CA signed, no role) is refused every key.
"""

from __future__ import annotations

import json
import shutil
import signal
import socket
import ssl
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from sowdb.cluster.dcs import Etcd
from sowdb.config import EtcdAccess
from sowdb.testing.pki import Certs

ETCD = shutil.which("etcd") or "/usr/bin/etcd"
ETCDCTL = shutil.which("etcdctl") or "/usr/bin/etcdctl"
CLUSTER = "t"
"""The cluster name whose keys (``/sowdb/t/``) the ``sowdb`` role may read and write."""


@dataclass
class EtcdServer:
    """A running etcd: its client URL, the credentials a node shows it, and its process to
    pause or stop."""

    process: subprocess.Popen[bytes]
    port: int
    log: IO[bytes] | None = None
    access: EtcdAccess = field(default_factory=EtcdAccess)
    """What a node of the cluster shows this etcd (none: plain ``http://``, no auth)."""
    pki: Certs | None = None
    """Secured: etcd's CA, its certificate, and the client certificates (``root.pem``,
    ``sowdb.pem``, ``client.pem`` of no etcd user, ``rogue.pem`` signed by no one etcd trusts)."""

    @property
    def url(self) -> str:
        return f"{'https' if self.access.tls else 'http'}://127.0.0.1:{self.port}"

    @property
    def secured(self) -> bool:
        return self.access.tls

    def table(self) -> dict[str, str | list[str]]:
        """The settings of ``[cluster]`` that reach this etcd: ``etcd`` and, secured, its CA and
        the ``sowdb`` user's client certificate."""
        a = self.access
        found = (("etcd_ca", a.ca), ("etcd_cert", a.cert), ("etcd_key", a.key))
        return {"etcd": [self.url], **{k: v for k, v in found if v}}

    def settings(self) -> str:
        """:meth:`table` as the lines of a config file."""
        return "".join(f"{k} = {json.dumps(v)}\n" for k, v in self.table().items())

    def client(self, timeout: float = 5.0, url: str = "", access: EtcdAccess | None = None) -> Etcd:
        """An :class:`~sowdb.cluster.dcs.Etcd` on this etcd (or on ``url``, a proxy before it)
        as a node of the cluster reaches it (or with ``access``)."""
        return Etcd([url or self.url], timeout, access or self.access)

    def etcdctl(
        self, *args: str, cert: str = "root", url: str = "", timeout: float = 30
    ) -> subprocess.CompletedProcess[str]:
        """``etcdctl ARGS`` against this etcd (or ``url``) with the client certificate ``cert``
        of :attr:`pki` (``root``: etcd's administrator; ``""``: none), its output and status."""
        tls = []
        if self.pki is not None:
            tls = [f"--cacert={self.pki['ca.pem']}"]
            if cert:
                tls += [f"--cert={self.pki[cert + '.pem']}", f"--key={self.pki[cert + '.key']}"]
        endpoint = f"--endpoints={url or self.url}"
        command = [ETCDCTL, endpoint, "--dial-timeout=3s", "--command-timeout=5s", *tls, *args]
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)

    def pause(self) -> None:
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.process.send_signal(signal.SIGCONT)

    def healthy(self) -> bool:
        context = None
        if self.pki is not None:
            context = ssl.create_default_context(cafile=self.pki["ca.pem"])
            context.load_cert_chain(self.pki["root.pem"], self.pki["root.key"])
        try:
            with urllib.request.urlopen(f"{self.url}/health", timeout=1, context=context) as reply:
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


def start_etcd(directory: Path, within: float = 30.0, *, secured: bool = True) -> EtcdServer:
    """One etcd member on 127.0.0.1 (free client and peer ports, data and log in ``directory``),
    once healthy; ``secured``: with TLS, client certificates and authentication (the module's
    docstring), else plain ``http://`` with no authentication.

    Raises:
        RuntimeError: etcd is not installed, ended, was not healthy within ``within`` s, or
            refused its own set-up.
    """
    if not Path(ETCD).exists():
        raise RuntimeError("etcd is not installed: run `make setup` (it installs Debian's etcd-server)")
    directory.mkdir(parents=True, exist_ok=True)
    client, peer = free_ports(2)
    scheme, tls, pki = "http", [], None
    if secured:
        pki = Certs(directory / "etcd-pki")
        for user in ("root", "sowdb"):
            pki.client(user)
        scheme = "https"
        tls = [
            f"--cert-file={pki['server.pem']}",
            f"--key-file={pki['server.key']}",
            f"--trusted-ca-file={pki['ca.pem']}",
            "--client-cert-auth",
        ]
    log = (directory / "etcd.log").open("wb")
    process = subprocess.Popen(
        [
            ETCD,
            "--name=t",
            f"--data-dir={directory / 'etcd'}",
            f"--listen-client-urls={scheme}://127.0.0.1:{client}",
            f"--advertise-client-urls={scheme}://127.0.0.1:{client}",
            f"--listen-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-cluster=t=http://127.0.0.1:{peer}",
            *tls,
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    server = EtcdServer(process, client, log, pki=pki)
    if pki is not None:
        server.access = EtcdAccess(ca=pki["ca.pem"], cert=pki["sowdb.pem"], key=pki["sowdb.key"])
    give_up = time.monotonic() + within
    while not server.healthy():
        if process.poll() is not None or time.monotonic() > give_up:
            server.stop()
            raise RuntimeError(f"etcd did not start: {(directory / 'etcd.log').read_text()[-2000:]}")
        time.sleep(0.05)
    if secured:
        _enable_auth(server)
    return server


def _enable_auth(server: EtcdServer) -> None:
    """docs/cluster.md's set-up: ``root``; a ``sowdb`` role that may read and write the
    cluster's keys only, and a ``sowdb`` user of that role (both users prove who they are by
    their client certificate, so they have no password); then authentication on."""
    steps = [
        ("user", "add", "root", "--no-password"),
        ("user", "grant-role", "root", "root"),
        ("role", "add", "sowdb"),
        ("role", "grant-permission", "sowdb", "--prefix=true", "readwrite", f"/sowdb/{CLUSTER}/"),
        ("user", "add", "sowdb", "--no-password"),
        ("user", "grant-role", "sowdb", "sowdb"),
        ("auth", "enable"),
    ]
    for step in steps:
        done = server.etcdctl(*step)
        if done.returncode != 0:
            server.stop()
            raise RuntimeError(f"etcdctl {' '.join(step)}: {done.stderr.strip()}")


def main(argv: list[str]) -> int:
    """``python -m sowdb.testing.etcd --dir D``: etcd for another language's tests (the Node,
    Go and Java SDKs' cluster tests), so that every test of the project starts etcd one way.
    Prints ``etcd listening on URL`` once healthy; ``pause`` and ``resume`` lines on stdin
    SIGSTOP and SIGCONT it (each answered ``ok``); stops etcd (SIGCONT, SIGTERM) when stdin
    closes or on SIGTERM, so a parent that dies leaves no etcd behind.

    Plain ``http://`` by default (what those tests' configs name); with ``--secured`` etcd as
    docs/cluster.md sets it up (TLS, client certificates, authentication), the ``[cluster]``
    lines that reach it (:meth:`EtcdServer.settings`) written to ``D/cluster-etcd.toml``."""
    import argparse
    import sys
    import threading

    parser = argparse.ArgumentParser(prog="python -m sowdb.testing.etcd", description=main.__doc__)
    parser.add_argument("--dir", required=True, help="etcd's data and log go there")
    parser.add_argument("--secured", action="store_true", help="TLS, client certificates and etcd auth")
    args = parser.parse_args(argv)
    try:
        server = start_etcd(Path(args.dir), secured=args.secured)
    except RuntimeError as exc:
        print(exc, file=sys.stderr, flush=True)
        return 1
    if args.secured:
        (Path(args.dir) / "cluster-etcd.toml").write_text(server.settings())
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
