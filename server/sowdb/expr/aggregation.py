"""Aggregated queries: ``grouping`` + ``projection`` (Q-8), and the groups views reuse.

Each group keeps one accumulator per aggregate call of the projection
(:mod:`sowdb.expr.accumulators`), which takes a record's contribution in and out, so that a view
can retract a record's old contribution when it is updated or deleted. Non-aggregated,
non-grouped items take the last processed record's value.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from sowdb.errors import ExpressionError
from sowdb.expr import nodes as n
from sowdb.expr.accumulators import new_accumulator
from sowdb.expr.compiler import _AggregateValues, _Compiler
from sowdb.expr.parser import parse_list
from sowdb.expr.values import hashable, is_null

_IN_PLACE = frozenset({"COUNT", "SUM", "AVG", "STDDEV_POP", "STDDEV_SAMP"})
_INT_ONLY = {int}


@dataclass
class _Slot:
    name: str
    arg: Callable[..., Any]
    field: str | None = None  # the argument is this top-level field: read it without a call


def _top_field(node: n.Node) -> str | None:
    """The field name when ``node`` is a top-level path such as ``/qty``."""
    if isinstance(node, n.Path) and len(node.steps) == 1 and type(node.steps[0]) is str:
        return node.steps[0]
    return None


class Group:
    """The running state of one group."""

    def __init__(self, aggregation: Aggregation) -> None:
        self.aggregation = aggregation
        self.accumulators = [new_accumulator(s.name) for s in aggregation.slots]
        self.members = 0
        self.last: dict[str, Any] | None = None
        self.last_ctx: Any = None

    def add(self, data: dict[str, Any], ctx: Any = None) -> None:
        self.members += 1
        for slot, acc in zip(self.aggregation.slots, self.accumulators, strict=True):  # inline: views' hot path
            x = slot.arg(data, ctx)
            if x is not None and (type(x) is int or type(x) is float or not is_null(x)):
                acc.add(x)
        self.last, self.last_ctx = data, ctx

    def remove(self, data: dict[str, Any], ctx: Any = None) -> None:
        self.members -= 1
        for slot, acc in zip(self.aggregation.slots, self.accumulators, strict=True):
            x = slot.arg(data, ctx)
            if x is not None and (type(x) is int or type(x) is float or not is_null(x)):
                acc.remove(x)

    def replace(self, old: dict[str, Any], old_ctx: Any, new: dict[str, Any], new_ctx: Any) -> None:
        """A member changed from ``old`` to ``new`` and stays in the group: one step per
        aggregate instead of a removal and an addition (the common update of a view)."""
        for slot, acc in zip(self.aggregation.slots, self.accumulators, strict=True):
            field = slot.field
            if field is not None:
                x, y = old.get(field), new.get(field)
            else:
                x, y = slot.arg(old, old_ctx), slot.arg(new, new_ctx)
            counted_x = x is not None and (type(x) is int or type(x) is float or not is_null(x))
            counted_y = y is not None and (type(y) is int or type(y) is float or not is_null(y))
            if counted_x and counted_y:
                acc.replace(x, y)
            elif counted_x:
                acc.remove(x)
            elif counted_y:
                acc.add(y)
        self.last, self.last_ctx = new, new_ctx

    def add_contribution(self, values: list[Any], data: dict[str, Any], ctx: Any = None) -> None:
        """:meth:`add` of a member whose :meth:`Aggregation.contribution` is ``values``."""
        self.members += 1
        for acc, x in zip(self.accumulators, values, strict=True):
            if x is not None:
                acc.add(x)
        self.last, self.last_ctx = data, ctx

    def remove_contribution(self, values: list[Any]) -> None:
        """Retract exactly what :meth:`add_contribution` of ``values`` added."""
        self.members -= 1
        for acc, x in zip(self.accumulators, values, strict=True):
            if x is not None:
                acc.remove(x)

    def replace_contribution(self, old: list[Any], new: list[Any], data: dict[str, Any], ctx: Any) -> None:
        """:meth:`replace` of a member whose contribution was ``old`` by one whose contribution
        is ``new``: the old member is not evaluated again (a joined view keeps what each of its
        rows added, so an update evaluates the aggregates' arguments once, not twice)."""
        for acc, x, y in zip(self.accumulators, old, new, strict=True):
            if x is not None:
                if y is not None:
                    acc.replace(x, y)
                else:
                    acc.remove(x)
            elif y is not None:
                acc.add(y)
        self.last, self.last_ctx = data, ctx

    def replace_contributions(
        self, olds: list[list[Any]], news: list[list[Any]], data: dict[str, Any], ctx: Any
    ) -> None:
        """:meth:`replace_contribution` of each pair in turn (a batch's updates within this
        group), an aggregate at a time: one call per aggregate instead of one per member."""
        for i, acc in enumerate(self.accumulators):
            acc.replace_all([x[i] for x in olds], [y[i] for y in news])
        self.last, self.last_ctx = data, ctx

    def result(self) -> dict[str, Any]:
        values = self.aggregation._aggregate_values.values = [a.value() for a in self.accumulators]
        out: dict[str, Any] = {}
        data = self.last or {}
        row = self.aggregation.row
        if row is not None:  # the usual projection, read without a call per item
            for leaf, slot, field in row:
                value = values[slot] if field is None else data.get(field)
                if value is not None:
                    out[leaf] = value
            return out
        ctx = self.last_ctx
        for fn, parents, leaf in self.aggregation.outputs:
            cur = out
            for s in parents:
                nxt = cur.get(s)
                if type(nxt) is not dict:
                    nxt = cur[s] = {}
                cur = nxt
            value = fn(data, ctx)
            if value is not None:
                cur[leaf] = value
        return out


class Aggregation:
    """A compiled grouping + projection.

    Attributes:
        slots: one per aggregate call of the projection, in order.
        outputs: per projection item, its evaluator and output path (the parent fields, then
            the field it sets).
    """

    def __init__(self, grouping: Sequence[str] | str, projection: Sequence[str] | str) -> None:
        group_items = _items(grouping, aggregates=False, allow_as=False, field="grouping")
        proj_items = _items(projection, aggregates=True, allow_as=True, field="projection")
        self.grouping_text = grouping
        self.projection_text = projection
        self._aggregate_values = holder = _AggregateValues()
        compiler = _Compiler(holder)
        self._group_fns = [compiler.value(node) for node, _, _ in group_items]
        self.grouping_count = len(self._group_fns)
        self.group_field = _top_field(group_items[0][0]) if len(group_items) == 1 else None
        """The grouping is this one top-level field (views read it directly)."""
        self.slots: list[_Slot] = []
        for node, _, _ in proj_items:
            for sub in node.walk():
                if isinstance(sub, n.Aggregate):
                    holder.slot(sub)
                    self.slots.append(_Slot(sub.name, compiler.value(sub.arg), _top_field(sub.arg)))
        self.in_place = all(s.field is not None and s.name in _IN_PLACE for s in self.slots)
        """Updates within groups can be applied a batch at a time (:meth:`replace_many`)."""
        self.outputs: list[tuple[Callable[..., Any], tuple[str, ...], str]] = []
        row: list[tuple[str, int, str | None]] | None = []
        for node, out, source in proj_items:
            if out is None:
                if not isinstance(node, n.Path):
                    raise ExpressionError(
                        "a computed projection item needs AS /field",
                        column=node.pos + 1,
                        token=source,
                        field="projection",
                    )
                out = node.steps
            if any(type(s) is int for s in out):
                raise ExpressionError(
                    "output paths cannot index arrays", column=node.pos + 1, token=source, field="projection"
                )
            names = cast("tuple[str, ...]", out)
            self.outputs.append((compiler.value(node), names[:-1], names[-1]))
            if row is not None:
                if len(names) == 1 and isinstance(node, n.Aggregate):
                    row.append((names[0], holder.slot(node), None))
                elif len(names) == 1 and (field := _top_field(node)) is not None:
                    row.append((names[0], 0, field))
                else:
                    row = None
        self.row = row
        """When every item is an aggregate call or a top-level field, put at a top-level field:
        per item (output field, aggregate slot, source field or None for the aggregate)."""

    def replace_many(
        self,
        groups: Sequence[Group],
        olds: Sequence[dict[str, Any]],
        news: Sequence[dict[str, Any]],
        contexts: Sequence[Any],
    ) -> bool:
        """Members that change from the document ``olds[i]`` to ``news[i]`` (whose context, the
        record, is ``contexts[i]``) and stay in ``groups[i]`` (a view's usual batch), applied
        an aggregate at a time over the whole batch.

        Only for COUNT and the moments (SUM, AVG, STDDEV_*) of top-level fields, and only when
        every value read is an integer: each value then counts before and after, and sums stay
        exact whatever the order. Checks everything before changing anything.

        Returns:
            False, having changed nothing, when the batch is not of that kind.
        """
        if not self.in_place:
            return False
        columns: list[tuple[list[Any], list[Any]]] = []
        for slot in self.slots:
            field = slot.field
            assert field is not None  # in_place: every argument is a top-level field
            xs = [o.get(field) for o in olds]
            ys = [r.get(field) for r in news]
            if set(map(type, xs)) != _INT_ONLY or set(map(type, ys)) != _INT_ONLY:
                return False
            columns.append((xs, ys))
        for i, (slot, (xs, ys)) in enumerate(zip(self.slots, columns, strict=True)):
            if slot.name == "COUNT":
                continue  # counted before and after
            for acc, x, y in zip([g.accumulators[i] for g in groups], xs, ys, strict=True):
                if x != y:
                    acc.replace(x, y)  # both integers: the moments' one-step update
        for group, data, rec in zip(groups, news, contexts, strict=True):
            group.last, group.last_ctx = data, rec
        return True

    def contribution(self, data: dict[str, Any], ctx: Any = None) -> list[Any]:
        """What ``data`` adds to each aggregate of its group: its argument's value per slot,
        None where it counts for nothing (a NULL), for :meth:`Group.add_contribution`."""
        out: list[Any] = []
        for slot in self.slots:
            x = slot.arg(data, ctx)
            out.append(x if x is not None and (type(x) is int or type(x) is float or not is_null(x)) else None)
        return out

    @staticmethod
    def counted(values: list[Any]) -> list[Any]:
        """Arguments' values as :meth:`contribution` gives them: None for a NULL."""
        return [x if x is not None and (type(x) is int or type(x) is float or not is_null(x)) else None for x in values]

    def evaluator(self) -> Callable[[dict[str, Any], Any], list[Any]]:
        """:meth:`contribution` as one function, for up to three aggregates without a loop:
        a joined view calls it per updated order, where the loop's iterator and the
        comprehension's function were allocations the garbage collector counted (issue 42)."""
        counted = self.counted
        args = [s.arg for s in self.slots]
        if len(args) == 1:
            (a,) = args

            def one(data: dict[str, Any], ctx: Any) -> list[Any]:
                x = a(data, ctx)
                return [x] if type(x) is int or type(x) is float else counted([x])

            return one
        if len(args) == 2:
            a, b = args

            def two(data: dict[str, Any], ctx: Any) -> list[Any]:
                x, y = a(data, ctx), b(data, ctx)
                if (type(x) is int or type(x) is float) and (type(y) is int or type(y) is float):
                    return [x, y]
                return counted([x, y])

            return two
        if len(args) == 3:
            a, b, c = args

            def three(data: dict[str, Any], ctx: Any) -> list[Any]:
                x, y, z = a(data, ctx), b(data, ctx), c(data, ctx)
                if (
                    (type(x) is int or type(x) is float)
                    and (type(y) is int or type(y) is float)
                    and (type(z) is int or type(z) is float)
                ):
                    return [x, y, z]
                return counted([x, y, z])

            return three
        return self.contribution

    def group_key(self, data: dict[str, Any], ctx: Any = None) -> tuple[Any, ...]:
        fns = self._group_fns
        if len(fns) == 1:  # the common case, without a generator (views call this per change)
            return (hashable(fns[0](data, ctx)),)
        return tuple([hashable(fn(data, ctx)) for fn in fns])

    def new_group(self) -> Group:
        return Group(self)

    def run(self, records: Iterable[tuple[dict[str, Any], Any]]) -> list[dict[str, Any]]:
        """Aggregate (data, ctx) pairs into one result record per group, in first-seen order."""
        groups: dict[tuple[Any, ...], Group] = {}
        for data, ctx in records:
            key = self.group_key(data, ctx)
            group = groups.get(key)
            if group is None:
                group = groups[key] = Group(self)
            group.add(data, ctx)
        return [g.result() for g in groups.values()]


def _items(
    spec: Sequence[str] | str, *, aggregates: bool, allow_as: bool, field: str
) -> list[tuple[n.Node, tuple[str | int, ...] | None, str]]:
    texts = [spec] if isinstance(spec, str) else list(spec)
    out: list[tuple[n.Node, tuple[str | int, ...] | None, str]] = []
    try:
        for t in texts:
            out.extend(parse_list(t, aggregates=aggregates, allow_as=allow_as))
    except ExpressionError as exc:
        raise exc.for_field(field) from None
    if not out:
        raise ExpressionError(f"empty {field}", column=1, token="", field=field)
    return out


def parse_aggregation(grouping: Sequence[str] | str, projection: Sequence[str] | str) -> Aggregation:
    """Compile a grouping + projection pair (both required together, Q-8)."""
    if not grouping or not projection:
        missing = "projection" if grouping else "grouping"
        raise ExpressionError("grouping and projection must be given together", column=1, token="", field=missing)
    return Aggregation(grouping, projection)
