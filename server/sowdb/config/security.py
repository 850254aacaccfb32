"""The security part of the config (SPEC §11): ``[security]``, ``[[role]]`` and the users file.

Off by default (no ``[security]``): every call has every right, as the local demo wants. With a
``users_file``, every call must carry the token of a user (``authorization: Bearer TOKEN``),
unless ``anonymous`` names the user whose rights an anonymous call gets. ``tls_cert`` and
``tls_key`` turn TLS on; ``client_ca`` also asks clients for a certificate signed by it.

Everything is checked when the config is read — files that do not exist, a role a user names
that is not defined, a regex or a filter that does not compile — so that a server never starts
with half its rights ignored; the message names the file, the entry and the problem.
"""

from __future__ import annotations

import re
import string
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sowdb.config.model import ConfigError, is_regex_topic
from sowdb.errors import ExpressionError
from sowdb.expr import compile_filter

QUOTAS: dict[str, int] = {
    "max_subscriptions": 256,
    "max_snapshots": 16,
    "max_staged_bytes": 256 * 1024**2,
}
"""What one user may hold at once, unless a role of its says otherwise (issue 26): live
subscriptions (each costs every publish its evaluation), Spark snapshots (of the server's 256)
and bytes of staged writes (of the server's 2 GiB) -- so that one user cannot take what the
others need. An admin role has no quota unless it sets one."""


@dataclass(frozen=True)
class RoleConfig:
    """A named set of rights (``[[role]]``): topic names or regexes to read and to write, a row
    entitlement ANDed into every read, whether it administers the server, and the quotas
    (:data:`QUOTAS`) it sets (name -> limit; a user gets the largest of its roles')."""

    name: str
    read: tuple[str, ...] = ()
    write: tuple[str, ...] = ()
    filter: str = ""
    admin: bool = False
    quotas: tuple[tuple[str, int], ...] = ()

    def quota(self, name: str) -> int | None:
        """This role's limit of ``name``: set, or the default (None, no limit, for an admin role)."""
        return dict(self.quotas).get(name, None if self.admin else QUOTAS[name])


@dataclass(frozen=True)
class UserConfig:
    """A user of the users file: the SHA-256 of its token (never the token) and its roles."""

    name: str
    token_sha256: str
    roles: tuple[str, ...]


@dataclass(frozen=True)
class SecurityConfig:
    """``[security]`` with the roles and the users it names."""

    tls_cert: str = ""
    tls_key: str = ""
    client_ca: str = ""
    users_file: str = ""
    anonymous: str = "none"
    metrics_user: str = ""  # "" : /metrics asks for no token; else this user's token (issue 26)
    roles: tuple[RoleConfig, ...] = ()
    users: tuple[UserConfig, ...] = ()

    @property
    def authenticates(self) -> bool:
        """Calls must carry a user's token (or get the anonymous user's rights)."""
        return bool(self.users_file)


Fail = Callable[[str, str], ConfigError]


def read_security(raw: dict[str, Any], base: Path, fail: Fail) -> SecurityConfig | None:
    """The ``[security]`` table and ``[[role]]`` tables of a config file (paths relative to the
    file's directory ``base``); None when there is no ``[security]``."""
    roles = tuple(_role(i, t, fail) for i, t in enumerate(_tables(raw, "role", fail), 1))
    if "security" not in raw:
        if roles:
            raise fail("[[role]]", "roles need a [security] table with a users_file to take effect")
        return None
    t = raw["security"]
    entry = "[security]"
    if not isinstance(t, dict):
        raise fail(entry, "expected a table")
    allowed = {"tls_cert", "tls_key", "client_ca", "users_file", "anonymous", "metrics_user"}
    unknown = sorted(set(t) - allowed)
    if unknown:
        raise fail(entry, f"unknown setting {unknown[0]!r} (allowed: {', '.join(sorted(allowed))})")
    files = {key: _file(t, key, base, fail) for key in ("tls_cert", "tls_key", "client_ca", "users_file")}
    if bool(files["tls_cert"]) != bool(files["tls_key"]):
        raise fail(entry, "tls_cert and tls_key go together (the certificate and its private key)")
    if files["client_ca"] and not files["tls_cert"]:
        raise fail(entry, "client_ca asks clients for certificates, which needs TLS: give tls_cert and tls_key")
    names = [r.name for r in roles]
    for i, name in enumerate(names):
        if name in names[:i]:
            raise fail(f'[[role]] #{i + 1} "{name}"', "name: another role has it")
    users = read_users(files["users_file"], set(names)) if files["users_file"] else ()
    anonymous = t.get("anonymous", "none")
    if not isinstance(anonymous, str) or (anonymous != "none" and anonymous not in {u.name for u in users}):
        raise fail(entry, f"anonymous: {anonymous!r} is neither 'none' nor a user of the users file")
    metrics_user = t.get("metrics_user", "")
    if not isinstance(metrics_user, str) or (metrics_user and metrics_user not in {u.name for u in users}):
        raise fail(entry, f"metrics_user: {metrics_user!r} is not a user of the users file")
    return SecurityConfig(roles=roles, users=users, anonymous=anonymous, metrics_user=metrics_user, **files)


def read_users(path: str, roles: set[str]) -> tuple[UserConfig, ...]:
    """The users file: ``[[user]] name, token_sha256, roles = [...]``.

    Raises:
        ConfigError: unreadable, bad TOML, or an invalid user (naming the file and the user).
    """
    try:
        raw = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None

    def fail(entry: str, problem: str) -> ConfigError:
        return ConfigError(f"{path}: {entry}: {problem}")

    users: list[UserConfig] = []
    for i, u in enumerate(_tables(raw, "user", fail), 1):
        entry = f"[[user]] #{i}"
        name = u.get("name")
        if not isinstance(name, str) or not name.strip():
            raise fail(entry, "name: required, a non-empty string")
        entry = f'{entry} "{name}"'
        digest = u.get("token_sha256")
        if not isinstance(digest, str) or len(digest) != 64 or not set(digest) <= set(string.hexdigits):
            raise fail(entry, "token_sha256: 64 hex digits, the SHA-256 of the token (`sowd hash-token` prints it)")
        named = u.get("roles", [])
        if not isinstance(named, list) or not all(isinstance(r, str) for r in named):
            raise fail(entry, "roles: a list of role names")
        for role in named:
            if role not in roles:
                raise fail(
                    entry, f"roles: {role!r} is not a [[role]] of the config (roles: {', '.join(sorted(roles))})"
                )
        if any(x.name == name for x in users):
            raise fail(entry, "name: another user has it")
        users.append(UserConfig(name, digest.lower(), tuple(named)))
    return tuple(users)


def _tables(raw: dict[str, Any], key: str, fail: Fail) -> list[dict[str, Any]]:
    value = raw.get(key, [])
    if not isinstance(value, list) or not all(isinstance(t, dict) for t in value):
        raise fail(key, f"use [[{key}]] tables")
    return value


def _file(t: dict[str, Any], key: str, base: Path, fail: Fail) -> str:
    value = t.get(key, "")
    if not isinstance(value, str):
        raise fail("[security]", f"{key}: a file name")
    if not value:
        return ""
    path = (base / value).resolve()
    if not path.is_file():
        raise fail("[security]", f"{key}: {path} does not exist")
    return str(path)


def _role(i: int, t: dict[str, Any], fail: Fail) -> RoleConfig:
    entry = f"[[role]] #{i}"
    name = t.get("name")
    if not isinstance(name, str) or not name.strip():
        raise fail(entry, "name: required, a non-empty string")
    entry = f'{entry} "{name}"'
    allowed = {"name", "read", "write", "filter", "admin", *QUOTAS}
    unknown = sorted(set(t) - allowed)
    if unknown:
        raise fail(entry, f"unknown setting {unknown[0]!r} (allowed: {', '.join(sorted(allowed))})")
    lists: dict[str, tuple[str, ...]] = {}
    for key in ("read", "write"):
        value = t.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise fail(entry, f"{key}: a list of topic names or regular expressions")
        for v in value:
            if is_regex_topic(v):
                try:
                    re.compile(v)
                except re.error as exc:
                    raise fail(entry, f"{key}: {v!r} is not a valid regular expression: {exc}") from None
        lists[key] = tuple(value)
    flt = t.get("filter", "")
    if not isinstance(flt, str):
        raise fail(entry, "filter: a filter expression")
    if flt.strip():
        try:
            compiled = compile_filter(flt)
        except ExpressionError as exc:
            raise fail(entry, f"filter: {exc.message}") from None
        if compiled.nondeterministic:
            raise fail(entry, "filter: a row entitlement cannot depend on the time (UNIX_TIMESTAMP)")
    admin = t.get("admin", False)
    if not isinstance(admin, bool):
        raise fail(entry, "admin: true or false")
    quotas = tuple((key, t[key]) for key in QUOTAS if key in t)
    for key, value in quotas:
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise fail(entry, f"{key}: a whole number, 0 or more")
    return RoleConfig(name, lists["read"], lists["write"], flt, admin, quotas)
