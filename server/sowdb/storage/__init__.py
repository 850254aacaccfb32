"""Storage: RocksDB column families behind a narrow interface (:class:`Store`)."""

from sowdb.storage.rocks import Change, Store

__all__ = ["Change", "Store"]
