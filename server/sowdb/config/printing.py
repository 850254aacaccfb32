"""``sowd --print-config``: the effective config as TOML.

The ``[server]`` table is written whole from the parsed settings, every default and every flag
(``--listen``, ``--metrics-listen``, ...) included, because that table is what a person asks
"where is it listening, where are the metrics?" of. So is ``[cluster]``, when there is one: it is
the file's table with ``--node`` and ``--advertise`` applied ("which node am I?"). Topics,
views, conflated topics and the security tables follow as the file (or the built-in demo) has
them, comments included: they take no flags and no defaults worth spelling out. Should the file
be written in a way that taking those two tables out of the text does not manage, the whole
document is written from its parsed values instead.
"""

from __future__ import annotations

import dataclasses
import re
import tomllib
from pathlib import Path
from typing import Any

import tomli_w

from sowdb.config import model as m

_HEADER = re.compile(r"^\s*\[")
_FLAGGED_HEADER = re.compile(r"^\s*\[\s*(server|cluster)\s*\]\s*(#.*)?$")
_UNITS = (("d", 86400.0), ("h", 3600.0), ("m", 60.0), ("s", 1.0))


def config_toml(config: m.Config) -> str:
    """The TOML of ``config``, which ``sowd --config`` reads back to the same settings."""
    demo = config.source.startswith("<")
    text = m.DEMO_CONFIG_TOML if demo else Path(config.source).read_text(encoding="utf-8")
    raw = tomllib.loads(text)
    flagged = {"server": _server_table(config.server)}
    if config.cluster is not None and isinstance(raw.get("cluster"), dict):
        flagged["cluster"] = {**raw["cluster"], "node": config.cluster.node, "advertise": config.cluster.advertise}
    raw.update(flagged)
    title = f"# the effective config of sowd: {config.source}, with the command line's flags applied\n"
    printed = f"{title}{tomli_w.dumps(flagged)}\n{_without_flagged_tables(text).strip()}\n"
    try:
        if tomllib.loads(printed) == raw:
            return printed
    except tomllib.TOMLDecodeError:
        pass
    return title + tomli_w.dumps(raw)


def _without_flagged_tables(text: str) -> str:
    kept: list[str] = []
    skipping = False
    for line in text.splitlines():
        if _HEADER.match(line):
            skipping = bool(_FLAGGED_HEADER.match(line))
        if not skipping:
            kept.append(line)
    return "\n".join(kept)


def _server_table(server: m.ServerConfig) -> dict[str, Any]:
    table: dict[str, Any] = {}
    for field in dataclasses.fields(server):
        value = getattr(server, field.name)
        if field.name == "workers" and not value:
            table[field.name] = "auto"
        elif field.name.endswith("_s"):  # a duration in seconds: the config's own name has no suffix
            table[field.name.removesuffix("_s")] = duration_text(value)
        else:
            table[field.name] = value
    return table


def duration_text(seconds: float) -> str:
    """A duration as the config writes it (``5s``, ``1d``, ``250ms``), read back exactly."""
    if seconds == 0:
        return "0s"
    for unit, size in _UNITS:
        if seconds >= size and (seconds / size).is_integer():
            return f"{int(seconds / size)}{unit}"
    milliseconds = seconds * 1000
    return f"{milliseconds:g}ms" if milliseconds.is_integer() else f"{seconds!r}s"
