"""A reader's figures sent to its writer, so that ``sow stats``, ``/metrics`` and the console show
the subscriptions of every process of the group (issue 41), not only the writer's.

Once a second the reader takes its report (``ReaderLive.report``: its subscriptions, their
queues, the slow consumers it cut off, its calls) and sends it over the group's socket
(:data:`~sowdb.workers.feed_rpc.REPORT_METHOD`) when it differs from the last one sent: an idle
reader sends nothing. The writer drops a reader's subscriptions from its figures when the
reader's feed ends, so a reader that dies needs to send nothing to leave them.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any

import grpc

from sowdb.config import Config
from sowdb.engine import ReaderLive
from sowdb.workers.feed_rpc import REPORT_METHOD
from sowdb.workers.supervisor import WORKER_ENV

log = logging.getLogger("sowdb.workers.reports")

REPORT_S = 1.0
"""How often a reader looks whether its figures changed."""


def topic_names(config: Config) -> list[str]:
    """The topics a pattern subscription may follow: the configured topics, views and conflated topics."""
    return [t.name for t in config.topics] + [v.name for v in config.views] + [c.name for c in config.conflated_topics]


async def send_reports(channel: grpc.aio.Channel, live: ReaderLive, config: Config, every_s: float = REPORT_S) -> None:
    """Report ``live``'s figures to the writer on ``channel`` until cancelled."""
    send: Any = channel.unary_unary(REPORT_METHOD)
    names = topic_names(config)
    name = os.environ.get(WORKER_ENV, "")  # the supervisor's name for it
    last = b""
    while True:
        report = live.report(names, name)
        if report != last:
            try:
                await send(report, timeout=10 * every_s)
                last = report
            except grpc.aio.AioRpcError as exc:  # sent again next time; the feed says if the writer is gone
                log.debug("reader %d could not report its figures: %s", live.reader, exc.details())
        await asyncio.sleep(every_s)
