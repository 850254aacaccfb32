"""Tokenizer for the filter language.

One master regular expression recognises every token; the lexer is context-sensitive in one
place, as FILTERS.md requires: ``/`` starts a field path where an operand is expected and is
division where an operator is expected, so ``/a/b`` is a path, ``/a / /b`` and ``10/2`` divide.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from sowdb.errors import ExpressionError

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


MAX_INT = 2**63 - 1
_new = tuple.__new__  # builds a Token without NamedTuple's Python-level __new__ (hot in compile)

# Our own fixed pattern, so the stdlib engine (faster per call than ``regex``) is safe here.
_MASTER = re.compile(
    r"""
    \s*(?:
    (?P<num>(?:\d+(?P<frac>\.\d*)?|(?P<lead>\.\d+))(?P<exp>[eE][+-]?\d+)?)
  | (?P<str>(?P<r>[rR])?(?:'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"))
  | (?P<path>(?:/[\w$@]+|\[/[^\]]+\])(?:\[\s*\d+\s*\]|/[\w$@]+)*)
  | (?P<word>[A-Za-z_]\w*)
  | (?P<op>==|!=|<>|<=|>=|[=<>+\-*/%(),])
  | (?P<end>\Z)
    )""",
    re.VERBOSE | re.DOTALL,
)
_STEPS = re.compile(r"\[/([^\]]+)\]|/([\w$@]+)|\[\s*(\d+)\s*\]")
_ESCAPE = re.compile(r"\\(x[0-9a-fA-F]{2}|x|.)", re.DOTALL)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0"}
_OPERAND_END_WORDS = frozenset({"NULL", "NAN", "TRUE", "FALSE"})


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


def _steps(text: str) -> tuple[str | int, ...]:
    return tuple(
        int(m.group(3)) if m.group(3) is not None else (m.group(1) or m.group(2)) for m in _STEPS.finditer(text)
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
                raise ExpressionError("bad number literal", column=i + 1, token=bad.group() if bad else s)
            value: int | float
            if m.group("frac") is None and m.group("lead") is None and m.group("exp") is None:
                value = int(s)
                if value > MAX_INT:
                    raise ExpressionError("integer literal out of 64-bit range", column=i + 1, token=s)
            else:
                value = float(s)
                if value == float("inf"):
                    raise ExpressionError("float literal out of range", column=i + 1, token=s)
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
