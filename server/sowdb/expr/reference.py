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
from sowdb.expr.functions import FUNCTIONS, call, compile_regex, new_evaluation


def evaluate(node: n.Node, m: dict[str, Any], ctx: Any = None) -> Any:
    """The value of ``node`` for message ``m`` (one evaluation: one budget of built text)."""
    new_evaluation()
    return _evaluate(node, m, ctx)


def _evaluate(node: n.Node, m: dict[str, Any], ctx: Any = None) -> Any:
    if isinstance(node, n.Literal):
        return node.value
    if isinstance(node, n.Path):
        if node.previous:
            previous = getattr(ctx, "previous", None)
            return None if previous is None else get_path(previous, node.steps)
        return get_path(m, node.steps)
    if isinstance(node, n.Unary):
        x = _evaluate(node.operand, m, ctx)
        return num.neg(x) if node.op == "-" else num.pos(x)
    if isinstance(node, n.Arith):
        return num.ARITHMETIC_FUNCS[node.op](_evaluate(node.left, m, ctx), _evaluate(node.right, m, ctx))
    if isinstance(node, n.Compare):
        return v.compare(v.COMPARISON_OPS[node.op], _evaluate(node.left, m, ctx), _evaluate(node.right, m, ctx))
    if isinstance(node, n.Logical):
        result = None
        for operand in node.operands:
            result = _evaluate(operand, m, ctx)
            if node.op == "AND" and not v.truthy(result):
                return result
            if node.op == "OR" and not v.falsy(result):
                return result
        return result
    if isinstance(node, n.Not):
        return v.logical_not(_evaluate(node.operand, m, ctx))
    if isinstance(node, n.Between):
        r = v.between(_evaluate(node.operand, m, ctx), _evaluate(node.low, m, ctx), _evaluate(node.high, m, ctx))
        return v.not3(r) if node.negated else r
    if isinstance(node, n.In):
        items = [_evaluate(i, m, ctx) for i in node.items]
        r = v.in_list(_evaluate(node.operand, m, ctx), items)
        return v.not3(r) if node.negated else r
    if isinstance(node, n.Like):
        r = v.like(_evaluate(node.operand, m, ctx), compile_regex(node.pattern, node.literal))
        return v.not3(r) if node.negated else r
    if isinstance(node, n.Affix):
        x = _evaluate(node.operand, m, ctx)
        r = v.begins_with(x, node.affixes) if node.begins else v.ends_with(x, node.affixes)
        return v.not3(r) if node.negated else r
    if isinstance(node, n.IsTest):
        x = _evaluate(node.operand, m, ctx)
        r = v.is_nan(x) if node.nan else v.is_null(x)
        return not r if node.negated else r
    if isinstance(node, n.Call):
        fn = FUNCTIONS[node.name]
        if fn.meta:
            return None if ctx is None else getattr(ctx, fn.meta)
        return call(fn, [_evaluate(a, m, ctx) for a in node.args])
    if isinstance(node, n.If):
        cond = _evaluate(node.cond, m, ctx)
        return _evaluate(node.then if v.truthy(cond) else node.otherwise, m, ctx)
    raise TypeError(f"cannot evaluate {type(node).__name__} here")


def matches(node: n.Node, m: dict[str, Any], ctx: Any = None) -> bool:
    """Whether ``m`` is selected by the filter ``node``."""
    return v.truthy(evaluate(node, m, ctx))
