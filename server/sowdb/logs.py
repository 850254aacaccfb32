"""How ``sowd`` logs (SPEC §12): to stderr, one line per event — text for a person (the
default), or ``--log-format json`` for machines: one JSON object a line with ``time``,
``level``, ``logger``, ``message`` and the event's own fields (a refused call's ``event``,
``rpc``, ``code``, ``user``, ``peer``, ``topic``, ...; see :mod:`sowdb.api.refusals`). A
traceback stays inside its event's line (``exc_info``).
"""

from __future__ import annotations

import logging

from pythonjsonlogger.orjson import OrjsonFormatter

LOG_FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def configure_logging(level: str, log_format: str = "text") -> None:
    """Log ``level`` and above to stderr in ``log_format`` (one of :data:`LOG_FORMATS`)."""
    handler = logging.StreamHandler()
    if log_format == "json":
        handler.setFormatter(
            OrjsonFormatter(
                "%(levelname)s %(name)s %(message)s",
                rename_fields={"levelname": "level", "name": "logger"},
                timestamp="time",
            )
        )
    else:
        handler.setFormatter(logging.Formatter(TEXT_FORMAT))
    logging.basicConfig(level=level, handlers=[handler], force=True)
