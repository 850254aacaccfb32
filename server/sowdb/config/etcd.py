"""How a node reaches etcd (issue 40): the ``etcd`` endpoints of ``[cluster]`` and the
credentials that go with them, Patroni's ``etcd3`` section under sowdb's names.

Whoever can write the cluster's keys in etcd decides who the primary is, so etcd is as much a
part of the cluster's security as the nodes themselves. Two ways to prove who a node is, which
may be combined:

- ``etcd_cert`` + ``etcd_key``: a client certificate (etcd started with ``--client-cert-auth``
  takes its common name as the etcd user);
- ``etcd_user`` + ``etcd_password_file``: an etcd user and the file its password is in (never
  the password itself in the config, which is printed and copied around).

Both need ``https://`` endpoints and ``etcd_ca``, the CA that signed etcd's own certificate:
a password or a certificate sent to an etcd nobody checked would be handed to whoever answers.
A plain ``http://`` etcd is still accepted, for a laptop; the node warns about it at start-up.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from sowdb.config.model import ConfigError

ETCD_KEYS = frozenset({"etcd_ca", "etcd_cert", "etcd_key", "etcd_user", "etcd_password_file"})
"""The ``[cluster]`` settings this module reads."""

Fail = Callable[[str, str], ConfigError]


@dataclass(frozen=True)
class EtcdAccess:
    """The credentials a node shows etcd (all empty: plain ``http://``, nothing shown)."""

    ca: str = ""
    """The CA that signed etcd's server certificate (PEM; set exactly when the endpoints are
    ``https://``)."""
    cert: str = ""
    """The node's client certificate (PEM), with :attr:`key`."""
    key: str = ""
    user: str = ""
    """The etcd user to authenticate as, with :attr:`password_file`."""
    password_file: str = ""

    @property
    def tls(self) -> bool:
        return bool(self.ca)

    @property
    def authenticated(self) -> bool:
        """Whether the node proves who it is to etcd (a client certificate or a user)."""
        return bool(self.cert or self.user)

    def password(self) -> str:
        """The password, read from its file now (so that a rotated password is picked up at the
        next connection), without the line's end."""
        return Path(self.password_file).read_text(encoding="utf-8").rstrip("\r\n")


def read_etcd(t: dict[str, Any], fail: Fail, base: Path | None) -> tuple[tuple[str, ...], EtcdAccess]:
    """``etcd`` and its credentials from the ``[cluster]`` table ``t``.

    Raises:
        ConfigError: a bad URL, a scheme mixed with another, a credential without the rest of
            it or without TLS, a file that is not there.
    """
    entry = "[cluster]"
    etcd = t.get("etcd", ["http://127.0.0.1:2379"])
    if isinstance(etcd, str):
        etcd = [etcd]
    if not isinstance(etcd, list) or not etcd or not all(isinstance(e, str) and _scheme(e) for e in etcd):
        raise fail(
            entry,
            f"etcd: expected a non-empty list of URLs such as ['https://127.0.0.1:2379'] (or http://), got {etcd!r}",
        )
    schemes = {_scheme(e) for e in etcd}
    if len(schemes) > 1:
        raise fail(entry, f"etcd: every endpoint https:// or every one http://, not a mix: {etcd!r}")
    tls = schemes == {"https"}
    values: dict[str, str] = {}
    for key in sorted(ETCD_KEYS):
        value = t.get(key, "")
        if not isinstance(value, str):
            raise fail(entry, f"{key}: expected a string, got {value!r}")
        values[key] = value
    user = values["etcd_user"]
    files = {k: v for k, v in values.items() if k != "etcd_user" and v}
    if tls and not values["etcd_ca"]:
        raise fail(entry, "etcd_ca: required with https:// endpoints (the CA that signed etcd's certificate)")
    if not tls and (files or user):
        named = ", ".join(sorted([*files, *(["etcd_user"] if user else [])]))
        raise fail(entry, f"{named}: need https:// etcd endpoints (over http:// they would cross the network in clear)")
    if bool(values["etcd_cert"]) != bool(values["etcd_key"]):
        raise fail(entry, "etcd_cert and etcd_key: one without the other (a client certificate needs its key)")
    if bool(user) != bool(values["etcd_password_file"]):
        raise fail(entry, "etcd_user and etcd_password_file: one without the other (a user needs its password)")
    for key, value in files.items():
        path = ((base or Path.cwd()) / value).resolve()
        if not path.is_file():
            raise fail(entry, f"{key}: {path} does not exist")
        values[key] = str(path)
    access = EtcdAccess(values["etcd_ca"], values["etcd_cert"], values["etcd_key"], user, values["etcd_password_file"])
    if access.password_file and not access.password():
        raise fail(entry, f"etcd_password_file: {access.password_file} is empty")
    return tuple(etcd), access


def _scheme(text: str) -> str:
    """``http`` or ``https`` for a well-formed ``SCHEME://HOST:PORT``, else empty."""
    try:
        url = urlsplit(text)
        ok = url.scheme in ("http", "https") and bool(url.hostname) and url.port is not None
        return url.scheme if ok and url.path in ("", "/") else ""
    except ValueError:
        return ""
