"""``sowd repair``: making a data directory that cannot be opened openable again."""

from __future__ import annotations

from pathlib import Path

from rocksdict import Rdict

from sowdb.storage.database import options
from sowdb.storage.store import Store


def repair(path: str) -> str:
    """``sowd repair``: make a data directory that cannot be opened openable again, saying what
    was done. A missing ``CURRENT`` is restored to name the newest manifest (what RocksDB itself
    would have read); otherwise RocksDB's repair rebuilds the manifest from the data files
    (blocks it cannot read are dropped). Run ``sowd verify`` after it; a server started on the
    result checks ``current`` against the journal and rebuilds what does not agree.
    """
    p = Path(path)
    manifests = sorted(p.glob("MANIFEST-*"), key=lambda m: int(m.name.split("-")[1]))
    if not (p / "CURRENT").exists() and manifests:
        newest = manifests[-1].name
        tmp = p / "CURRENT.repair"
        tmp.write_text(newest + "\n")
        tmp.rename(p / "CURRENT")
        try:
            Store(path).close()
            return f"restored CURRENT to name {newest}, the newest manifest; the database opens"
        except OSError:
            (p / "CURRENT").unlink()  # that manifest is not usable either: a full repair below
    Rdict.repair(path, options())
    Store(path).close()
    return "rebuilt the manifest from the data files (RocksDB repair); unreadable blocks, if any, were dropped"
