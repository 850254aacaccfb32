"""The reference evaluator: a deliberately plain tree walk over the AST.

It exists to be obviously right, not fast. The property tests generate random expressions and
messages and require the compiled form (``sowdb.expr.compiler``) to agree with it exactly, so
every fast path the compiler takes is checked against these few lines.
"""

from __future__ import annotations

from typing import Any

from sowdb.expr import nodes as n
from sowdb.expr import numeric as num
from sowdb.expr import values as v
from sowdb.expr.compiler import get_path
from sowdb.expr.functions import FUNCTIONS, call, compile_regex


def evaluate(node: n.Node, m: dict[str, Any], ctx: Any = None) -> Any:
    """The value of ``node`` for message ``m``."""
    if isinstance(node, n.Literal):
        return node.value
    if isinstance(node, n.Path):
        return get_path(m, node.steps)
    if isinstance(node, n.Unary):
        x = evaluate(node.operand, m, ctx)
        return num.neg(x) if node.op == "-" else num.pos(x)
    if isinstance(node, n.Arith):
        return num.ARITHMETIC_FUNCS[node.op](evaluate(node.left, m, ctx), evaluate(node.right, m, ctx))
    if isinstance(node, n.Compare):
        return v.compare(v.COMPARISON_OPS[node.op], evaluate(node.left, m, ctx), evaluate(node.right, m, ctx))
    if isinstance(node, n.Logical):
        result = None
        for operand in node.operands:
            result = evaluate(operand, m, ctx)
            if node.op == "AND" and not v.truthy(result):
                return result
            if node.op == "OR" and not v.falsy(result):
                return result
        return result
    if isinstance(node, n.Not):
        return v.logical_not(evaluate(node.operand, m, ctx))
    if isinstance(node, n.Between):
        r = v.between(evaluate(node.operand, m, ctx), evaluate(node.low, m, ctx), evaluate(node.high, m, ctx))
        return v.not3(r) if node.negated else r
    if isinstance(node, n.In):
        items = [evaluate(i, m, ctx) for i in node.items]
        r = v.in_list(evaluate(node.operand, m, ctx), items)
        return v.not3(r) if node.negated else r
    if isinstance(node, n.Like):
        r = v.like(evaluate(node.operand, m, ctx), compile_regex(node.pattern, node.literal))
        return v.not3(r) if node.negated else r
    if isinstance(node, n.Affix):
        x = evaluate(node.operand, m, ctx)
        r = v.begins_with(x, node.affixes) if node.begins else v.ends_with(x, node.affixes)
        return v.not3(r) if node.negated else r
    if isinstance(node, n.IsTest):
        x = evaluate(node.operand, m, ctx)
        r = v.is_nan(x) if node.nan else v.is_null(x)
        return not r if node.negated else r
    if isinstance(node, n.Call):
        fn = FUNCTIONS[node.name]
        if fn.meta:
            return None if ctx is None else getattr(ctx, fn.meta)
        return call(fn, [evaluate(a, m, ctx) for a in node.args])
    if isinstance(node, n.If):
        cond = evaluate(node.cond, m, ctx)
        return evaluate(node.then if v.truthy(cond) else node.otherwise, m, ctx)
    raise TypeError(f"cannot evaluate {type(node).__name__} here")


def matches(node: n.Node, m: dict[str, Any], ctx: Any = None) -> bool:
    """Whether ``m`` is selected by the filter ``node``."""
    return v.truthy(evaluate(node, m, ctx))
