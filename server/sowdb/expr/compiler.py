"""Compiles an AST into nested Python closures, once, so that evaluation never re-parses.

Each node becomes a closure ``(message, ctx) -> value`` with its operands already resolved.
The common shapes are specialised so they run as a single small closure: ``/price > 190``
reads ``m.get('price')`` and compares directly when the value is a number, and only falls back
to the shared semantics of ``sowdb.expr.values`` (strings that convert, arrays, NULLs, booleans)
otherwise. The reference evaluator (``sowdb.expr.reference``) walks the tree with those same
semantics, and the property tests hold the two to agreement.

Closures rather than generated source: building them costs microseconds where CPython's
``compile()`` costs a hundred or more per filter, and they evaluate the hot filter at several
million records a second (``tools/bench/bench_expr.py``).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

from sowdb.errors import ExpressionError
from sowdb.expr import nodes as n
from sowdb.expr import numeric as num
from sowdb.expr import values as v
from sowdb.expr.functions import FUNCTIONS, compile_regex, new_evaluation, scalar

Fn = Callable[[Any, Any], Any]
"""A compiled node: ``(message, ctx) -> value``."""

_NUM = (int, float)
_INT_OPS: dict[str, Callable[[int, int], int]] = {"+": operator.add, "-": operator.sub, "*": operator.mul}


def get_path(m: Any, steps: tuple[str | int, ...]) -> Any:
    """Resolve a field path. Through an array of objects it yields every element's value."""
    cur = m
    for s in steps:
        t = type(cur)
        if type(s) is int:
            cur = cur[s] if t is list and s < len(cur) else None
        elif t is dict:
            cur = cur.get(s)
        elif t is list:
            out: list[Any] = []
            for e in cur:
                if type(e) is dict:
                    x = e.get(s)
                    if type(x) is list:
                        out.extend(x)
                    elif x is not None:
                        out.append(x)
            cur = out or None
        else:
            return None
        if cur is None:
            return None
    return cur


def is_predicate(node: n.Node) -> bool:
    """True when the node's value is always TRUE, FALSE or NULL (never another value)."""
    if isinstance(node, n.PREDICATES):
        return True
    if isinstance(node, n.Logical):
        return all(is_predicate(o) for o in node.operands)
    return False


def _plain_number(x: Any) -> bool:
    return (type(x) is int or type(x) is float) and math.isfinite(x)


def _negate(f: Fn) -> Fn:
    not3 = v.not3
    return lambda m, ctx: not3(f(m, ctx))


class _Compiler:
    """One compilation; records the paths read and the functions called on the way."""

    def __init__(self, aggregates: _AggregateValues | None = None) -> None:
        self.paths: dict[str, tuple[str | int, ...]] = {}
        self.calls: set[str] = set()
        self.aggregates = aggregates
        self._depth = 0
        self._builds = False

    def value(self, node: n.Node) -> Fn:
        """A closure computing the node's value."""
        return self._compiled(self._value, node)

    def test(self, node: n.Node) -> Fn:
        """A closure whose result is truthy exactly when the node's value matches."""
        return self._compiled(self._test, node)

    def _compiled(self, how: Callable[[n.Node], Fn], node: n.Node) -> Fn:
        """Compile ``node``; at the top (a closure its caller will evaluate, rather than one
        of its operands) a closure that builds strings starts its evaluation's budget of
        built characters afresh (``functions.MAX_BUILT_CHARS``): whoever evaluates it, a
        query, a subscription, a view or the subscription hub's shared conjuncts."""
        if self._depth == 0:
            self._builds = False
        self._depth += 1
        try:
            fn = how(node)
        finally:
            self._depth -= 1
        if self._depth or not self._builds:
            return fn
        inner, reset = fn, new_evaluation

        def budgeted(m: Any, ctx: Any) -> Any:
            reset()
            return inner(m, ctx)

        return budgeted

    def _value(self, node: n.Node) -> Fn:
        method: Callable[[Any], Fn] = getattr(self, "v_" + type(node).__name__)
        return method(node)

    def _test(self, node: n.Node) -> Fn:
        """Predicates evaluate to True/False/None, whose Python truthiness already is "matches",
        so they need no wrapping and ``AND`` of them is a plain ``and``.
        """
        if isinstance(node, n.Logical) and node.op == "AND":
            parts = [self.test(o) for o in node.operands]
            if len(parts) == 2:
                a, b = parts
                return lambda m, ctx: a(m, ctx) and b(m, ctx)
            if len(parts) == 3:
                a, b, c = parts
                return lambda m, ctx: a(m, ctx) and b(m, ctx) and c(m, ctx)
            return lambda m, ctx: all(p(m, ctx) for p in parts)
        if isinstance(node, n.Not):
            inner = self.value(node.operand)
            if is_predicate(node.operand):
                return lambda m, ctx: inner(m, ctx) is False
            falsy = v.falsy
            return lambda m, ctx: falsy(inner(m, ctx))
        f = self.value(node)
        if is_predicate(node):
            return f
        truthy = v.truthy
        return lambda m, ctx: truthy(f(m, ctx))

    # --- operands -------------------------------------------------------------------------

    def v_Literal(self, node: n.Literal) -> Fn:
        k = node.value
        return lambda m, ctx: k

    def v_Path(self, node: n.Path) -> Fn:
        if node.previous:  # EN-2: read in the record's previous version; NULL when there is none
            steps = node.steps
            return lambda m, ctx: None if (p := getattr(ctx, "previous", None)) is None else get_path(p, steps)
        self.paths[node.text] = steps = node.steps
        if len(steps) == 1 and type(steps[0]) is str:
            key = steps[0]
            return lambda m, ctx: m.get(key)
        if len(steps) == 2 and type(steps[0]) is str and type(steps[1]) is str:
            # ``/a/b``, and a joined view's ``[topic]./field`` (V-2, read once per aggregate of
            # each joined row): a field of an object read directly, anything else walked
            outer, inner = steps

            def two_steps(m: Any, ctx: Any) -> Any:
                cur = m.get(outer)
                if type(cur) is dict:
                    return cur.get(inner)
                return None if cur is None else get_path(m, steps)

            return two_steps
        return lambda m, ctx: get_path(m, steps)

    def v_Unary(self, node: n.Unary) -> Fn:
        f, op = self.value(node.operand), num.neg if node.op == "-" else num.pos
        return lambda m, ctx: op(f(m, ctx))

    def v_Arith(self, node: n.Arith) -> Fn:
        a, b, op = self.value(node.left), self.value(node.right), num.ARITHMETIC_FUNCS[node.op]
        right = node.right
        if isinstance(right, n.Literal) and type(right.value) is int:
            # ``/qty % 10``, ``/px * 2``: integers take Python's operator directly (the same
            # result as the general path for these cases, a result beyond 64 bits becoming a
            # float), anything else the general path.
            k = right.value
            if node.op == "%" and k > 0:
                return lambda m, ctx: x % k if type(x := a(m, ctx)) is int and x >= 0 else op(x, k)
            fast = _INT_OPS.get(node.op)
            if fast is not None:
                lo, hi, to_float = num.INT64_MIN, num.UINT64_MAX, num.to_float

                def int_literal(m: Any, ctx: Any) -> Any:
                    x = a(m, ctx)
                    if type(x) is int:
                        r = fast(x, k)
                        return r if lo <= r <= hi else to_float(r)
                    return op(x, k)

                return int_literal
        pair = _INT_OPS.get(node.op)
        if pair is not None:  # ``/price * /qty``: two integers take Python's operator, as above
            lo, hi, to_float = num.INT64_MIN, num.UINT64_MAX, num.to_float

            def ints(m: Any, ctx: Any) -> Any:
                x, y = a(m, ctx), b(m, ctx)
                if type(x) is int and type(y) is int:
                    r = pair(x, y)
                    return r if lo <= r <= hi else to_float(r)
                return op(x, y)

            return ints
        return lambda m, ctx: op(a(m, ctx), b(m, ctx))

    # --- predicates -----------------------------------------------------------------------

    def v_Compare(self, node: n.Compare) -> Fn:
        left, right, op = node.left, node.right, node.op
        if isinstance(left, n.Literal) and not isinstance(right, n.Literal):
            left, right, op = right, left, v.FLIPPED[op]
        slow = v.COMPARE_FUNCS[op]
        if isinstance(right, n.Literal):
            k = right.value
            if v.is_null(k):
                return lambda m, ctx: None
            fast = v.COMPARISON_OPS[op]
            single = isinstance(left, n.Path) and len(left.steps) == 1 and type(left.steps[0]) is str
            a = self.value(left)
            if _plain_number(k):
                if single:
                    key = left.steps[0]  # type: ignore[attr-defined]

                    def number_field(m: Any, ctx: Any) -> Any:
                        x = m.get(key)
                        return fast(x, k) if type(x) in _NUM else slow(x, k)

                    return number_field

                def number(m: Any, ctx: Any) -> Any:
                    x = a(m, ctx)
                    return fast(x, k) if type(x) in _NUM else slow(x, k)

                return number
            if type(k) is str:
                if single:
                    key = left.steps[0]  # type: ignore[attr-defined]

                    def string_field(m: Any, ctx: Any) -> Any:
                        x = m.get(key)
                        return fast(x, k) if type(x) is str and x else slow(x, k)

                    return string_field

                def string(m: Any, ctx: Any) -> Any:
                    x = a(m, ctx)
                    return fast(x, k) if type(x) is str and x else slow(x, k)

                return string
            return lambda m, ctx: slow(a(m, ctx), k)
        a, b = self.value(left), self.value(right)
        return lambda m, ctx: slow(a(m, ctx), b(m, ctx))

    def v_Logical(self, node: n.Logical) -> Fn:
        # AND: the first operand that is not TRUE, else the last; OR: the first that is not
        # FALSE, else the last (AMPS's left-to-right tables).
        parts = [self.value(o) for o in node.operands]
        stop = v.truthy if node.op == "AND" else v.falsy

        def logical(m: Any, ctx: Any) -> Any:
            r = None
            for p in parts:
                r = p(m, ctx)
                if not stop(r):
                    return r
            return r

        return logical

    def v_Not(self, node: n.Not) -> Fn:
        f = self.value(node.operand)
        if is_predicate(node.operand):
            return lambda m, ctx: None if (r := f(m, ctx)) is None else r is False
        logical_not = v.logical_not
        return lambda m, ctx: logical_not(f(m, ctx))

    def v_Between(self, node: n.Between) -> Fn:
        x, lo, hi, between = self.value(node.operand), self.value(node.low), self.value(node.high), v.between
        f: Fn = lambda m, ctx: between(x(m, ctx), lo(m, ctx), hi(m, ctx))  # noqa: E731
        return _negate(f) if node.negated else f

    def v_In(self, node: n.In) -> Fn:
        a, in_list = self.value(node.operand), v.in_list
        f: Fn
        if all(isinstance(i, n.Literal) for i in node.items):
            values = tuple(i.value for i in node.items if not v.is_null(i.value))  # type: ignore[attr-defined]
            members = frozenset(values) if all(type(x) is str for x in values) else None
            numbers = frozenset(values) if all(_plain_number(x) for x in values) else None
            if values and members is not None:

                def in_strings(m: Any, ctx: Any) -> Any:
                    x = a(m, ctx)
                    return x in members if type(x) is str and x else in_list(x, values)

                f = in_strings
            elif values and numbers is not None:

                def in_numbers(m: Any, ctx: Any) -> Any:
                    x = a(m, ctx)
                    return x in numbers if type(x) in _NUM else in_list(x, values)

                f = in_numbers
            else:
                f = lambda m, ctx: in_list(a(m, ctx), values)  # noqa: E731
        else:
            items = [self.value(i) for i in node.items]
            f = lambda m, ctx: in_list(a(m, ctx), [i(m, ctx) for i in items])  # noqa: E731
        return _negate(f) if node.negated else f

    def v_Like(self, node: n.Like) -> Fn:
        a, rx, like = self.value(node.operand), compile_regex(node.pattern, node.literal), v.like
        self._builds = True  # a search reads the text through: charged to the scanning budget
        f: Fn = lambda m, ctx: like(a(m, ctx), rx)  # noqa: E731
        return _negate(f) if node.negated else f

    def v_Affix(self, node: n.Affix) -> Fn:
        a, affixes = self.value(node.operand), node.affixes
        test = v.begins_with if node.begins else v.ends_with
        f: Fn = lambda m, ctx: test(a(m, ctx), affixes)  # noqa: E731
        return _negate(f) if node.negated else f

    def v_IsTest(self, node: n.IsTest) -> Fn:
        a, test = self.value(node.operand), v.is_nan if node.nan else v.is_null
        if node.negated:
            return lambda m, ctx: not test(a(m, ctx))
        return lambda m, ctx: test(a(m, ctx))

    # --- calls ----------------------------------------------------------------------------

    def v_Call(self, node: n.Call) -> Fn:
        fn = FUNCTIONS[node.name]
        self.calls.add(node.name)
        self._builds = self._builds or fn.builds
        if fn.meta:
            attr = fn.meta
            return lambda m, ctx: None if ctx is None else getattr(ctx, attr)
        impl = fn.impl
        args = [self.value(a) for a in node.args]
        if fn.arrays:
            return lambda m, ctx: impl(*[a(m, ctx) for a in args])
        return lambda m, ctx: impl(*[scalar(a(m, ctx)) for a in args])

    def v_If(self, node: n.If) -> Fn:
        cond, then, otherwise = self.test(node.cond), self.value(node.then), self.value(node.otherwise)
        return lambda m, ctx: then(m, ctx) if cond(m, ctx) else otherwise(m, ctx)

    def v_Aggregate(self, node: n.Aggregate) -> Fn:
        if self.aggregates is None:  # the parser refuses aggregates outside projections
            raise ExpressionError("aggregate not allowed here", column=node.pos + 1, token=node.name)
        slot, holder = self.aggregates.slot(node), self.aggregates
        return lambda m, ctx: holder.values[slot]


class _AggregateValues:
    """Where a projection's compiled items read the current group's aggregate results."""

    def __init__(self) -> None:
        self.slots: dict[int, int] = {}
        self.values: list[Any] = []

    def slot(self, node: n.Aggregate) -> int:
        return self.slots.setdefault(id(node), len(self.slots))
