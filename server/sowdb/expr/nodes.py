"""AST of the filter language.

Nodes carry their depth (set by the parser) so that an expression nested deeper than the
compiler -- and CPython's own compiler behind it -- can handle is refused with a position.
``AND``/``OR`` chains are one n-ary node: a 200-term ``OR`` list is common in real filters and
must not count as 200 levels. Plain slotted classes: the parser builds many of them per
compile, and a frozen dataclass's ``__init__`` is several times slower.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


class Node:
    __slots__ = ("depth", "pos")
    _fields: tuple[str, ...] = ()

    def __init__(self, pos: int, depth: int = 1) -> None:
        self.pos = pos
        self.depth = depth

    def children(self) -> Iterator[Node]:
        for f in self._fields:
            x = getattr(self, f)
            if isinstance(x, Node):
                yield x
            elif isinstance(x, tuple):
                yield from (c for c in x if isinstance(c, Node))

    def walk(self) -> Iterator[Node]:
        """This node and all below it, parents first."""
        stack: list[Node] = [self]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(list(node.children())))

    def __repr__(self) -> str:
        args = ", ".join(f"{f}={getattr(self, f)!r}" for f in self._fields)
        return f"{type(self).__name__}({args})"


def _depth(*kids: Node) -> int:
    return 1 + max(k.depth for k in kids) if kids else 1


class Literal(Node):
    __slots__ = ("value", "written")
    _fields = ("value",)

    def __init__(self, pos: int, value: Any, written: str | None = None) -> None:
        super().__init__(pos)
        self.value = value  # None (NULL), bool, int, float or decoded str
        self.written = written  # a string literal's body as written (regex patterns use it)


class Path(Node):
    __slots__ = ("steps", "text")
    _fields = ("text",)

    def __init__(self, pos: int, steps: tuple[str | int, ...], text: str) -> None:
        super().__init__(pos)
        self.steps = steps
        self.text = text


class Unary(Node):
    __slots__ = ("op", "operand")
    _fields = ("op", "operand")

    def __init__(self, pos: int, op: str, operand: Node) -> None:
        super().__init__(pos, operand.depth + 1)
        self.op = op  # '-' or '+'
        self.operand = operand


class Arith(Node):
    __slots__ = ("left", "op", "right")
    _fields = ("op", "left", "right")

    def __init__(self, pos: int, op: str, left: Node, right: Node) -> None:
        super().__init__(pos, _depth(left, right))
        self.op = op  # + - * / %
        self.left = left
        self.right = right


class Compare(Node):
    __slots__ = ("left", "op", "right")
    _fields = ("op", "left", "right")

    def __init__(self, pos: int, op: str, left: Node, right: Node) -> None:
        super().__init__(pos, _depth(left, right))
        self.op = op  # = != < <= > >=
        self.left = left
        self.right = right


class Logical(Node):
    __slots__ = ("op", "operands")
    _fields = ("op", "operands")

    def __init__(self, pos: int, op: str, operands: tuple[Node, ...]) -> None:
        super().__init__(pos, _depth(*operands))
        self.op = op  # AND or OR, n-ary, evaluated left to right
        self.operands = operands


class Not(Node):
    __slots__ = ("operand",)
    _fields = ("operand",)

    def __init__(self, pos: int, operand: Node) -> None:
        super().__init__(pos, operand.depth + 1)
        self.operand = operand


class Between(Node):
    __slots__ = ("high", "low", "negated", "operand")
    _fields = ("operand", "low", "high", "negated")

    def __init__(self, pos: int, operand: Node, low: Node, high: Node, negated: bool) -> None:
        super().__init__(pos, _depth(operand, low, high))
        self.operand = operand
        self.low = low
        self.high = high
        self.negated = negated


class In(Node):
    __slots__ = ("items", "negated", "operand")
    _fields = ("operand", "items", "negated")

    def __init__(self, pos: int, operand: Node, items: tuple[Node, ...], negated: bool) -> None:
        super().__init__(pos, _depth(operand, *items))
        self.operand = operand
        self.items = items
        self.negated = negated


class Like(Node):
    __slots__ = ("literal", "negated", "operand", "pattern")
    _fields = ("operand", "pattern", "literal", "negated")

    def __init__(self, pos: int, operand: Node, pattern: str, literal: bool, negated: bool) -> None:
        super().__init__(pos, operand.depth + 1)
        self.operand = operand
        self.pattern = pattern  # as written between the quotes
        self.literal = literal  # r'...': match the text literally
        self.negated = negated


class Affix(Node):
    """``x [NOT] BEGINS WITH (...)`` / ``x [NOT] ENDS WITH (...)``."""

    __slots__ = ("affixes", "begins", "negated", "operand")
    _fields = ("begins", "operand", "affixes", "negated")

    def __init__(self, pos: int, begins: bool, operand: Node, affixes: tuple[str, ...], negated: bool) -> None:
        super().__init__(pos, operand.depth + 1)
        self.begins = begins
        self.operand = operand
        self.affixes = affixes
        self.negated = negated


class IsTest(Node):
    __slots__ = ("nan", "negated", "operand")
    _fields = ("operand", "nan", "negated")

    def __init__(self, pos: int, operand: Node, nan: bool, negated: bool) -> None:
        super().__init__(pos, operand.depth + 1)
        self.operand = operand
        self.nan = nan  # IS NAN rather than IS NULL
        self.negated = negated


class Call(Node):
    __slots__ = ("args", "name")
    _fields = ("name", "args")

    def __init__(self, pos: int, name: str, args: tuple[Node, ...]) -> None:
        super().__init__(pos, _depth(*args))
        self.name = name  # upper case
        self.args = args


class If(Node):
    __slots__ = ("cond", "otherwise", "then")
    _fields = ("cond", "then", "otherwise")

    def __init__(self, pos: int, cond: Node, then: Node, otherwise: Node) -> None:
        super().__init__(pos, _depth(cond, then, otherwise))
        self.cond = cond
        self.then = then
        self.otherwise = otherwise


class Aggregate(Node):
    """An aggregate call (COUNT, SUM, ...); only legal inside a projection."""

    __slots__ = ("arg", "name")
    _fields = ("name", "arg")

    def __init__(self, pos: int, name: str, arg: Node) -> None:
        super().__init__(pos, arg.depth + 1)
        self.name = name
        self.arg = arg


PREDICATES = (Compare, Between, In, Like, Affix, IsTest, Not)
"""Nodes whose value is always TRUE, FALSE or NULL."""
