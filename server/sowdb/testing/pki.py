"""A throw-away PKI for tests and soaks of TLS (``openssl``, EC keys: a few tens of ms)."""

from __future__ import annotations

import subprocess
from pathlib import Path


class Certs:
    """A throw-away PKI made with ``openssl``: a CA, a server certificate for ``localhost`` and
    127.0.0.1, a client certificate it signed, and a ``rogue`` client certificate it did not;
    node certificates (:meth:`node`) on demand."""

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

    def node(self, name: str, *, ca: str = "ca") -> tuple[str, str]:
        """A node certificate for node ``name`` (its DNS subjectAltName, and its CN), signed by
        ``ca`` (``ca``, the cluster's; or ``rogue``, a stranger's): (``NAME.pem``, ``NAME.key``)
        paths, made once."""
        pem, key = self.dir / f"{name}.pem", self.dir / f"{name}.key"
        if not pem.exists():
            ext = self.dir / f"{name}.ext"
            ext.write_text(f"subjectAltName=DNS:{name}\nextendedKeyUsage=serverAuth,clientAuth\n")
            ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
            self._openssl("req", *ec, "-keyout", key.name, "-out", f"{name}.csr", "-subj", f"/CN={name}")
            self._openssl(
                "x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key", "-CAcreateserial",
                "-out", pem.name, "-days", "2", "-extfile", ext.name,
            )  # fmt: skip
        return str(pem), str(key)

    def _openssl(self, *args: str) -> None:
        subprocess.run(["openssl", *args], cwd=self.dir, check=True, capture_output=True, timeout=60)

    def __getitem__(self, name: str) -> str:
        """The path of ``ca.pem``, ``server.key``, ``rogue.pem``, ..."""
        return str(self.dir / name)
