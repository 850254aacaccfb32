"""Tokenizer for the filter language.

One master regular expression recognises every token; the lexer is context-sensitive in one
place, as FILTERS.md requires: ``/`` starts a field path where an operand is expected and is
division where an operator is expected, so ``/a/b`` is a path, ``/a / /b`` and ``10/2`` divide.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from sowdb.errors import ExpressionError
from sowdb.expr.numeric import INT64_MAX, integer

NUMBER, STRING, PATH, WORD, OP, EOF = "number", "string", "path", "word", "op", "eof"


class Token(NamedTuple):
    kind: str
    key: str  # what the parser dispatches on: the operator, the upper-cased word, or the kind
    text: str  # as written (a string's body between the quotes, untouched)
    pos: int  # 0-based offset; errors report pos + 1
    value: object = None  # NUMBER: int | float; STRING: decoded text; PATH: tuple of steps
    raw: bool = False  # STRING written as r'...'

    @property
    def column(self) -> int:
        return self.pos + 1


_new = tuple.__new__  # builds a Token without NamedTuple's Python-level __new__ (hot in compile)

# Our own fixed pattern, so the stdlib engine (faster per call than ``regex``) is safe here.
_MASTER = re.compile(
    r"""
    \s*(?:
    (?P<num>(?:[0-9]+(?P<frac>\.[0-9]*)?|(?P<lead>\.[0-9]+))(?P<exp>[eE][+-]?[0-9]+)?)
  | (?P<str>(?P<r>[rR])?(?:'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"))
  | (?P<path>(?:\[[^\[\]/\s]+\]\.)?(?:/[\w$@]+|\[/[^\]]+\])(?:\[\s*[0-9]+\s*\]|/[\w$@]+)*)
  | (?P<word>[A-Za-z_]\w*)
  | (?P<op>==|!=|<>|<=|>=|[=<>+\-*/%(),])
  | (?P<end>\Z)
    )""",
    re.VERBOSE | re.DOTALL,
)
_STEPS = re.compile(r"\[/([^\]]+)\]|/([\w$@]+)|\[\s*([0-9]+)\s*\]")
_ESCAPE = re.compile(r"\\(x[0-9a-fA-F]{2}|x|.)", re.DOTALL)
_ESCAPES = {"n": "\n", "t": "\t"}  # FILTERS.md: any other \c is c, so '\r' is 'r'
# PREVIOUS ends ``/a OF PREVIOUS`` (EN-2), so ``/a OF PREVIOUS / 2`` divides
_OPERAND_END_WORDS = frozenset({"NULL", "NAN", "TRUE", "FALSE", "PREVIOUS"})


def _unescape(body: str, pos: int) -> str:
    def repl(m: re.Match[str]) -> str:
        e = m.group(1)
        if e[0] == "x":
            if len(e) != 3:
                bad = body[m.start() : m.start() + 4]
                raise ExpressionError("bad \\x escape in string literal", column=pos + m.start() + 2, token=bad)
            return chr(int(e[1:], 16))
        return _ESCAPES.get(e, e)

    return _ESCAPE.sub(repl, body) if "\\" in body else body


def _index(digits: str) -> int:
    """An array index as written; one beyond any list's length is kept at INT64_MAX (it picks
    nothing, as any index out of range), so thousands of digits never reach ``int()``."""
    digits = digits.lstrip("0")
    return int(digits or "0") if len(digits) < 19 else INT64_MAX


def _shown(token: str) -> str:
    """A token as an error names it: a very long one is cut to its first 40 characters."""
    return token if len(token) <= 40 else token[:37] + "..."


def _steps(text: str) -> tuple[str | int, ...]:
    """A path's steps; a joined view's ``[topic]./field`` (V-2) starts with the step ``[topic]``,
    the key under which a joined row holds that topic's record, which no plain path can name
    (a plain step is a word, and ``[/name]`` keeps no closing bracket)."""
    if text[0] == "[" and text[1] != "/":
        end = text.index("].") + 1
        return (text[:end], *_steps(text[end + 1 :]))
    return tuple(
        _index(m.group(3)) if m.group(3) is not None else (m.group(1) or m.group(2)) for m in _STEPS.finditer(text)
    )


def tokenize(text: str) -> list[Token]:
    """The tokens of ``text``, ending with an EOF token.

    Raises:
        ExpressionError: an unexpected character, a bad number or string literal.
    """
    out: list[Token] = []
    append = out.append
    match = _MASTER.match
    i, n = 0, len(text)
    after_operand = False
    while True:
        m = match(text, i)
        if m is None:
            i += len(text[i:]) - len(text[i:].lstrip())
            c = text[i]
            if c in "'\"" or (c in "rR" and text[i + 1 : i + 2] in ("'", '"')):
                raise ExpressionError("unterminated string literal", column=i + 1, token=text[i : i + 20])
            if c == "[":
                raise ExpressionError("unterminated or empty [/field name]", column=i + 1, token=text[i : i + 20])
            raise ExpressionError("unexpected character", column=i + 1, token=c)
        kind = m.lastgroup or "end"
        if kind == "end":
            break
        i, end = m.span(kind)
        s = text[i:end]
        if kind == "path":
            if after_operand:  # division, not a path: re-scan what follows the '/'
                if s[0] == "/":
                    append(_new(Token, (OP, "/", "/", i, None, False)))
                    i += 1
                    after_operand = False
                    continue
                raise ExpressionError("unexpected '[' after an operand", column=i + 1, token="[")
            append(_new(Token, (PATH, PATH, s, i, _steps(s), False)))
            after_operand = True
        elif kind == "word":
            if m.group("r") is None and s in ("r", "R") and text[end : end + 1] in ("'", '"'):
                raise ExpressionError("unterminated string literal", column=i + 1, token=text[i : i + 20])
            key = s.upper()
            append(_new(Token, (WORD, key, s, i, None, False)))
            after_operand = key in _OPERAND_END_WORDS
        elif kind == "op":
            append(_new(Token, (OP, s, s, i, None, False)))
            after_operand = s == ")"
        elif kind == "num":
            if end < n and (text[end].isalnum() or text[end] in "_."):
                bad = re.compile(r"[\w.]+").match(text, i)
                raise ExpressionError("bad number literal", column=i + 1, token=_shown(bad.group() if bad else s))
            # integers up to 2**64 - 1 (unsigned beyond the signed maximum); beyond, a float
            value: int | float
            if m.group("frac") is None and m.group("lead") is None and m.group("exp") is None:
                value = integer(s)
            else:
                value = float(s)
            if value == float("inf"):
                raise ExpressionError("number literal out of range (beyond 1.8e308)", column=i + 1, token=_shown(s))
            append(_new(Token, (NUMBER, NUMBER, s, i, value, False)))
            after_operand = True
        else:  # str
            raw = m.group("r") is not None
            body = s[2:-1] if raw else s[1:-1]
            decoded = body if raw else _unescape(body, i)
            append(_new(Token, (STRING, STRING, body, i, decoded, raw)))
            after_operand = True
        i = end
    append(Token(EOF, EOF, "", n))
    return out
