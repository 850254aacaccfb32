"""Storage: RocksDB column families behind a narrow interface.

:class:`Store` (``store.py``) opens the database and reads decoded entries; :class:`Batch`
(``batch.py``) writes one request's changes as one WriteBatch; ``rebuild.py`` replays the
journal into ``current`` and ``history``; ``keys.py`` holds every byte layout beside its encoder.
"""

from sowdb.storage.batch import Batch
from sowdb.storage.database import Memory, store_memory
from sowdb.storage.failures import StorageFailed, StorageFull, StoreLocked, StoreUnusable
from sowdb.storage.repair import repair
from sowdb.storage.store import Store

__all__ = [
    "Batch",
    "Memory",
    "StorageFailed",
    "StorageFull",
    "Store",
    "StoreLocked",
    "StoreUnusable",
    "repair",
    "store_memory",
]
