"""Which process of a ``sowd --workers N`` group holds a client's connection, read from ``/proc``.

The kernel spreads a group's connections over its processes (``SO_REUSEPORT``); a test or a
benchmark that means to measure a reader or the writer opens connections of its own
(``grpc.use_local_subchannel_pool``) and asks which process took each.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

OWN_CONNECTION = [("grpc.use_local_subchannel_pool", 1)]
"""Channel options for a connection of its own (channels with one target share one otherwise)."""


def group_pids(banner: str) -> tuple[int, list[int]]:
    """(writer, readers) from the group's banner."""
    found = re.search(r"writer (\d+), readers ([\d, ]+);", banner)
    if not found:
        raise ValueError(f"not a group's banner: {banner!r}")
    return int(found[1]), [int(p) for p in found[2].split(", ")]


def holder(port: int, local_port: int, pids: list[int]) -> int | None:
    """The process among ``pids`` that holds the server end of the client connection from
    ``local_port`` to ``port`` (its socket's inode among the process's files)."""
    inodes = {inode: pid for pid in pids for inode in inodes_of(pid)}
    for line in _tcp():
        parts = line.split()
        local, remote, inode = parts[1], parts[2], int(parts[9])
        if int(local.split(":")[1], 16) == port and int(remote.split(":")[1], 16) == local_port and inode in inodes:
            return inodes[inode]
    return None


def connections(port: int) -> set[int]:
    """The local ports of this process's connections to ``port``."""
    mine = inodes_of("self")
    out = set()
    for line in _tcp():
        parts = line.split()
        if int(parts[2].split(":")[1], 16) == port and int(parts[9]) in mine:
            out.add(int(parts[1].split(":")[1], 16))
    return out


def inodes_of(pid: int | str) -> set[int]:
    """The inodes of the sockets process ``pid`` holds."""
    out: set[int] = set()
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except FileNotFoundError:
        return out
    for fd in fds:
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            out.add(int(link[8:-1]))
    return out


def _tcp() -> list[str]:
    """The connections of /proc/net/tcp and tcp6 (gRPC may dial IPv4 from an IPv6 socket)."""
    return [line for name in ("tcp", "tcp6") for line in Path(f"/proc/net/{name}").read_text().splitlines()[1:]]
