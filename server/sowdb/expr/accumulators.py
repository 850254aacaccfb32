"""The accumulators of aggregates (COUNT, SUM, AVG, STDDEV_*, MIN, MAX, COUNT_DISTINCT): one
per aggregate of a group, taking values in and out (:mod:`sowdb.expr.aggregation`).

Accumulators support ``remove`` as well as ``add`` so that a view can retract a record's old
contribution when it is updated or deleted; MIN and MAX keep a sorted multiset so they stay
right under deletes.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from sortedcontainers import SortedDict

from sowdb.expr.numeric import NAN, fit, to_number
from sowdb.expr.values import order_key


class Accumulator:
    """One aggregate over one group: values come and go; :meth:`value` is the current result."""

    def add(self, x: Any) -> None:
        raise NotImplementedError

    def remove(self, x: Any) -> None:
        raise NotImplementedError

    def value(self) -> Any:
        raise NotImplementedError

    def replace(self, old: Any, new: Any) -> None:
        """A member's value changed from ``old`` to ``new`` (an update within the group)."""
        self.remove(old)
        self.add(new)

    def replace_all(self, olds: list[Any], news: list[Any]) -> None:
        """Members' values changed from ``olds[i]`` to ``news[i]``, in this order, None standing
        for no value (a NULL counts for nothing): a batch of updates within one group in one
        call (a joined view's upkeep, issue 42), with the result of :meth:`replace`,
        :meth:`remove` or :meth:`add` of each pair in turn."""
        for x, y in zip(olds, news, strict=True):
            if x is not None:
                if y is not None:
                    self.replace(x, y)
                else:
                    self.remove(x)
            elif y is not None:
                self.add(y)


class _Count(Accumulator):
    def __init__(self) -> None:
        self.n = 0

    def add(self, x: Any) -> None:
        self.n += 1

    def remove(self, x: Any) -> None:
        self.n -= 1

    def replace(self, old: Any, new: Any) -> None:
        pass  # still one value

    def replace_all(self, olds: list[Any], news: list[Any]) -> None:
        self.n += olds.count(None) - news.count(None)  # the values that came less those that went

    def value(self) -> Any:
        return self.n


class _Moments(Accumulator):
    """Count, sum and sum of squares of the numeric values: SUM, AVG, STDDEV_*.

    NaNs are counted apart so that removing the only NaN makes the sum finite again.
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.n = 0
        self.nans = 0
        self.total: int | float = 0
        self.squares: float = 0.0

    def _num(self, x: Any) -> int | float | None:
        return to_number(x)

    def add(self, x: Any) -> None:
        v = self._num(x)
        if v is None:
            return
        self.n += 1
        if v != v:
            self.nans += 1
        else:
            self.total += v
            self.squares += float(v) * float(v)

    def remove(self, x: Any) -> None:
        v = self._num(x)
        if v is None:
            return
        self.n -= 1
        if v != v:
            self.nans -= 1
        else:
            self.total -= v
            self.squares -= float(v) * float(v)

    def replace(self, old: Any, new: Any) -> None:
        if type(old) is int and type(new) is int:  # the usual update, in one step
            self.total += new - old
            self.squares += float(new) * float(new) - float(old) * float(old)
        else:
            self.remove(old)
            self.add(new)

    def replace_all(self, olds: list[Any], news: list[Any]) -> None:
        if None in olds or None in news:
            super().replace_all(olds, news)
            return
        total, squares = self.total, self.squares
        for x, y in zip(olds, news, strict=True):  # :meth:`replace` inlined, the same steps in the same order
            if type(x) is int and type(y) is int:
                total += y - x
                squares += float(y) * float(y) - float(x) * float(x)
            else:
                self.total, self.squares = total, squares
                self.remove(x)
                self.add(y)
                total, squares = self.total, self.squares
        self.total, self.squares = total, squares

    def value(self) -> Any:
        if self.n == 0:
            return None
        if self.nans:
            return NAN
        if self.kind == "SUM":
            return fit(self.total) if type(self.total) is int else self.total
        mean = self.total / self.n
        if self.kind == "AVG":
            return mean
        denominator = self.n if self.kind == "STDDEV_POP" else self.n - 1
        if denominator <= 0:
            return None
        variance = max((self.squares - self.n * mean * mean) / denominator, 0.0)
        return math.sqrt(variance)


class _Extreme(Accumulator):
    """MIN / MAX over a sorted multiset, ordered like order_by."""

    def __init__(self, largest: bool) -> None:
        self.largest = largest
        self.values: SortedDict = SortedDict()

    def add(self, x: Any) -> None:
        k = order_key(x)
        entry = self.values.get(k)
        if entry is None:
            self.values[k] = [x, 1]
        else:
            entry[0] = x
            entry[1] += 1

    def remove(self, x: Any) -> None:
        k = order_key(x)
        entry = self.values.get(k)
        if entry is not None:
            entry[1] -= 1
            if entry[1] <= 0:
                del self.values[k]

    def value(self) -> Any:
        if not self.values:
            return None
        return self.values.peekitem(-1 if self.largest else 0)[1][0]


class _Distinct(Accumulator):
    def __init__(self) -> None:
        self.seen: Counter[Any] = Counter()

    def add(self, x: Any) -> None:
        self.seen[order_key(x)] += 1

    def remove(self, x: Any) -> None:
        k = order_key(x)
        self.seen[k] -= 1
        if self.seen[k] <= 0:
            del self.seen[k]

    def value(self) -> Any:
        return len(self.seen)


def new_accumulator(name: str) -> Accumulator:
    if name == "COUNT":
        return _Count()
    if name in ("SUM", "AVG", "STDDEV_POP", "STDDEV_SAMP"):
        return _Moments(name)
    if name in ("MIN", "MAX"):
        return _Extreme(name == "MAX")
    if name == "COUNT_DISTINCT":
        return _Distinct()
    raise ValueError(name)
