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
        self.pos, self.depth = pos, depth

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
    """A constant: NULL, true/false, a number or a string.

    Attributes:
        value: None (NULL), bool, int, float or the decoded str.
        written: a string literal's body as written (regex patterns use it).
    """

    __slots__ = ("value", "written")
    _fields = ("value",)

    def __init__(self, pos: int, value: Any, written: str | None = None) -> None:
        super().__init__(pos)
        self.value, self.written = value, written


class Path(Node):
    """A field path such as ``/a/b/0``: ``steps`` are names and array positions, ``text`` as written.

    ``previous``: written ``/a OF PREVIOUS`` (EN-2): the path is read in the record's previous
    version (the evaluation context's ``previous``), not in the message; only enrichment
    parses it, since nothing else has a previous version to read.
    """

    __slots__ = ("previous", "steps", "text")
    _fields = ("text", "previous")

    def __init__(self, pos: int, steps: tuple[str | int, ...], text: str, previous: bool = False) -> None:
        super().__init__(pos)
        self.steps, self.text, self.previous = steps, text, previous


class Unary(Node):
    """``-x`` or ``+x`` (``op`` is '-' or '+')."""

    __slots__ = ("op", "operand")
    _fields = ("op", "operand")

    def __init__(self, pos: int, op: str, operand: Node) -> None:
        super().__init__(pos, operand.depth + 1)
        self.op, self.operand = op, operand


class Binary(Node):
    """``left op right``: what arithmetic and comparisons share."""

    __slots__ = ("left", "op", "right")
    _fields = ("op", "left", "right")

    def __init__(self, pos: int, op: str, left: Node, right: Node) -> None:
        super().__init__(pos, _depth(left, right))
        self.op, self.left, self.right = op, left, right


class Arith(Binary):
    """``left op right`` with op one of ``+ - * / %``; NULL in gives NULL out."""

    __slots__ = ()


class Compare(Binary):
    """``left op right`` with op one of ``= != < <= > >=``.

    Strings and numbers compare with the coercions of FILTERS.md, which is why an index or a
    key lookup may stand in for it only where the types are known.
    """

    __slots__ = ()


class Logical(Node):
    """AND or OR over two or more operands (n-ary), evaluated left to right with SQL's
    three-valued logic."""

    __slots__ = ("op", "operands")
    _fields = ("op", "operands")

    def __init__(self, pos: int, op: str, operands: tuple[Node, ...]) -> None:
        assert len(operands) >= 2, "AND/OR chains are flattened into one node of two or more operands"
        super().__init__(pos, _depth(*operands))
        self.op, self.operands = op, operands


class Not(Node):
    """``NOT x``.

    NULL stays NULL (three-valued logic): ``NOT /a = 1`` does not match a record without ``/a``.
    """

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
        self.operand, self.low, self.high, self.negated = operand, low, high, negated


class In(Node):
    __slots__ = ("items", "negated", "operand")
    _fields = ("operand", "items", "negated")

    def __init__(self, pos: int, operand: Node, items: tuple[Node, ...], negated: bool) -> None:
        super().__init__(pos, _depth(operand, *items))
        self.operand, self.items, self.negated = operand, items, negated


class Like(Node):
    """``x [NOT] LIKE 'pattern'``.

    Attributes:
        pattern: as written between the quotes.
        literal: an ``r'...'`` pattern, matched as plain text.
    """

    __slots__ = ("literal", "negated", "operand", "pattern")
    _fields = ("operand", "pattern", "literal", "negated")

    def __init__(self, pos: int, operand: Node, pattern: str, literal: bool, negated: bool) -> None:
        super().__init__(pos, operand.depth + 1)
        self.operand, self.pattern, self.literal, self.negated = operand, pattern, literal, negated


class Affix(Node):
    """``x [NOT] BEGINS WITH (...)`` / ``x [NOT] ENDS WITH (...)``."""

    __slots__ = ("affixes", "begins", "negated", "operand")
    _fields = ("begins", "operand", "affixes", "negated")

    def __init__(self, pos: int, begins: bool, operand: Node, affixes: tuple[str, ...], negated: bool) -> None:
        super().__init__(pos, operand.depth + 1)
        self.begins, self.operand, self.affixes, self.negated = begins, operand, affixes, negated


class IsTest(Node):
    """``x IS [NOT] NULL``, or with ``nan`` set ``x IS [NOT] NAN``."""

    __slots__ = ("nan", "negated", "operand")
    _fields = ("operand", "nan", "negated")

    def __init__(self, pos: int, operand: Node, nan: bool, negated: bool) -> None:
        super().__init__(pos, operand.depth + 1)
        self.operand, self.nan, self.negated = operand, nan, negated


class If(Node):
    """``IF(cond, then, otherwise)``: only the chosen branch is evaluated, so a branch may hold
    what would fail on the records the condition leaves out."""

    __slots__ = ("cond", "otherwise", "then")
    _fields = ("cond", "then", "otherwise")

    def __init__(self, pos: int, cond: Node, then: Node, otherwise: Node) -> None:
        super().__init__(pos, _depth(cond, then, otherwise))
        self.cond, self.then, self.otherwise = cond, then, otherwise


class Call(Node):
    """A function call; ``name`` is upper case."""

    __slots__ = ("args", "name")
    _fields = ("name", "args")

    def __init__(self, pos: int, name: str, args: tuple[Node, ...]) -> None:
        super().__init__(pos, _depth(*args))
        self.name, self.args = name, args


class Aggregate(Node):
    """An aggregate call (COUNT, SUM, ...): only legal inside a projection, since a filter sees
    one record at a time and an aggregate needs a group of them."""

    __slots__ = ("arg", "name")
    _fields = ("name", "arg")

    def __init__(self, pos: int, name: str, arg: Node) -> None:
        super().__init__(pos, arg.depth + 1)
        self.name, self.arg = name, arg


PREDICATES = (Compare, Between, In, Like, Affix, IsTest, Not)
"""Nodes whose value is always TRUE, FALSE or NULL."""
