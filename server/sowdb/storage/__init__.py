"""Storage: RocksDB column families behind a narrow interface (:class:`Store`, :class:`Batch`)."""

from sowdb.storage.rocks import Batch, Store, StoreLocked

__all__ = ["Batch", "Store", "StoreLocked"]
