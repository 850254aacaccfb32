"""FILTERS.md, table-driven: every example of the page, then cases for each of its sections.

Each case is checked three ways: the compiled value, the compiled match, and the reference
evaluator, so a case pins the semantics and both evaluators at once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pytest

from sowdb.expr import compile_expression, compile_filter
from sowdb.expr import reference as ref
from sowdb.expr.parser import parse
from sowdb.expr.values import truthy

TRUE, FALSE, NULL, NO_MATCH = "TRUE", "FALSE", "NULL", "NO_MATCH"

Case = tuple[dict[str, Any], str, Any]
"""A message, an expression, and what it evaluates to (a value, or TRUE, FALSE, NULL, NO_MATCH)."""


def check(message: dict[str, Any], expression: str, expected: Any) -> None:
    f = compile_filter(expression)
    got = f.evaluate(message)
    node = parse(expression)
    assert _same(ref.evaluate(node, message), got), (expression, message)
    assert bool(f.matches(message, None)) == truthy(got) == ref.matches(node, message)
    if expected == TRUE:
        assert got is True or (truthy(got) and type(got) is not bool), got
    elif expected == FALSE:
        assert got is False, got
    elif expected == NULL:
        assert got is None, got
    elif expected == NO_MATCH:
        assert not truthy(got), got
    elif isinstance(expected, float) and math.isnan(expected):
        assert isinstance(got, float), got
        assert math.isnan(got), got
    else:
        assert got == expected, (got, expected)
        assert type(got) is type(expected), (got, expected)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b


# The "Examples" table of FILTERS.md, row by row.
FILTERS_MD_EXAMPLES: list[Case] = [
    ({"a": 1, "b": "47"}, "/b = 47", TRUE),
    ({"p": "01"}, "/p = '1'", FALSE),
    ({}, "10 < 'Crank It Up'", TRUE),
    ({}, "'' IS NULL", TRUE),
    ({"x": 1}, "/x = 1 OR /missing = 1", TRUE),
    ({"x": 1}, "/missing = 1 OR /x = 1", NO_MATCH),
    ({"x": 2}, "/x = 1 AND /missing = 1", FALSE),
    (
        {"employeeCategory": "staff"},
        "COALESCE(/userCategory, /employeeCategory, 'restricted') != 'restricted'",
        TRUE,
    ),
    ({"data": [1, 2, 3, "zebra", 5]}, "/data = 'zebra'", TRUE),
    ({"data": [1, 2, 3, "zebra", 5]}, '/data[3] = "zebra"', TRUE),
    ({"data": [1, 2, 3, "zebra", 5]}, "3 IN (/data)", TRUE),
    ({}, "-5 % 3", -2),
    ({"a": 1, "b": 0, "c": 0}, "/a = 1 OR /b = 1 AND /c = 1", TRUE),
    ({"6": 100, "14": 5}, "/6 * /14 < 1000", TRUE),
    ({"A": 100}, "/A BETWEEN 0 AND 100", TRUE),
    ({"customer": "bob"}, "/customer IN ('Bob', 'Phil')", FALSE),
    ({"state": "Mississippi"}, r"/state LIKE '(.)\1'", TRUE),
    ({"client": {"country": "us"}}, '/client/country LIKE "(?i)^us$"', TRUE),
    ({"Language": "C++"}, "/Language LIKE r'C++'", TRUE),
    ({"state": "North Dakota"}, "/state BEGINS WITH ('North', 'South')", TRUE),
    ({"eventLevels": "warn,critical"}, 'INSTR(/eventLevels, "critical")', 6),
    ({}, 'SUBSTR("fandango", -4, 2) == "an"', TRUE),
    ({}, "REGEXP_REPLACE('fandango','n.*n', 'r') == 'fargo'", TRUE),
    ({"qty": 600, "sym": "MSFT"}, "IF(/qty > 500 AND /sym = 'MSFT', 1, 0)", 1),
]


@pytest.mark.parametrize(("message", "expression", "expected"), FILTERS_MD_EXAMPLES)
def test_filters_md_examples(message: dict[str, Any], expression: str, expected: Any) -> None:
    check(message, expression, expected)


SYNTAX: list[Case] = [
    ({"a": {"b": 3}}, "/a/b = 3", TRUE),
    ({"a": 6, "b": 3}, "/a / /b", 2),
    ({"a": 6}, "/a /2", 3),
    ({}, "10/4", 2),
    ({"55": 1}, "/55 = 1", TRUE),
    ({"Name With Spaces": "x"}, "[/Name With Spaces] = 'x'", TRUE),
    ({"d": [10, 20]}, "/d[1] = 20", TRUE),
    ({"d": [10, 20]}, "/d[5] IS NULL", TRUE),
    ({"Price": 1}, "/price IS NULL", TRUE),
    ({}, "31.4e-1 = 3.14", TRUE),
    ({}, "98.6 > 98", TRUE),
    ({}, r"'a\tb' = 'a' + 'b'", FALSE),
    ({}, r"LENGTH('a\tb')", 3),
    ({}, r"'\x41' = 'A'", TRUE),
    ({}, r"'\q' = 'q'", TRUE),
    ({}, "LENGTH(r'a\\tb')", 4),
    ({}, "\"it's\" = 'it\\'s'", TRUE),
    ({}, "TRUE = 1", TRUE),
    ({}, "FALSE = 0", TRUE),
    ({}, "true and TRUE", TRUE),
    ({"x": 1}, "/x between 0 and 2", TRUE),
    ({}, "upper('a') = 'A'", TRUE),
    ({"f": None}, "NOT /f IS NULL", FALSE),
    ({"f": 1}, "NOT /f IS NULL", TRUE),
    ({}, "1 + 2 * 3", 7),
    ({}, "(1 + 2) * 3", 9),
    ({}, "7 MOD 4", 3),
    ({}, "- -3", 3),
    ({}, "-(2)", -2),
]

TYPES: list[Case] = [
    ({"a": "2.000"}, "/a <> '2.0'", TRUE),
    ({"a": "2.000"}, "/a = 2", TRUE),
    ({}, "2 = 2.0", TRUE),
    ({}, "10 < '2'", FALSE),
    ({"s": "abc"}, "/s > 1000000", TRUE),
    ({"s": "abc"}, "/s = 1", FALSE),
    ({"s": "abc"}, "/s != 1", TRUE),
    ({"b": True}, "/b = 1", TRUE),
    ({"b": False}, "/b = 0", TRUE),
    ({"o": {"x": 1}}, "/o = 1", NULL),
    ({"o": {"x": 1}}, "/o IS NULL", TRUE),
    ({"e": []}, "/e IS NULL", TRUE),
    ({"e": ""}, "/e IS NULL", TRUE),
    ({"n": None}, "/n IS NULL", TRUE),
    ({"s": "7"}, "/s + 1", 8),
    ({"s": "x"}, "/s + 1", math.nan),
    ({}, "1 / 5", 0),
    ({}, "1.0 / 5", 0.2),
    ({}, "-7 / 2", -3),
    ({}, "7 / -2", -3),
    ({}, "-5 % 3", -2),
    ({}, "5 % -3", 2),
    ({}, "5.5 % 2", 1.5),
    ({}, "1 / 0", NULL),
    ({}, "1 % 0", NULL),
    ({}, "NAN_VALUE() + 1", math.nan),
    ({}, "NAN_VALUE() IS NAN", TRUE),
    ({}, "1 IS NAN", FALSE),
    ({}, "1 + NULL", NULL),
    ({"b": True}, "/b + 1", 2),
    ({"a": 1.5}, "/a * 2", 3.0),
    ({"a": [4, 5]}, "/a + 1", 5),
]

NULL_LOGIC: list[Case] = [
    ({}, "/a = NULL", NULL),
    ({}, "/a != NULL", NULL),
    ({}, "TRUE OR NULL", TRUE),
    ({}, "FALSE AND NULL", FALSE),
    ({}, "NULL OR TRUE", NULL),
    ({}, "NULL AND FALSE", NULL),
    ({}, "NOT NULL", NULL),
    ({}, "NOT (1 = 1)", FALSE),
    ({}, "NOT (1 = 2)", TRUE),
    ({}, "/missing IS NOT NULL", FALSE),
    ({}, "2", TRUE),
    ({}, "0", NO_MATCH),
    ({}, "'yes'", NO_MATCH),
    ({}, "1 AND 2", 2),
    ({}, "0 OR 3", 3),
    ({}, "FALSE OR FALSE", FALSE),
]

OPERATORS: list[Case] = [
    ({"x": 5}, "/x == 5", TRUE),
    ({"x": 5}, "/x <> 4", TRUE),
    ({"x": 5}, "/x >= 5 AND /x <= 5", TRUE),
    ({"x": 5}, "/x NOT BETWEEN 6 AND 9", TRUE),
    ({"x": 5}, "/x BETWEEN 5 AND 5", TRUE),
    ({"x": None}, "/x BETWEEN 1 AND 9", NULL),
    ({"x": "b"}, "/x IN ('a', 'b')", TRUE),
    ({"x": "c"}, "/x NOT IN ('a', 'b')", TRUE),
    ({"x": None}, "/x NOT IN ('a', 'b')", NULL),
    ({"x": 1}, "/x IN (NULL, 2)", FALSE),
    ({"x": 3, "y": 2}, "/x IN (/y + 1, 9)", TRUE),
    ({"x": "47"}, "/x IN (47)", TRUE),
    ({"x": 2.0}, "/x IN (1, 2)", TRUE),
    ({"s": "zebra"}, "/s LIKE 'z'", TRUE),
    ({"s": "Zebra"}, "/s LIKE 'z'", FALSE),
    ({"s": "Zebra"}, "/s LIKE '(?i)z'", TRUE),
    ({"s": "Zebra"}, "/s NOT LIKE '^Z'", FALSE),
    ({"n": 123}, "/n LIKE '^12'", TRUE),
    ({"s": "a.c"}, r"/s LIKE 'a\.c'", TRUE),
    ({"s": "abc"}, r"/s LIKE 'a\.c'", FALSE),
    ({"s": "abc"}, "/s LIKE r'a.c'", FALSE),
    ({"s": "x a.c"}, "/s LIKE r'a.c'", TRUE),
    ({"s": "North"}, "/s ENDS WITH ('th')", TRUE),
    ({"s": "North"}, "/s NOT BEGINS WITH ('No')", FALSE),
    ({"s": "North"}, "/s BEGINS WITH 'no'", FALSE),
    ({"qty": 100}, "IF(/qty > 500, 'big', 'small')", "small"),
    ({}, "IF(NULL, 1, 2)", 2),
]

ARRAYS: list[Case] = [
    ({"tags": ["x", "y"]}, "/tags = 'x'", TRUE),
    ({"tags": ["x", "y"]}, "/tags = 'z'", FALSE),
    ({"a": [1, 2], "b": [3, 2]}, "/a = /b", TRUE),
    ({"a": [1, 2], "b": [3, 4]}, "/a = /b", FALSE),
    ({"a": [1, 9]}, "/a > 5", TRUE),
    ({"a": [1, 9]}, "/a BETWEEN 8 AND 10", TRUE),
    ({"a": ["ab", "cd"]}, "/a LIKE '^c'", TRUE),
    ({"a": ["ab", "cd"]}, "/a BEGINS WITH ('c')", TRUE),
    ({"a": ["ab", "cd"]}, "/a ENDS WITH ('b')", TRUE),
    ({"a": ["ab", "cd"]}, "/a IN ('cd')", TRUE),
    ({"a": [10, 20]}, "/a * 2", 20),
    ({"a": ["ab", "cd"]}, "UPPER(/a)", "AB"),
    ({"items": [{"qty": 1}, {"qty": 7}]}, "/items/qty = 7", TRUE),
    ({"items": [{"qty": 1}, {"qty": 7}]}, "ARRAY_COUNT(/items/qty)", 2),
    ({"items": [{"qty": 1}, {}]}, "ARRAY_COUNT(/items/qty)", 1),
    ({"x": 1, "list": [3, 1]}, "/x IN (/list)", TRUE),
    ({"e": []}, "/e = 1", NULL),
]

FUNCTIONS: list[Case] = [
    ({}, "CONCAT('a', 1, 'b', 2.5)", "a1b2.5"),
    ({}, "CONCAT('n=', 2.0)", "n=2"),
    ({}, "CONCAT('a', /missing)", "a"),
    ({}, "UPPER('abc')", "ABC"),
    ({}, "LOWER('ABC')", "abc"),
    ({}, "LENGTH('héllo')", 5),
    ({}, "LENGTH(12345)", 5),
    ({}, "LENGTH(/missing)", NULL),
    ({}, "INSTR('abc', 'z')", 0),
    ({}, "INSTR_I('ABC', 'bc')", 2),
    ({}, "STREQUAL_I('AbC', 'aBc')", 1),
    ({}, "STREQUAL_I('AbC', 'x')", 0),
    ({}, "REPLACE('banana', 'an', 'AN')", "bANANa"),
    ({}, "REPLACE('banana', 'a', '')", "bnn"),
    ({}, r"REGEXP_REPLACE('a1b22', '\d+', '#')", "a#b#"),
    ({}, "SUBSTR('fandango', 2)", "andango"),
    ({}, "SUBSTR('fandango', 2, 3)", "and"),
    ({}, "SUBSTR('fandango', 20)", NULL),
    ({}, "LEFT('fandango', 3)", "fan"),
    ({}, "RIGHT('fandango', 3)", "ngo"),
    ({}, "TRIM('  x  ')", "x"),
    ({}, "LTRIM('xxaxx', 'x')", "axx"),
    ({}, "RTRIM('xxaxx', 'x')", "xxa"),
    ({}, "REVERSE('abc')", "cba"),
    ({}, "ABS(-3)", 3),
    ({}, "ABS(-3.5)", 3.5),
    ({}, "CEILING(1.2)", 2),
    ({}, "FLOOR(-1.2)", -2),
    ({}, "ROUND(2.5)", 3.0),
    ({}, "ROUND(2.345, 2)", 2.35),
    ({}, "ROUND(1234, -2)", 1200),
    ({}, "ROUND(7)", 7),
    ({}, "SIGN(-4)", -1),
    ({}, "SIGN(0)", 0),
    ({}, "SQRT(16)", 4.0),
    ({}, "SQRT(-1)", math.nan),
    ({}, "POWER(2, 10)", 1024),
    ({}, "POWER(2, 0.5) > 1.41", TRUE),
    ({}, "EXP(0)", 1.0),
    ({}, "LN(1)", 0.0),
    ({}, "LOG10(1000)", 3.0),
    ({}, "LOG2(8)", 3.0),
    ({}, "LN(0)", math.nan),
    ({}, "GREATEST(3, 9, 4)", 9),
    ({}, "LEAST(3, 9, 4)", 3),
    ({}, "GREATEST(3, NULL)", 3),
    ({}, "WIDTH_BUCKET(5, 0, 10, 5)", 3),
    ({}, "WIDTH_BUCKET(-1, 0, 10, 5)", 0),
    ({}, "WIDTH_BUCKET(10, 0, 10, 5)", 6),
    ({"a": [1, None, 2]}, "ARRAY_COUNT(/a)", 3),
    ({"a": [1, None, 2]}, "ARRAY_SUM(/a)", 3),
    ({"a": [3, 1, 2]}, "ARRAY_MIN(/a)", 1),
    ({"a": [3, 1, 2]}, "ARRAY_MAX(/a)", 3),
    ({"a": ["x", 1, "y"]}, "ARRAY_TO_STRING(/a, '-')", "x-1-y"),
    ({"a": ["x", "y"]}, "ARRAY_TO_STRING(/a, ',')", "x,y"),
    ({}, "COALESCE(/a, '', NULL, 5)", 5),
    ({}, "COALESCE(/a)", NULL),
    ({}, "TRUE_VALUE()", TRUE),
    ({}, "FALSE_VALUE()", FALSE),
    ({}, "CHAR_VALUE(65)", "A"),
    ({}, "STRFTIME('%Y-%m-%d', 86400)", "1970-01-02"),
    ({}, "STRPTIME('1970-01-02', '%Y-%m-%d')", 86400),
    ({}, "STRPTIME('nope', '%Y')", NULL),
    ({}, "UNIX_TIMESTAMP() > 1600000000", TRUE),
    ({}, "SOW_KEY()", NULL),
]


@pytest.mark.parametrize(
    ("message", "expression", "expected"),
    SYNTAX + TYPES + NULL_LOGIC + OPERATORS + ARRAYS + FUNCTIONS,
)
def test_sections(message: dict[str, Any], expression: str, expected: Any) -> None:
    check(message, expression, expected)


@dataclass
class Meta:
    topic: str
    sow_key: str
    bookmark: int
    timestamp: float


def test_message_functions_read_the_record_metadata() -> None:
    meta = Meta("orders", "k1", 42, 1700000000.5)
    f = compile_filter("SOW_KEY() = 'k1' AND TOPIC_NAME() = 'orders' AND BOOKMARK() > 41")
    assert f.uses_metadata
    assert f.matches({}, meta)
    assert not f.matches({}, None)
    assert compile_expression("LAST_UPDATED()").evaluate({}, meta) == 1700000000.5


def test_catastrophic_like_is_bounded() -> None:
    import time

    f = compile_filter("/s LIKE '(x+x+)+y' OR /s LIKE '^(a|aa)+$'")
    start = time.perf_counter()
    assert not f.matches({"s": "x" * 40 + "a" * 40 + "!"}, None)
    assert time.perf_counter() - start < 2
