"""Recursive-descent parser: expression text -> AST (``sowdb.expr.nodes``).

Precedence, highest first (FILTERS.md): parentheses and calls; unary ``+ -``; ``* / % MOD``;
``+ -``; predicates (comparisons, BETWEEN, IN, LIKE, IS, BEGINS WITH, ENDS WITH); NOT; AND; OR.
Comparisons do not chain. Every refusal is an :class:`~sowdb.errors.ExpressionError` with the
1-based column and the offending token; nothing else escapes, whatever the input.
"""

from __future__ import annotations

from sowdb.errors import ExpressionError
from sowdb.expr import nodes as n
from sowdb.expr.functions import AGGREGATES, FUNCTIONS, compile_regex
from sowdb.expr.lexer import EOF, NUMBER, PATH, STRING, WORD, Token, tokenize
from sowdb.expr.numeric import neg

MAX_DEPTH = 64
"""Deepest AST accepted: deep enough for any hand-written filter, shallow enough that the
generated Python stays well inside CPython's own nesting limits."""

MAX_LENGTH = 100_000
"""Longest expression text accepted, in characters."""

_COMPARISONS = {"=": "=", "==": "=", "!=": "!=", "<>": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}
_ARITH_PREC = {"+": 1, "-": 1, "*": 2, "/": 2, "%": 2, "MOD": 2}
_PREDICATE_WORDS = frozenset({"IS", "NOT", "BETWEEN", "IN", "LIKE", "BEGINS", "ENDS"})
_RESERVED = frozenset({"AND", "OR", "NOT", "IN", "BETWEEN", "LIKE", "IS", "AS", "ASC", "DESC", "WITH", "MOD"})


class Parser:
    """One parse of one text. ``aggregates`` admits aggregate calls (projections only)."""

    def __init__(self, text: str, *, aggregates: bool = False, previous: bool = False) -> None:
        if len(text) > MAX_LENGTH:
            raise ExpressionError(f"expression longer than {MAX_LENGTH} characters", column=MAX_LENGTH + 1, token="")
        self.tokens = tokenize(text)
        self.i = 0
        self.tok = self.tokens[0]
        self.aggregates = aggregates
        self.previous = previous  # ``/path OF PREVIOUS`` is admitted (a topic's enrichment, EN-2)
        self.nesting = 0

    # --- token helpers --------------------------------------------------------------------

    def error(self, message: str, tok: Token | None = None) -> ExpressionError:
        t = tok or self.tok
        return ExpressionError(message, column=t.column, token=t.text)

    def advance(self) -> Token:
        t = self.tok
        if t.kind is not EOF:
            self.i += 1
            self.tok = self.tokens[self.i]
        return t

    def expect(self, key: str, what: str) -> Token:
        if self.tok.key != key:
            raise self.error(f"expected {what}")
        return self.advance()

    def checked(self, node: n.Node, tok: Token) -> n.Node:
        if node.depth > MAX_DEPTH:
            raise self.error(f"expression nested deeper than {MAX_DEPTH} levels", tok)
        return node

    def enter(self, tok: Token) -> None:
        self.nesting += 1
        if self.nesting > MAX_DEPTH:
            raise self.error(f"expression nested deeper than {MAX_DEPTH} levels", tok)

    # --- entry points ---------------------------------------------------------------------

    def parse(self) -> n.Node:
        """Parse the whole text as one expression."""
        if self.tok.kind is EOF:
            raise self.error("empty expression")
        node = self.expression()
        self.expect_end()
        return node

    def expect_end(self) -> None:
        if self.tok.kind is not EOF:
            if self.tok.key == ")":
                raise self.error("unbalanced parenthesis: ')' without '('")
            raise self.error("unexpected input after the end of the expression")

    # --- grammar --------------------------------------------------------------------------

    def expression(self) -> n.Node:
        """OR level (lowest precedence); each AND / OR chain becomes one n-ary node."""
        start = self.tok
        self.enter(start)
        first = self.and_expr()
        if self.tok.key == "OR":
            items = [first]
            while self.tok.key == "OR":
                self.advance()
                items.append(self.and_expr())
            first = self.checked(n.Logical(start.pos, "OR", tuple(items)), start)
        self.nesting -= 1
        return first

    def and_expr(self) -> n.Node:
        start = self.tok
        first = self.not_expr()
        if self.tok.key != "AND":
            return first
        items = [first]
        while self.tok.key == "AND":
            self.advance()
            items.append(self.not_expr())
        return self.checked(n.Logical(start.pos, "AND", tuple(items)), start)

    def not_expr(self) -> n.Node:
        if self.tok.key == "NOT":
            tok = self.advance()
            self.enter(tok)
            operand = self.not_expr()
            self.nesting -= 1
            return self.checked(n.Not(tok.pos, operand), tok)
        left = self.arith(1)
        tok = self.tok
        op = _COMPARISONS.get(tok.key) if tok.kind == "op" else None
        if op is not None:
            self.advance()
            right = self.arith(1)
            if self.tok.kind == "op" and self.tok.key in _COMPARISONS:
                raise self.error("comparisons do not chain; combine them with AND")
            return self.checked(n.Compare(tok.pos, op, left, right), tok)
        if tok.kind is WORD and tok.key in _PREDICATE_WORDS:
            return self.predicate(left, tok)
        return left

    def predicate(self, left: n.Node, tok: Token) -> n.Node:
        """The word predicates after ``left``: IS, [NOT] BETWEEN / IN / LIKE / BEGINS / ENDS."""
        self.advance()
        key = tok.key
        if key == "IS":
            negated = self.tok.key == "NOT"
            if negated:
                self.advance()
            if self.tok.key not in ("NULL", "NAN"):
                raise self.error("expected NULL or NAN after IS")
            nan = self.advance().key == "NAN"
            return self.checked(n.IsTest(tok.pos, left, nan, negated), tok)
        negated = key == "NOT"
        if negated:
            key = self.tok.key
            if key not in ("BETWEEN", "IN", "LIKE", "BEGINS", "ENDS"):
                raise self.error("expected BETWEEN, IN, LIKE, BEGINS WITH or ENDS WITH after NOT")
            self.advance()
        if key == "BETWEEN":
            low = self.arith(1)
            self.expect("AND", "AND in BETWEEN ... AND ...")
            high = self.arith(1)
            return self.checked(n.Between(tok.pos, left, low, high, negated), tok)
        if key == "IN":
            self.expect("(", "'(' to open the IN list")
            items = [self.expression()]
            while self.tok.key == ",":
                self.advance()
                items.append(self.expression())
            self.expect(")", "')' to close the IN list")
            return self.checked(n.In(tok.pos, left, tuple(items), negated), tok)
        if key == "LIKE":
            pat = self.tok
            if pat.kind is not STRING:
                raise self.error("the LIKE pattern must be a string literal")
            self.advance()
            try:
                compile_regex(pat.text, pat.raw)
            except ValueError as exc:
                raise self.error(f"invalid LIKE pattern ({exc})", pat) from None
            return self.checked(n.Like(tok.pos, left, pat.text, pat.raw, negated), tok)
        # BEGINS / ENDS
        self.expect("WITH", f"WITH after {key}")
        return self.checked(n.Affix(tok.pos, key == "BEGINS", left, self.string_list(), negated), tok)

    def string_list(self) -> tuple[str, ...]:
        """``('a', 'b')`` or a single ``'a'``: the literal operands of BEGINS/ENDS WITH."""
        if self.tok.kind is STRING:
            return (str(self.advance().value),)
        self.expect("(", "'(' and a list of string literals")
        out: list[str] = []
        while True:
            if self.tok.kind is not STRING:
                raise self.error("BEGINS WITH / ENDS WITH take string literals")
            out.append(str(self.advance().value))
            if self.tok.key != ",":
                break
            self.advance()
        self.expect(")", "')' to close the list")
        return tuple(out)

    def arith(self, min_prec: int) -> n.Node:
        """Binary ``+ - * / % MOD`` by precedence climbing (left-associative)."""
        left = self.unary()
        while True:
            tok = self.tok
            prec = _ARITH_PREC.get(tok.key)
            if prec is None or prec < min_prec or tok.kind is PATH:
                return left
            self.advance()
            right = self.arith(prec + 1)
            left = self.checked(n.Arith(tok.pos, "%" if tok.key == "MOD" else tok.key, left, right), tok)

    def unary(self) -> n.Node:
        tok = self.tok
        if tok.key in ("-", "+") and tok.kind == "op":
            self.advance()
            self.enter(tok)
            operand = self.unary()
            self.nesting -= 1
            if tok.key == "-" and type(operand) is n.Literal and type(operand.value) in (int, float):
                return n.Literal(tok.pos, neg(operand.value))
            return self.checked(n.Unary(tok.pos, tok.key, operand), tok)
        return self.primary()

    def primary(self) -> n.Node:
        tok = self.tok
        kind = tok.kind
        if kind is PATH:
            self.advance()
            return n.Path(tok.pos, tok.value, tok.text, self.of_previous())  # type: ignore[arg-type]
        if kind is NUMBER:
            self.advance()
            return n.Literal(tok.pos, tok.value)
        if kind is STRING:
            self.advance()
            return n.Literal(tok.pos, tok.value, tok.text)
        if tok.key == "(":
            self.advance()
            inner = self.expression()
            if self.tok.key != ")":
                raise self.error("unbalanced parenthesis: expected ')'")
            self.advance()
            return inner
        if kind is WORD:
            word = tok.key
            if word == "NULL":
                self.advance()
                return n.Literal(tok.pos, None)
            if word in ("TRUE", "FALSE"):
                self.advance()
                return n.Literal(tok.pos, word == "TRUE")
            if word in _RESERVED:
                raise self.error("expected an operand (parenthesize a NOT or a comparison used as one)", tok)
            self.advance()
            if self.tok.key != "(":
                raise self.error("unknown word (field paths start with '/', strings are quoted)", tok)
            return self.call(tok, word)
        if kind is EOF:
            raise self.error("expected an operand")
        if tok.key == ")":
            raise self.error("unbalanced parenthesis or missing operand")
        raise self.error("expected an operand")

    def of_previous(self) -> bool:
        """Whether ``OF PREVIOUS`` follows the path just read (EN-2), consuming it."""
        if self.tok.key != "OF":
            return False
        tok = self.advance()
        if self.tok.key != "PREVIOUS":
            raise self.error("expected PREVIOUS after OF")
        if not self.previous:
            raise self.error("OF PREVIOUS reads a record's previous version: only a topic's enrichment has one", tok)
        self.advance()
        return True

    def call(self, name_tok: Token, name: str) -> n.Node:
        self.advance()  # '('
        args: list[n.Node] = []
        if self.tok.key != ")":
            args.append(self.expression())
            while self.tok.key == ",":
                self.advance()
                args.append(self.expression())
        if self.tok.key != ")":
            raise self.error(f"expected ',' or ')' in the arguments of {name}")
        self.advance()
        if name == "IF":
            if len(args) != 3:
                raise self.error(f"IF takes 3 arguments, got {len(args)}", name_tok)
            return self.checked(n.If(name_tok.pos, args[0], args[1], args[2]), name_tok)
        if name in AGGREGATES:
            if not self.aggregates:
                raise self.error(f"aggregate {name} is only allowed in a projection", name_tok)
            if len(args) != 1:
                raise self.error(f"{name} takes 1 argument, got {len(args)}", name_tok)
            if any(isinstance(x, n.Aggregate) for x in args[0].walk()):
                raise self.error(f"aggregates cannot be nested inside {name}", name_tok)
            return self.checked(n.Aggregate(name_tok.pos, name, args[0]), name_tok)
        fn = FUNCTIONS.get(name)
        if fn is None:
            raise self.error(f"unknown function {name}", name_tok)
        if name == "REGEXP_REPLACE" and len(args) == 3 and isinstance(args[1], n.Literal) and args[1].written:
            # like LIKE, a literal pattern reaches the regex engine as written
            pattern = args[1]
            try:
                compile_regex(pattern.written)
            except ValueError as exc:
                raise ExpressionError(
                    f"invalid REGEXP_REPLACE pattern ({exc})", column=pattern.pos + 1, token=pattern.written or ""
                ) from None
            args[1] = n.Literal(pattern.pos, pattern.written, pattern.written)
        if len(args) < fn.min_args or (fn.max_args is not None and len(args) > fn.max_args):
            if fn.max_args is None:
                want = f"at least {fn.min_args}"
            elif fn.min_args == fn.max_args:
                want = str(fn.min_args)
            else:
                want = f"{fn.min_args} to {fn.max_args}"
            raise self.error(f"{name} takes {want} argument(s), got {len(args)}", name_tok)
        return self.checked(n.Call(name_tok.pos, name, tuple(args)), name_tok)


def parse(text: str, *, aggregates: bool = False, previous: bool = False) -> n.Node:
    """Parse one expression (``previous``: admit ``/path OF PREVIOUS``, EN-2).

    Raises:
        ExpressionError: the text is not a valid expression.
    """
    return Parser(text, aggregates=aggregates, previous=previous).parse()


ListItem = tuple[n.Node, tuple[str | int, ...] | None, str]


def parse_list(text: str, *, aggregates: bool, allow_as: bool, previous: bool = False) -> list[ListItem]:
    """Parse ``[e1 [AS /out], e2, ...]`` (brackets optional) into (node, output path, source).

    The outer brackets are blanked rather than cut, so error columns stay those of ``text``.

    Raises:
        ExpressionError: an item does not parse, or ``AS`` is not followed by a field path.
    """
    body = text.strip()
    if body.startswith("[") and body.endswith("]"):
        left, right = text.index("["), text.rindex("]")
        text = text[:left] + " " + text[left + 1 : right] + " " + text[right + 1 :]
    p = Parser(text, aggregates=aggregates, previous=previous)
    if p.tok.kind is EOF:
        raise p.error("empty list")
    items: list[ListItem] = []
    while True:
        start = p.tok.pos
        node = p.expression()
        source = text[start : p.tok.pos].strip()
        out: tuple[str | int, ...] | None = None
        if allow_as and p.tok.key == "AS":
            p.advance()
            if p.tok.kind is not PATH:
                raise p.error("AS must be followed by an output field path such as /total")
            out = p.advance().value  # type: ignore[assignment]
        items.append((node, out, source))
        if p.tok.key != ",":
            break
        p.advance()
    p.expect_end()
    return items
