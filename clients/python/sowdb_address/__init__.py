"""HOST:PORT as people type it: the one parser of addresses in Python, shared by ``sowd``'s
listen addresses (config and flags), the ``sow`` CLI (``-server``, ``$SOW_SERVER``) and the SDK.

It exists because neither the kernel nor gRPC refuse a port out of range: they keep its low 16
bits, so ``127.0.0.1:99999`` silently meant port 34463 (99999 - 65536), whether listening or
dialing. It is a package of its own, depending on nothing, because both sides need it: the
server's config reads addresses, where importing ``sowdb_client`` would import grpc below the API
layer, and the SDK must not import the server (``tests/test_architecture.py`` checks both arrows).
"""

from __future__ import annotations

import re

MAX_PORT = 65535
_ADDRESS = re.compile(r"^(\[[^\]]*\]|[^\[\]]*?)(?::([^:\]]*))?$")
_SCHEME = re.compile(r"^(unix|unix-abstract|dns|ipv4|ipv6|vsock|xds):")


def parse_address(text: str, *, default_port: int | None = None, listen: bool = False) -> tuple[str, int]:
    """(host, port) of ``HOST:PORT`` (``[::1]:9007`` for IPv6).

    Args:
        text: what a person typed.
        default_port: the port of a host given alone (``db1``, ``[::1]``); None: a port is required.
        listen: the address is bound rather than dialed, where port 0 means any free port; a
            client dialing port 0 would reach nothing, so there it is an error.

    Raises:
        ValueError: not HOST:PORT, or a port out of 1..65535 (0..65535 with ``listen``).
    """
    stripped = text.strip()
    match = _ADDRESS.match(stripped)
    host, port_text = (match.group(1), match.group(2)) if match else ("", None)
    example = "127.0.0.1:9007"
    if not host or (port_text is None and default_port is None):
        raise ValueError(f"{text!r} is not HOST:PORT (e.g. {example!r})")
    if port_text is None:
        return host.strip("[]"), int(default_port or 0)
    lowest = 0 if listen else 1
    if not port_text.isdigit() or not lowest <= int(port_text) <= MAX_PORT:
        raise ValueError(f"{text!r}: the port must be a number from {lowest} to {MAX_PORT}")
    return host.strip("[]"), int(port_text)


def dial_target(target: str) -> str:
    """The gRPC target for what a client was given: ``HOST:PORT`` with its port checked (a host
    alone stays gRPC's, port 443), or a target gRPC names by scheme (``unix:/path``,
    ``dns:///host:port``) as it is.

    Raises:
        ValueError: a port out of 1..65535, or not an address at all.
    """
    if _SCHEME.match(target.strip()):
        return target
    parse_address(target, default_port=443)
    return target.strip()


def dial_targets(text: str) -> list[str]:
    """The gRPC targets of a server list, ``h1:9007,h2:9007,h3:9007`` (SPEC §13, HA-5), each
    checked as :func:`dial_target` does; a target named by scheme is one target, commas and all
    (gRPC's ``ipv4:a:1,b:2`` is its own list).

    Raises:
        ValueError: no address at all, or one that is not an address.
    """
    if _SCHEME.match(text.strip()):
        return [text.strip()]
    parts = [p for p in text.split(",") if p.strip()]
    if not parts:
        raise ValueError(f"{text!r} names no server (e.g. '127.0.0.1:9007' or 'h1:9007,h2:9007')")
    return [dial_target(p) for p in parts]
