"""``select=[-/,+/a,+/b/c]``: choose the fields a query returns.

Items apply left to right to a copy of the record: ``-/`` drops everything, ``-/path`` drops a
field, ``+/path`` copies a field from the original. Select shapes the output only; it never
changes which records match.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sowdb.errors import ExpressionError

_MISSING = object()


@dataclass(frozen=True, slots=True)
class SelectItem:
    include: bool
    steps: tuple[str, ...]  # () is the whole record


def _copy(value: Any) -> Any:
    """A copy of a JSON value whose objects and arrays are new (``copy.deepcopy`` without its
    recursion -- a record may nest a thousand levels -- or its memo)."""
    t = type(value)
    if t is not dict and t is not list:
        return value
    root: Any = {} if t is dict else []
    pending = [(value, root)]
    while pending:
        src, dst = pending.pop()
        for k, x in src.items() if type(src) is dict else enumerate(src):
            tx = type(x)
            if tx is dict or tx is list:
                y: Any = {} if tx is dict else []
                pending.append((x, y))
                x = y
            if type(dst) is dict:
                dst[k] = x
            else:
                dst.append(x)
    return root


def _get(data: Any, steps: tuple[str, ...]) -> Any:
    cur = data
    for s in steps:
        if type(cur) is not dict or s not in cur:
            return _MISSING
        cur = cur[s]
    return cur


@dataclass(frozen=True, slots=True)
class Select:
    text: str
    items: tuple[SelectItem, ...]

    def apply(self, data: dict[str, Any]) -> dict[str, Any]:
        """A new record with the selected fields; ``data`` is not modified."""
        items = self.items
        out: dict[str, Any]
        if items and not items[0].steps and not items[0].include:
            out, items = {}, items[1:]
        else:
            out = _copy(data)
        for item in items:
            if not item.steps:
                out = _copy(data) if item.include else {}
            elif item.include:
                value = _get(data, item.steps)
                if value is not _MISSING:
                    cur = out
                    for s in item.steps[:-1]:
                        nxt = cur.get(s)
                        if type(nxt) is not dict:
                            nxt = cur[s] = {}
                        cur = nxt
                    cur[item.steps[-1]] = _copy(value)
            else:
                parent = _get(out, item.steps[:-1])
                if type(parent) is dict:
                    parent.pop(item.steps[-1], None)
        return out


def parse_select(text: str) -> Select:
    """Parse ``[-/,+/a,+/b/c]`` (the brackets are optional).

    Raises:
        ExpressionError: an item that is not ``+/path`` or ``-/path``.
    """
    body, offset = text.strip(), len(text) - len(text.lstrip())
    if body.startswith("[") and body.endswith("]"):
        body, offset = body[1:-1], offset + 1
    items: list[SelectItem] = []
    col = offset
    for raw in body.split(","):
        item = raw.strip()
        at = col + (len(raw) - len(raw.lstrip())) + 1
        col += len(raw) + 1
        if len(item) < 2 or item[0] not in "+-" or item[1] != "/":
            raise ExpressionError("select items are +/path or -/path", column=at, token=item)
        steps = tuple(s for s in item[2:].split("/"))
        if steps == ("",):
            steps = ()
        if any(not s for s in steps):
            raise ExpressionError("empty step in select path", column=at, token=item)
        items.append(SelectItem(item[0] == "+", steps))
    return Select(text, tuple(items))
