"""What a client asks of a subscription (SPEC §4's subscription fields), checked before it is
placed: a value shared by placement, pages and the protocol layer, apart from the subscription
that carries it out (:mod:`sowdb.engine.live.subscription`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict

from sowdb.config import field_path_steps
from sowdb.engine.access import Access
from sowdb.errors import InvalidArgument


@dataclass(frozen=True)
class SubscriptionOptions:
    """What a client asked of its subscription."""

    oof: bool = False
    delta: bool = False
    no_empties: bool = False
    send_keys: bool = True
    deleted_events: bool = False  # plain Subscribe: tell about deletes of matching records
    conflation_s: float = 0.0  # C-1: at most one delivery per key per this interval
    conflation_key: tuple[str, ...] = ()  # paths of the conflation key; the SowKey when empty

    def check(self) -> None:
        """Options that cannot work, or not together, are refused rather than half applied.

        Raises:
            InvalidArgument: a negative interval, a conflation key that is not a field path or
                has no interval, or delta with a conflation key other than the SowKey (C-1 would
                deliver one record's delta in place of another's, losing changed fields).
        """
        if self.conflation_s < 0:
            raise InvalidArgument("conflation must not be negative", field="options.conflation")
        for i, path in enumerate(self.conflation_key):
            try:
                field_path_steps(path)
            except ValueError as exc:
                raise InvalidArgument(str(exc), field=f"options.conflation_key[{i}]") from None
        if self.conflation_key and not self.conflation_s:
            raise InvalidArgument("conflation_key needs a conflation interval", field="options.conflation")
        if self.delta and self.conflation_key:
            raise InvalidArgument(
                "a delta subscription conflates by SowKey only: drop conflation_key or delta",
                field="options.conflation_key",
            )


DEFAULT_OPTIONS = SubscriptionOptions()


@dataclass(frozen=True)
class Replacement:
    """What a ReplaceSubscription asks for (R-1): the new filter and options, and for a live
    page its definition again (``top_n``, ``skip_n``, ``order_by``)."""

    filter: str = ""
    options: SubscriptionOptions = DEFAULT_OPTIONS
    order_by: str = ""
    top_n: int | None = None
    skip_n: int | None = None


class SowAndSubscribeArgs(TypedDict, total=False):
    """The keyword arguments of :meth:`Placement.sow_and_subscribe` (for those who pass them on)."""

    options: SubscriptionOptions
    sub_id: str
    owner: str
    access: Access


class SubscribeArgs(SowAndSubscribeArgs, total=False):
    """The keyword arguments of :meth:`Placement.subscribe`."""

    filter: str
    bookmark: str
