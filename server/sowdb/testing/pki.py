"""A throw-away PKI for tests and soaks of TLS (``openssl``, EC keys: a few tens of ms)."""

from __future__ import annotations

import subprocess
from pathlib import Path


class Certs:
    """A throw-away PKI made with ``openssl``: a CA, a server certificate for ``localhost`` and
    127.0.0.1, a client certificate it signed, and a ``rogue`` client certificate it did not."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        directory.mkdir(parents=True, exist_ok=True)
        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        self._openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=test-ca")
        self._openssl("req", "-x509", *ec, "-keyout", "rogue.key", "-out", "rogue.pem", "-days", "2", "-subj", "/CN=x")
        (directory / "san.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
        for name, extra in (("server", ["-extfile", "san.ext"]), ("client", [])):
            self._openssl("req", *ec, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}")
            self._openssl(
                "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                "-out", f"{name}.pem", "-days", "2", *extra,
            )  # fmt: skip

    def client(self, name: str) -> tuple[str, str]:
        """A client certificate for common name ``name`` that the CA signed (an etcd user, with
        etcd's ``--client-cert-auth``): the paths of ``name.pem`` and ``name.key``."""
        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        self._openssl("req", *ec, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}")
        self._openssl(
            "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", f"{name}.pem", "-days", "2",
        )  # fmt: skip
        return self[f"{name}.pem"], self[f"{name}.key"]

    def _openssl(self, *args: str) -> None:
        subprocess.run(["openssl", *args], cwd=self.dir, check=True, capture_output=True, timeout=60)

    def __getitem__(self, name: str) -> str:
        """The path of ``ca.pem``, ``server.key``, ``rogue.pem``, ..."""
        return str(self.dir / name)
