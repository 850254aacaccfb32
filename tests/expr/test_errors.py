"""Invalid input: one domain error type with a 1-based column and the offending token, and
nothing else escapes -- whatever the text."""

from __future__ import annotations

import contextlib
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sowdb.errors import ExpressionError, InvalidArgument
from sowdb.expr import compile_expression, compile_filter, parse_aggregation, parse_order_by, parse_select
from sowdb.expr.parser import MAX_DEPTH, parse

CASES = [
    # (text, column, token, words in the message)
    ("(/a = 1", 8, "", "unbalanced parenthesis"),
    ("/a = 1)", 7, ")", "unbalanced parenthesis"),
    ("((/a = 1)", 10, "", "unbalanced"),
    ("FOO(/a) = 1", 1, "FOO", "unknown function FOO"),
    ("UPPER(/a, /b) = 'X'", 1, "UPPER", "UPPER takes 1 argument"),
    ("SUBSTR('x')", 1, "SUBSTR", "SUBSTR takes 2 to 3"),
    ("IF(/a, 1)", 1, "IF", "IF takes 3"),
    ("SUM(/qty) > 10", 1, "SUM", "aggregate SUM is only allowed in a projection"),
    ("/a LIKE /b", 9, "/b", "LIKE pattern must be a string literal"),
    ("/a LIKE '('", 9, "(", "invalid LIKE pattern"),
    ("/a = 1e999", 6, "1e999", "number literal out of range"),
    ("/a = " + "9" * 400, 6, "9" * 37 + "...", "number literal out of range"),
    ("/a = 12abc", 6, "12abc", "bad number literal"),
    ("/a = 1.2.3", 6, "1.2.3", "bad number literal"),
    (r"/a = '\xZZ'", 7, r"\xZZ", "bad \\x escape"),
    ("/a = 'abc", 6, "'abc", "unterminated string"),
    ("/a = 1 /b = 2", 9, "b", "unknown word"),
    ("/a = 1 2", 8, "2", "unexpected input after the end"),
    ("/a = 1 = 2", 8, "=", "comparisons do not chain"),
    ("/a = ", 6, "", "expected an operand"),
    ("", 1, "", "empty expression"),
    ("/a IS 3", 7, "3", "expected NULL or NAN"),
    ("/a NOT 3", 8, "3", "expected BETWEEN"),
    ("/a BETWEEN 1 OR 2", 14, "OR", "expected AND"),
    ("/a IN 1", 7, "1", "expected '('"),
    ("/a BEGINS WITH (1)", 17, "1", "string literals"),
    ("/a = #", 6, "#", "unexpected character"),
    ("price > 3", 1, "price", "field paths start with '/'"),
]


@pytest.mark.parametrize(("text", "column", "token", "words"), CASES)
def test_invalid_filters_name_column_and_token(text: str, column: int, token: str, words: str) -> None:
    with pytest.raises(ExpressionError) as info:
        compile_filter(text)
    err = info.value
    assert isinstance(err, InvalidArgument)
    assert (err.column, err.token) == (column, token), err.message
    assert words in err.message
    assert f"column {column}" in err.message


def test_depth_is_bounded_with_a_position() -> None:
    parse("(" * (MAX_DEPTH - 1) + "1" + ")" * (MAX_DEPTH - 1))
    with pytest.raises(ExpressionError, match="nested deeper"):
        parse("(" * 500 + "1" + ")" * 500)
    with pytest.raises(ExpressionError, match="nested deeper"):
        parse(" + ".join(["1"] * 200))
    with pytest.raises(ExpressionError, match="nested deeper"):
        parse("NOT " * 200 + "TRUE")


def test_long_flat_or_chains_are_fine() -> None:
    text = " OR ".join(f"/sym = 'S{i}'" for i in range(2000))
    f = compile_filter(text)
    assert f.matches({"sym": "S1999"}, None)
    assert not f.matches({"sym": "S2000"}, None)


def test_huge_repetition_counts_are_refused() -> None:
    with pytest.raises(ExpressionError, match="invalid LIKE pattern"):
        compile_filter("/a LIKE '(a{1000}){1000}'")


def test_order_select_projection_errors_have_positions() -> None:
    with pytest.raises(ExpressionError) as info:
        parse_order_by("/a DESC, price")
    assert (info.value.column, info.value.token) == (10, "price")
    with pytest.raises(ExpressionError) as info:
        parse_order_by("/a SIDEWAYS")
    assert info.value.token == "SIDEWAYS"
    with pytest.raises(ExpressionError) as info:
        parse_select("[-/,+a]")
    assert (info.value.column, info.value.token) == (5, "+a")
    with pytest.raises(ExpressionError) as info:
        parse_aggregation("[/a]", "[/a, SUM(/q) AS total]")
    assert info.value.field == "projection"
    assert info.value.token == "total"
    with pytest.raises(ExpressionError, match="needs AS"):
        parse_aggregation("[/a]", "[/a, SUM(/q)]")
    with pytest.raises(ExpressionError, match="together"):
        parse_aggregation("", "[SUM(/q) AS /t]")
    with pytest.raises(ExpressionError, match="cannot be nested"):
        parse_aggregation("[/a]", "[SUM(SUM(/q)) AS /t]")


@settings(max_examples=3000)
@given(st.text(max_size=80))
def test_fuzz_arbitrary_text_only_raises_expression_error(text: str) -> None:
    start = time.perf_counter()
    for fn in (compile_filter, compile_expression, parse_order_by, parse_select):
        with contextlib.suppress(ExpressionError):
            fn(text)
    with contextlib.suppress(ExpressionError):
        parse_aggregation(text, text)
    assert time.perf_counter() - start < 5.0  # a hang detector; the machine is shared and noisy


TOKENS = [
    "/a",
    "/b[0]",
    "(",
    ")",
    "'x'",
    "1",
    "2.5",
    "AND",
    "OR",
    "NOT",
    "IN",
    "LIKE",
    "BETWEEN",
    "IS",
    "NULL",
    ",",
    "=",
    "<",
    "+",
    "*",
    "/",
    "UPPER(",
    "SUM(",
    "IF(",
    "r'",
    "[/x y]",
    "'(a+)+$'",
    "AS",
    "MOD",
]


@settings(max_examples=3000)
@given(st.lists(st.sampled_from(TOKENS), max_size=25))
def test_fuzz_token_soup_only_raises_expression_error(tokens: list[str]) -> None:
    text = " ".join(tokens)
    try:
        f = compile_filter(text)
    except ExpressionError:
        return
    f.matches({"a": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!", "b": [1]}, None)


NUMBERISH = ["9" * 25, "7" * 5000, "0" * 4400 + "1", "1" * 400 + ".5", "1e999", "18446744073709551616", "\u0661"]


@settings(max_examples=500)
@given(
    st.lists(
        st.one_of(st.sampled_from(NUMBERISH), st.sampled_from(TOKENS), st.sampled_from(["[", "]", "-"])), max_size=8
    )
)
def test_fuzz_long_numbers_only_raise_expression_error(parts: list[str]) -> None:
    text = " ".join(parts)
    for fn in (compile_filter, compile_expression, parse_order_by, parse_select):
        with contextlib.suppress(ExpressionError):
            fn(text)
        with contextlib.suppress(ExpressionError):
            fn("/a[" + text + "]")
    with contextlib.suppress(ExpressionError):
        parse_aggregation(text, text)


REGEX_PIECES = [*"()[]{}?*+|^$\\.-,:=!<>aAbB019&~", "(?", "(?<", "\\L<", "\\g<", "\\N{", "(?P", "{1,", "(?|"]
REGEX_PIECES += ["(?(", "\\p{", "(?V1)", "[[:", "(?i)", "(?aL)", "{99999}", "\\1", "(?#", "'", '"', "\\'", "r'"]


@settings(max_examples=2000)
@given(st.lists(st.sampled_from(REGEX_PIECES), max_size=10), st.sampled_from(["", "r"]))
def test_fuzz_like_and_regexp_replace_patterns_only_raise_expression_error(pieces: list[str], prefix: str) -> None:
    pattern = "".join(pieces)
    for text in (
        f"/s LIKE {prefix}'{pattern}'",
        f'/s NOT LIKE {prefix}"{pattern}"',
        f"REGEXP_REPLACE(/s, {prefix}'{pattern}', '\\1x') = 'y'",
        f"REGEXP_REPLACE(/s, /p, '{pattern}') = 'y'",
    ):
        try:
            f = compile_filter(text)
        except ExpressionError:
            continue
        f.matches({"s": "aAb1 x(", "p": pattern}, None)
