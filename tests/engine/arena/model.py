"""A plain reference model of a topic's versions, for the arena's differential test: every
version of every key, with the bookmarks that wrote and ended it, in lists."""

from __future__ import annotations

from dataclasses import dataclass

LIVE = 2**63 - 1


@dataclass
class Version:
    key: bytes
    doc: bytes
    born: int
    ts: int
    exp: int
    died: int = LIVE


class Model:
    def __init__(self) -> None:
        self.versions: dict[bytes, list[Version]] = {}  # oldest first
        self.last = 0
        self.floor = 0

    def live(self, key: bytes) -> Version | None:
        vs = self.versions.get(key)
        return vs[-1] if vs and vs[-1].died == LIVE else None

    def at(self, key: bytes, bookmark: int) -> Version | None:
        for v in self.versions.get(key, ()):
            if v.born <= bookmark < v.died:
                return v
        return None

    def visible(self, bookmark: int) -> dict[bytes, Version]:
        out = {}
        for key in self.versions:
            v = self.at(key, bookmark)
            if v is not None:
                out[key] = v
        return out

    def kept(self, key: bytes) -> list[Version]:
        """The versions a compaction at the floor keeps, newest first."""
        return [v for v in reversed(self.versions.get(key, ())) if v.died > self.floor]

    def put(self, key: bytes, doc: bytes, bookmark: int, ts: int, exp: int) -> Version | None:
        old = self.live(key)
        if old is not None:
            old.died = bookmark
        self.versions.setdefault(key, []).append(Version(key, doc, bookmark, ts, exp))
        self.last = bookmark
        return old

    def delete(self, key: bytes, bookmark: int) -> Version | None:
        old = self.live(key)
        if old is not None:
            old.died = bookmark
        self.last = bookmark
        return old

    def due(self, now_us: int) -> list[Version]:
        found = [v for vs in self.versions.values() for v in vs if v.died == LIVE and 0 < v.exp <= now_us]
        return sorted(found, key=lambda v: v.born)

    def compact(self, oldest_pinned: int) -> None:
        self.floor = max(self.floor, min(oldest_pinned, self.last))
        for key, vs in self.versions.items():
            self.versions[key] = [v for v in vs if v.died > self.floor]
