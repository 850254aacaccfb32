"""What a compiled expression offers its users: evaluation (:class:`CompiledExpression`), the
hot-path match of a filter (:class:`CompiledFilter`), and what the filter's top-level
conjuncts let a hash index (:class:`Conjunct`), a column (:class:`Comparison`) or the
subscription hub (:class:`EqualityConjunct`) do without evaluating the whole filter."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sowdb.expr import nodes as n
from sowdb.expr import values as v
from sowdb.expr.compiler import Fn, _Compiler
from sowdb.expr.functions import FUNCTIONS


@dataclass(frozen=True, slots=True)
class Conjunct:
    """A top-level ``path = literal`` or ``path IN (literals)`` conjunct of a filter: every
    matching record has one of ``values`` at ``steps``, so a hash index can serve it."""

    steps: tuple[str | int, ...]
    path: str
    values: tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class Comparison:
    """A top-level ``path op literal`` conjunct of a filter (``op``: ``= != < <= > >=``, the
    path on the left): every matching record has a value at ``steps`` for which the comparison
    is TRUE with one of ``values`` (several only for ``IN``, whose op is ``=``). ``BETWEEN`` is
    two of them (``>=`` and ``<=``). The literals are scalars: a number, a boolean or a
    non-empty string."""

    steps: tuple[str | int, ...]
    path: str
    op: str
    values: tuple[Any, ...]


def _and_parts(node: n.Node) -> list[n.Node]:
    """The operands of a top-level AND, those of nested ANDs included (``(a AND b) AND c``, as
    an entitlement is added to a request's filter): a filter matches only when each of them is
    TRUE, since the compiled test of an AND is Python's ``and`` at every level."""
    if not (isinstance(node, n.Logical) and node.op == "AND"):
        return [node]
    return [p for o in node.operands for p in _and_parts(o)]


def _conjuncts(root: n.Node) -> tuple[Conjunct, ...]:
    out: list[Conjunct] = []
    for p in _and_parts(root):
        if isinstance(p, n.Compare) and p.op == "=":
            path, lit = (p.left, p.right) if isinstance(p.left, n.Path) else (p.right, p.left)
            if isinstance(path, n.Path) and isinstance(lit, n.Literal) and not v.is_null(lit.value):
                out.append(Conjunct(path.steps, path.text, (lit.value,)))
        elif (
            isinstance(p, n.In)
            and not p.negated
            and isinstance(p.operand, n.Path)
            and all(isinstance(i, n.Literal) for i in p.items)
        ):
            vals = tuple(i.value for i in p.items if not v.is_null(i.value))  # type: ignore[attr-defined]
            out.append(Conjunct(p.operand.steps, p.operand.text, vals))
    return tuple(out)


def _scalar_literal(node: n.Node) -> bool:
    return isinstance(node, n.Literal) and type(node.value) in (bool, int, float, str) and not v.is_null(node.value)


def _literals(nodes: tuple[n.Node, ...]) -> bool:
    return bool(nodes) and all(_scalar_literal(i) for i in nodes)


def _comparisons_of(p: n.Node) -> list[Comparison]:
    """The comparisons of a path with literals one top-level conjunct is ([] for another kind)."""
    if isinstance(p, n.Compare):
        if isinstance(p.left, n.Path) and _scalar_literal(p.right):
            return [Comparison(p.left.steps, p.left.text, p.op, (p.right.value,))]  # type: ignore[attr-defined]
        if isinstance(p.right, n.Path) and _scalar_literal(p.left):
            op = v.FLIPPED[p.op]
            return [Comparison(p.right.steps, p.right.text, op, (p.left.value,))]  # type: ignore[attr-defined]
    elif isinstance(p, n.In) and isinstance(p.operand, n.Path) and _literals(p.items) and not p.negated:
        values = tuple(i.value for i in p.items)  # type: ignore[attr-defined]
        return [Comparison(p.operand.steps, p.operand.text, "=", values)]
    elif isinstance(p, n.Between) and isinstance(p.operand, n.Path) and not p.negated:
        path = p.operand
        if _literals((p.low, p.high)):
            return [
                Comparison(path.steps, path.text, ">=", (p.low.value,)),  # type: ignore[attr-defined]
                Comparison(path.steps, path.text, "<=", (p.high.value,)),  # type: ignore[attr-defined]
            ]
    return []


def _comparisons(root: n.Node) -> tuple[Comparison, ...]:
    return tuple(c for p in _and_parts(root) for c in _comparisons_of(p))


def _only_comparisons(root: n.Node) -> bool:
    """Whether every top-level conjunct is a comparison of :func:`_comparisons`: the filter is
    then exactly their AND, and columns that decide each exactly decide the filter."""
    return all(_comparisons_of(p) for p in _and_parts(root))


@dataclass(frozen=True)
class EqualityConjunct:
    """A top-level ``expression = literal`` (or ``expression IN (literals)``) conjunct whose
    expression is deterministic and reads only the message: every matching record has one of
    ``values`` as the value of ``value``. ``key`` is the same for structurally equal
    expressions, so that subscriptions sharing an expression can share its evaluation.

    A record matches the whole filter exactly when :meth:`holds` is true of its ``value`` and
    ``rest`` — the filter's other top-level conjuncts, None when there are none — is truthy
    (an AND whose TRUE operand is dropped keeps its truth), so whoever has already computed
    ``value`` need not evaluate the whole filter again.
    """

    key: str
    value: Fn
    values: tuple[Any, ...]
    rest: Fn | None = None
    is_in: bool = False  # ``IN (values)`` rather than ``= values[0]``

    def holds(self, x: Any) -> bool:
        """Whether the conjunct is TRUE for an expression value ``x`` (the same functions as
        the compiled filter's ``=`` and ``IN``)."""
        if self.is_in:
            return v.in_list(x, self.values) is True
        return v.cmp_eq(x, self.values[0]) is True


def _pure(node: n.Node) -> bool:
    for sub in node.walk():
        if isinstance(sub, n.Aggregate):
            return False
        if isinstance(sub, n.Call) and (sub.name == "UNIX_TIMESTAMP" or FUNCTIONS[sub.name].meta):
            return False
    return True


def _equality_conjuncts(root: n.Node) -> tuple[EqualityConjunct, ...]:
    parts = root.operands if isinstance(root, n.Logical) and root.op == "AND" else (root,)
    out: list[EqualityConjunct] = []
    for at, p in enumerate(parts):
        expr: n.Node | None = None
        literals: tuple[Any, ...] = ()
        is_in = False
        if isinstance(p, n.Compare) and p.op == "=":
            lit, other = (p.right, p.left) if isinstance(p.right, n.Literal) else (p.left, p.right)
            if isinstance(lit, n.Literal) and not isinstance(other, n.Literal) and not v.is_null(lit.value):
                expr, literals = other, (lit.value,)
        elif isinstance(p, n.In) and not p.negated and all(isinstance(i, n.Literal) for i in p.items):
            expr, is_in = p.operand, True
            literals = tuple(i.value for i in p.items if not v.is_null(i.value))  # type: ignore[attr-defined]
        if expr is not None and _pure(expr):
            others = parts[:at] + parts[at + 1 :]
            rest = None
            if others:
                rest = _Compiler().test(others[0] if len(others) == 1 else n.Logical(root.pos, "AND", others))
            out.append(EqualityConjunct(repr(expr), _Compiler().value(expr), literals, rest, is_in))
    return tuple(out)


class CompiledExpression:
    """An expression compiled once; call :meth:`evaluate` per message.

    Attributes:
        text: the source text.
        node: its AST.
        paths: the field paths it reads, as written (``/a/b``), mapped to their steps.
        nondeterministic: it calls a function whose value changes over time
            (``UNIX_TIMESTAMP()``); oof, paginated, aggregated and conflated subscriptions and
            view filters refuse it.
        uses_metadata: it calls SOW_KEY(), TOPIC_NAME(), BOOKMARK() or LAST_UPDATED(), so
            callers must pass the record's metadata as ``ctx``.
    """

    def __init__(self, text: str, node: n.Node) -> None:
        self.text = text
        self.node = node
        compiler = _Compiler()
        self._fn = self._compile(compiler)
        self.paths = compiler.paths
        functions = [FUNCTIONS[c] for c in compiler.calls]
        self.nondeterministic = any(f.nondeterministic for f in functions)
        self.uses_metadata = any(f.meta for f in functions)

    def _compile(self, compiler: _Compiler) -> Fn:
        return compiler.value(self.node)

    def evaluate(self, message: dict[str, Any], ctx: Any = None) -> Any:
        """The expression's value for one decoded JSON object (``ctx``: record metadata)."""
        return self._fn(message, ctx)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.text!r})"


class CompiledFilter(CompiledExpression):
    """A filter. :attr:`matches` is the hot-path callable ``(message, ctx)``; its result is
    truthy exactly when the record matches. Pass ``None`` as ``ctx`` when the filter does not
    use record metadata (:attr:`uses_metadata`).

    Attributes:
        conjuncts: top-level equality / IN conjuncts, for the query planner's hash indexes.
        comparisons: top-level comparisons of a path with literals, for the planner's columns.
        only_comparisons: the filter is the AND of :attr:`comparisons` and nothing else, so
            candidates the columns decided exactly need not run it again.
    """

    def __init__(self, text: str, node: n.Node) -> None:
        super().__init__(text, node)
        self.matches: Fn = self._fn
        self.conjuncts = _conjuncts(node)
        self.comparisons = _comparisons(node)
        self.only_comparisons = _only_comparisons(node)
        self._equality: tuple[EqualityConjunct, ...] | None = None
        self._value_fn: Fn | None = None

    @property
    def equality_conjuncts(self) -> tuple[EqualityConjunct, ...]:
        """Top-level equality conjuncts over any pure expression (built on first use); the
        subscription hub indexes subscriptions by them."""
        if self._equality is None:
            self._equality = _equality_conjuncts(self.node)
        return self._equality

    def _compile(self, compiler: _Compiler) -> Fn:
        return compiler.test(self.node)

    def evaluate(self, message: dict[str, Any], ctx: Any = None) -> Any:
        """The filter's value (TRUE / FALSE / NULL or another value), compiled on first use."""
        if self._value_fn is None:
            self._value_fn = _Compiler().value(self.node)
        return self._value_fn(message, ctx)

    def __call__(self, message: dict[str, Any], ctx: Any = None) -> bool:
        """Whether the record matches, as a bool."""
        return bool(self.matches(message, ctx))
