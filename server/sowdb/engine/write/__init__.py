"""The write path: the one writer, its decoded messages, producers, staging and fan-out.

``Writer`` assigns every bookmark, writes one WriteBatch per change and applies it; ``FanOut``
carries applied changes to the live registry, pages and derived topics; ``Stages`` and
``Producers`` serve the data service's staged, exactly-once writes. It depends on ``state``,
``read`` and ``live``.
"""

from sowdb.engine.write.conflation import Refreshed
from sowdb.engine.write.fanout import FanOut
from sowdb.engine.write.messages import InMessage
from sowdb.engine.write.staging import StageBuilder, Stages
from sowdb.engine.write.writer import Writer

__all__ = [
    "FanOut",
    "InMessage",
    "Refreshed",
    "StageBuilder",
    "Stages",
    "Writer",
]
