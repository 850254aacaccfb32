"""The compiled form must agree with the reference tree-walker on random expressions and
messages (1,500 expressions, each on 41 messages): every specialised fast path of the compiler is checked here."""

from __future__ import annotations

import math
import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from sowdb.expr import reference as ref
from sowdb.expr.compiled import CompiledFilter
from sowdb.expr.parser import parse

FIELDS = ["/a", "/b", "/s", "/arr", "/obj/x", "/items/q", "/arr[1]", "/missing", "/n"]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-20, 20),
    st.sampled_from([2**63 - 1, 2**64 - 1, -(2**63)]),  # the 64-bit edges: results beyond are floats
    st.sampled_from([0.5, -1.5, 2.0, 1e300, math.nan]),
    st.sampled_from(["", "a", "B", "abc", "10", "2.0", "01", "zebra", "x y"]),
)
json_values = st.one_of(
    scalars,
    st.lists(scalars, max_size=4),
    st.fixed_dictionaries({"x": scalars}),
)
messages = st.fixed_dictionaries(
    {
        "a": json_values,
        "b": json_values,
        "s": json_values,
        "arr": st.lists(scalars, max_size=4),
        "obj": st.fixed_dictionaries({"x": json_values}),
        "items": st.lists(st.fixed_dictionaries({"q": scalars}), max_size=3),
        "n": st.one_of(st.integers(-5, 5), st.floats(-5, 5, allow_nan=False)),
    }
)

literals = st.one_of(
    st.integers(-20, 20).map(str),
    st.sampled_from(["18446744073709551615", "9223372036854775807"]),
    st.sampled_from(["0.5", "2.0", "1e3", "NULL", "TRUE", "FALSE", "''", "'a'", "'10'", "'2.0'", "'zebra'", "'B'"]),
)
leaves = st.one_of(st.sampled_from(FIELDS), literals)


def _combine(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    two = st.tuples(children, children)
    return st.one_of(
        st.tuples(children, st.sampled_from(["=", "!=", "<", "<=", ">", ">="]), children).map(
            lambda t: f"({' '.join(t)})"
        ),
        st.tuples(children, st.sampled_from(["+", "-", "*", "/", "%"]), children).map(lambda t: f"({' '.join(t)})"),
        st.lists(children, min_size=2, max_size=4).map(lambda xs: "(" + " AND ".join(xs) + ")"),
        st.lists(children, min_size=2, max_size=4).map(lambda xs: "(" + " OR ".join(xs) + ")"),
        children.map(lambda x: f"(NOT ({x}))"),
        children.map(lambda x: f"-({x})"),
        st.tuples(children, children, children, st.booleans()).map(
            lambda t: f"({t[0]} {'NOT ' if t[3] else ''}BETWEEN {t[1]} AND {t[2]})"
        ),
        st.tuples(children, st.lists(children, min_size=1, max_size=3), st.booleans()).map(
            lambda t: f"({t[0]} {'NOT ' if t[2] else ''}IN ({', '.join(t[1])}))"
        ),
        st.tuples(children, st.sampled_from(["'a'", "'^z'", "'(?i)B'", "r'2.0'", r"'\d'"]), st.booleans()).map(
            lambda t: f"({t[0]} {'NOT ' if t[2] else ''}LIKE {t[1]})"
        ),
        st.tuples(children, st.sampled_from(["BEGINS", "ENDS"]), st.sampled_from(["'a'", "('ze', '1')"])).map(
            lambda t: f"({t[0]} {t[1]} WITH {t[2]})"
        ),
        st.tuples(children, st.sampled_from(["NULL", "NOT NULL", "NAN", "NOT NAN"])).map(
            lambda t: f"({t[0]} IS {t[1]})"
        ),
        st.tuples(children, children, children).map(lambda t: f"IF({t[0]}, {t[1]}, {t[2]})"),
        st.tuples(st.sampled_from(["UPPER", "LENGTH", "ABS", "ARRAY_COUNT", "ARRAY_SUM", "ROUND"]), children).map(
            lambda t: f"{t[0]}({t[1]})"
        ),
        two.map(lambda t: f"COALESCE({t[0]}, {t[1]})"),
        two.map(lambda t: f"CONCAT({t[0]}, {t[1]})"),
        two.map(lambda t: f"GREATEST({t[0]}, {t[1]})"),
    )


expressions = st.recursive(leaves, _combine, max_leaves=12)


def same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def _corpus(n: int, seed: int = 0) -> list[dict[str, Any]]:
    """``n`` messages of the shape :data:`messages` draws, from a seeded generator: every drawn
    expression is checked on all of them, which costs a fraction of drawing them one by one."""
    rnd = random.Random(seed)
    pool: list[Any] = [None, True, False, 0, 1, -3, 20, 2**63 - 1, 2**64 - 1, -(2**63), 0.5, -1.5, 2.0, 1e300]
    pool += [math.nan, "", "a", "B", "abc", "10", "2.0", "01", "zebra", "x y"]

    def value() -> Any:
        kind = rnd.random()
        if kind < 0.7:
            return rnd.choice(pool)
        if kind < 0.85:
            return [rnd.choice(pool) for _ in range(rnd.randint(0, 4))]
        return {"x": rnd.choice(pool)}

    return [
        {
            "a": value(),
            "b": value(),
            "s": value(),
            "arr": [rnd.choice(pool) for _ in range(rnd.randint(0, 4))],
            "obj": {"x": value()},
            "items": [{"q": rnd.choice(pool)} for _ in range(rnd.randint(0, 3))],
            "n": rnd.choice([rnd.randint(-5, 5), rnd.uniform(-5, 5)]),
        }
        for _ in range(n)
    ]


CORPUS = _corpus(40)


@settings(max_examples=1_500, deadline=None)
@given(expressions, messages)
def test_compiled_agrees_with_reference(text: str, message: dict[str, Any]) -> None:
    # each drawn expression on the drawn message (which Hypothesis shrinks) and on a fixed corpus:
    # 60k (expression, message) pairs, where drawing 10k pairs one by one took two minutes
    node = parse(text)
    compiled = CompiledFilter(text, node)
    for m in [message, *CORPUS]:
        expected = ref.evaluate(node, m)
        assert same(compiled.evaluate(m), expected), (text, m)
        assert bool(compiled.matches(m, None)) == ref.matches(node, m), (text, m)
