"""How ``sowd`` logs (SPEC §12): to stderr, one line per event — text for a person (the
default), or ``--log-format json`` for machines: one JSON object a line with ``time``,
``level``, ``logger``, ``message`` and the event's own fields (a refused call's ``event``,
``rpc``, ``code``, ``user``, ``peer``, ``topic``, ...; see :mod:`sowdb.api.refusals`). A
traceback stays inside its event's line (``exc_info``).

No line ever holds a credential, whatever a client sends (issue 37, finding 12): gRPC core
logged ``Invalid encoding on b'Bearer <token>\\xff'`` at ERROR when a token was followed by a
byte that is not UTF-8. :data:`REDACT` rewrites such records before any handler writes them.
"""

from __future__ import annotations

import logging
import re

from pythonjsonlogger.orjson import OrjsonFormatter

LOG_FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


_BEARER = re.compile(r"(?i)(bearer)(?:\s|\\x[0-9a-f]{2}|%[0-9a-f]{2})*[^\s'\"]+")
"""``Bearer`` and what follows it up to a space or a quote (escaped bytes included)."""

_INVALID_ENCODING = "Invalid encoding on %s"
"""What gRPC core logs, at ERROR, with the raw bytes of a metadata value that is not UTF-8."""


class RedactCredentials(logging.Filter):
    """Takes credentials out of log records: gRPC's report of a metadata value that is not
    UTF-8 loses the value (any value may be a token, with or without ``Bearer``) and becomes a
    WARNING; anything after ``Bearer`` in any other record becomes ``[withheld]``, and a
    traceback that held one is dropped."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg == _INVALID_ENCODING:
            raw = record.args[0] if isinstance(record.args, tuple) and record.args else b""
            record.msg = "a call's metadata held a value that is not UTF-8 (%d bytes, withheld: it may be a credential)"
            record.args = (len(raw) if isinstance(raw, bytes | str) else 0,)
            record.levelno, record.levelname = logging.WARNING, "WARNING"
            record.exc_info, record.exc_text = None, None
            return True
        message = record.getMessage()
        if _BEARER.search(message):
            record.msg, record.args = _BEARER.sub(r"\1 [withheld]", message), None
        if record.exc_info or record.exc_text:
            text = record.exc_text or logging.Formatter().formatException(record.exc_info)  # type: ignore[arg-type]
            if _BEARER.search(text):
                record.exc_info, record.exc_text = None, None
                record.msg = f"{record.msg} (traceback withheld: it held a credential)"
        return True


REDACT = RedactCredentials()
"""The one instance: every handler of ``sowd`` and gRPC's own logger carry it."""


def configure_logging(level: str, log_format: str = "text") -> None:
    """Log ``level`` and above to stderr in ``log_format`` (one of :data:`LOG_FORMATS`), never
    a credential (:data:`REDACT`)."""
    handler = logging.StreamHandler()
    handler.addFilter(REDACT)
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
