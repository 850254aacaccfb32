"""Details FILTERS.md states explicitly, each as the page states it (issue 14)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from sowdb.errors import ExpressionError
from sowdb.expr import compile_filter
from tests.expr.test_semantics import NULL, check


@pytest.mark.parametrize(
    ("message", "expression", "expected"),
    [
        ({"a": [1, None, 2]}, "ARRAY_TO_STRING(/a, '-', 'N/A')", "1-N/A-2"),
        ({"a": [1, None, 2]}, "ARRAY_TO_STRING(/a, '-')", "1-2"),
        ({"a": ["x", "", [], {"k": 1}, "y"]}, "ARRAY_TO_STRING(/a, ',', '?')", "x,?,?,?,y"),
        ({"a": [None, None]}, "ARRAY_TO_STRING(/a, ',', '0')", "0,0"),
        ({"a": [None, None]}, "ARRAY_TO_STRING(/a, ',')", NULL),
        ({"a": [1, None]}, "ARRAY_TO_STRING(/a, ',', /missing)", "1"),
        ({"a": [True, 2.0]}, "ARRAY_TO_STRING(/a, ' ', 'x')", "true 2"),
        ({"a": "solo"}, "ARRAY_TO_STRING(/a, ',', 'x')", "solo"),
        ({}, "ARRAY_TO_STRING(/a, ',', 'x')", NULL),
        ({"a": []}, "ARRAY_TO_STRING(/a, ',', 'x')", NULL),
    ],
)
def test_array_to_string_takes_a_null_text(message: dict[str, Any], expression: str, expected: Any) -> None:
    check(message, expression, expected)


@pytest.mark.parametrize("text", ["ARRAY_TO_STRING(/a)", "ARRAY_TO_STRING(/a, ',', 'x', 'y')"])
def test_array_to_string_takes_two_or_three_arguments(text: str) -> None:
    with pytest.raises(ExpressionError, match="ARRAY_TO_STRING takes 2 to 3 argument"):
        compile_filter(text)


@pytest.mark.parametrize(
    ("message", "expression", "expected"),
    [
        ({}, "GREATEST('a', 'b')", math.nan),
        ({}, "LEAST('a', 'b')", math.nan),
        ({}, "GREATEST(NULL)", math.nan),
        ({}, "LEAST(/missing, NULL, '')", math.nan),
        ({}, "GREATEST(NAN_VALUE())", math.nan),
        ({"o": {"x": 1}}, "GREATEST(/o)", math.nan),
        ({}, "GREATEST(3, 'zebra', 1)", 3),
        ({}, "LEAST('zebra', 3, 1)", 1),
        ({}, "GREATEST('10', 9)", 10),
        ({}, "LEAST('10', 9.5)", 9.5),
        ({}, "GREATEST(2, NAN_VALUE())", 2),
        ({}, "LEAST(NAN_VALUE(), 2)", 2),
        ({}, "GREATEST(TRUE, 0)", 1),
        ({"a": [7, 100]}, "GREATEST(/a, 5)", 7),
        ({}, "GREATEST(1, 2.5)", 2.5),
        ({}, "GREATEST(3, NULL)", 3),
    ],
)
def test_greatest_and_least_are_numeric_and_nan_without_a_number(
    message: dict[str, Any], expression: str, expected: Any
) -> None:
    check(message, expression, expected)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        (r"'a\nb'", "a\nb"),
        (r"'a\tb'", "a\tb"),
        (r"'\x41\x7a'", "Az"),
        (r"'\r'", "r"),  # any other \c is c: only \n, \t and \xHH are escapes
        (r"'\0'", "0"),
        (r"'\b\f\v'", "bfv"),
        (r"'\\'", "\\"),
        (r"'it\'s'", "it's"),
        (r'"\""', '"'),
        (r"r'\r\n'", r"\r\n"),
    ],
)
def test_string_escapes_are_n_t_and_xhh_only(expression: str, expected: str) -> None:
    check({}, expression, expected)
