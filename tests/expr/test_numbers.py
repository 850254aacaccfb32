"""Numbers at the edges (FILTERS.md, "Literals" and "Arithmetic"; issue 14).

Integers are 64-bit: signed, or unsigned up to 2**64 - 1 -- the range orjson decodes JSON
integers into. A number beyond that range is a float, as orjson reads the same JSON number, and
a literal beyond the float range is refused; nothing here may raise anything but
ExpressionError, whatever the length of the digits.
"""

from __future__ import annotations

import math

import orjson
import pytest

from sowdb.errors import ExpressionError
from sowdb.expr import compile_expression, parse_aggregation
from sowdb.expr.values import parse_number
from tests.expr.test_semantics import FALSE, TRUE, check

U64_MAX = 2**64 - 1
I64_MAX = 2**63 - 1
I64_MIN = -(2**63)


@pytest.mark.parametrize(
    ("message", "expression", "expected"),
    [
        ({}, "18446744073709551615", U64_MAX),
        ({}, "9223372036854775808", I64_MAX + 1),
        ({}, "18446744073709551615 > 9223372036854775807", TRUE),
        ({}, "9223372036854775808 = 9223372036854775807 + 1", TRUE),
        ({"a": U64_MAX}, "/a = 18446744073709551615", TRUE),
        ({"a": U64_MAX - 1}, "/a < 18446744073709551615", TRUE),
        ({"a": "18446744073709551615"}, "/a = 18446744073709551615", TRUE),
        ({"a": [1, U64_MAX]}, "/a IN (18446744073709551615)", TRUE),
        ({"a": 1}, "/a < 18446744073709551615", TRUE),
        ({"a": -1}, "/a > 18446744073709551615", FALSE),
        ({}, "-9223372036854775808", I64_MIN),
        ({}, "CONCAT(18446744073709551615)", "18446744073709551615"),
    ],
)
def test_unsigned_64_bit_literals_compare_as_numbers(
    message: dict[str, object], expression: str, expected: object
) -> None:
    check(message, expression, expected)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("18446744073709551616", 18446744073709551616.0),
        ("99999999999999999999", 1e20),
        ("-18446744073709551616", -18446744073709551616.0),
        ("-9223372036854775809", -9223372036854775809.0),
        ("1" + "0" * 300, 1e300),
    ],
)
def test_integer_literals_beyond_64_bits_are_floats(text: str, value: float) -> None:
    got = compile_expression(text).evaluate({})
    assert type(got) is float
    assert got == value
    # the same text as JSON data decodes to the same float (orjson), so they are equal
    assert compile_expression(f"/a = {text}").evaluate({"a": value}) is True


@pytest.mark.parametrize("digits", [400, 4300, 5000, 99_000])
def test_integer_literals_of_thousands_of_digits_are_a_clear_error(digits: int) -> None:
    text = "/a = " + "7" * digits
    with pytest.raises(ExpressionError) as info:
        compile_expression(text)
    err = info.value
    assert err.column == 6
    assert err.token.startswith("777")
    assert len(err.token) <= 40
    assert "out of range" in err.message


def test_leading_zeros_do_not_count_as_digits() -> None:
    assert compile_expression("0" * 5000 + "12").evaluate({}) == 12
    assert parse_number("0" * 5000 + "12") == 12


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1" * 5000, math.inf),
        ("-" + "1" * 5000, -math.inf),
        ("1" * 5000 + ".5", math.inf),
        ("0." + "0" * 5000 + "1", 0.0),
        ("18446744073709551615", U64_MAX),
        ("18446744073709551616", 18446744073709551616.0),
        ("-9223372036854775808", I64_MIN),
        ("-9223372036854775809", -9223372036854775809.0),
    ],
)
def test_parse_number_never_raises_and_follows_the_64_bit_range(text: str, expected: float) -> None:
    got = parse_number(text)
    assert got == expected
    assert type(got) is type(expected)


def test_strings_of_thousands_of_digits_in_data_compare_and_compute() -> None:
    huge = "9" * 5000
    check({"a": huge}, "/a > 1", TRUE)
    check({"a": huge}, "/a + 1", math.inf)
    check({"a": huge}, "/a = 'x'", FALSE)
    check({"a": "-" + huge}, "/a < 1", TRUE)


def test_only_ascii_digits_make_numbers() -> None:
    # U+0661 U+0662 are Arabic-Indic digits: text, not the number 12
    check({"a": "\u0661\u0662"}, "/a = 12", FALSE)
    check({"a": "\u0661\u0662"}, "/a + 0", math.nan)
    with pytest.raises(ExpressionError):
        compile_expression("/a = \u0661\u0662")


def test_array_index_of_thousands_of_digits_is_out_of_range() -> None:
    f = compile_expression("/a[" + "9" * 5000 + "] IS NULL")
    assert f.evaluate({"a": [1, 2]}) is True


@pytest.mark.parametrize(
    ("message", "expression", "expected"),
    [
        ({"a": U64_MAX}, "/a + 1", float(2**64)),
        ({"a": U64_MAX}, "/a * 2", float(2**65)),
        ({"a": I64_MIN}, "/a - 1", float(I64_MIN - 1)),
        ({"a": U64_MAX}, "-/a", -float(U64_MAX)),
        ({}, "-18446744073709551615", -float(U64_MAX)),
        ({"a": U64_MAX, "b": U64_MAX}, "/a * /b", float(U64_MAX) * float(U64_MAX)),
        ({"a": U64_MAX}, "/a + 0", U64_MAX),
        ({"a": I64_MIN}, "/a / -1", 2**63),
        ({}, "CEILING(1e300)", 1e300),
        ({}, "FLOOR(-1e20)", -1e20),
        ({}, "CEILING(1e18)", 10**18),
        ({}, "ROUND(18446744073709551615, -1)", 18446744073709551620.0),
        ({"a": [U64_MAX, U64_MAX]}, "ARRAY_SUM(/a)", float(2 * U64_MAX)),
    ],
)
def test_integer_results_beyond_64_bits_are_floats(
    message: dict[str, object], expression: str, expected: object
) -> None:
    check(message, expression, expected)


def test_sums_beyond_64_bits_are_floats_so_results_stay_json() -> None:
    # eleven nanosecond timestamps add up past 2**64 - 1, which orjson cannot write
    ns = 1_700_000_000_000_000_000
    agg = parse_aggregation("[/g]", "[/g, SUM(/ns) AS /total, SUM(/ns * 2) AS /twice, AVG(/ns) AS /mean]")
    rows = agg.run([({"g": 1, "ns": ns}, None) for _ in range(11)])
    assert rows == [{"g": 1, "total": float(11 * ns), "twice": float(22 * ns), "mean": float(ns)}]
    orjson.dumps(rows)
    small = parse_aggregation("[/g]", "[/g, SUM(/ns) AS /total]").run([({"g": 1, "ns": ns}, None)] * 2)
    assert small == [{"g": 1, "total": 2 * ns}]
