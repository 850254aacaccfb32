"""Storage: RocksDB column families behind a narrow interface (:class:`Store`, :class:`Batch`)."""

from sowdb.storage.rocks import Batch, Store

__all__ = ["Batch", "Store"]
