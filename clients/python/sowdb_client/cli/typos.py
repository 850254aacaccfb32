"""A flag typo named first: ``sow sow -topc orders`` says "unknown flag -topc (did you mean
-topic?)" in the command's usage, rather than only "required: -topic"."""

from __future__ import annotations

import argparse
import difflib
import sys
from typing import NoReturn


class ValueErrors(argparse.ArgumentParser):
    """A parser that refuses a flag's value in one line (issue 36): ``-topn -1`` names the
    flag and its range; the usage above it would repeat every flag but say nothing more. Other
    errors (a flag unknown or missing) still show the usage."""

    def error(self, message: str) -> NoReturn:
        exc = sys.exc_info()[1]  # argparse calls error() while handling the ArgumentError
        if isinstance(exc, argparse.ArgumentError) and isinstance(exc.__context__, argparse.ArgumentTypeError):
            self.exit(2, f"{self.prog}: error: {message}\n")
        super().error(message)


class CommandParser(ValueErrors):
    """A command's parser that names an unknown flag first, with the closest known one.

    argparse leaves a command's unknown flags to the top parser, which reports them only after
    the command's own checks: ``sow sow -topc orders`` said just "required: -topic".
    """

    def parse_known_args(  # type: ignore[override]
        self, args: list[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        for token in args or ():
            if token == "--":
                break
            name = token.split("=", 1)[0]
            # what argparse itself takes for a flag: not a negative number, no space in it
            flag = name.startswith("-") and " " not in token and not self._negative_number_matcher.match(token)
            if flag and name not in self._option_string_actions:
                close = difflib.get_close_matches(name, list(self._option_string_actions), n=1)
                self.error(f"unknown flag {name}" + (f" (did you mean {close[0]}?)" if close else ""))
        return super().parse_known_args(args, namespace)
