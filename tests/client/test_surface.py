"""The sync and the asyncio SDK have the same surface: ``Client`` and ``AsyncClient``,
``SowResult`` and ``AsyncSowResult``, ``SubscriptionStream`` and ``AsyncSubscriptionStream`` have
the same public methods and attributes, each method the same parameters (names, kinds, defaults,
annotations; only what a method returns differs, an awaitable or an async iterator on the asyncio
side), and a keyword that is not an option of a call raises ``TypeError`` naming it in both.

No server is needed: creating a client does not connect, and the options are checked before a
call is made."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytest

from sowdb_client import (
    AsyncClient,
    AsyncSowResult,
    AsyncSubscriptionStream,
    Client,
    SowResult,
    SubscriptionStream,
)

TWINS = [
    pytest.param(Client, AsyncClient, id="Client"),
    pytest.param(SowResult, AsyncSowResult, id="SowResult"),
    pytest.param(SubscriptionStream, AsyncSubscriptionStream, id="SubscriptionStream"),
]

# the protocols each side speaks instead of the other's: with / async with, for / async for
SYNC_TO_ASYNC_PROTOCOL = {"__enter__": "__aenter__", "__exit__": "__aexit__", "__iter__": "__aiter__"}

NOWHERE = "127.0.0.1:1"  # never connected to: no call below reaches the network


def public_names(obj: object) -> set[str]:
    """The public names of a class, or of an instance (its class's and its own attributes)."""
    own = vars(obj) if not isinstance(obj, type) else {}
    return {name for name in {*dir(obj), *own} if not name.startswith("_")}


def public_methods(cls: type) -> dict[str, Callable[..., Any]]:
    return {name: getattr(cls, name) for name in public_names(cls) if callable(getattr(cls, name))}


def parameters(method: Callable[..., Any]) -> list[inspect.Parameter]:
    """A method's parameters, annotations evaluated (both modules postpone them as strings)."""
    return list(inspect.signature(method, eval_str=True).parameters.values())


@pytest.mark.parametrize(("sync", "aio"), TWINS)
def test_the_same_public_methods(sync: type, aio: type) -> None:
    assert public_names(sync) == public_names(aio), (
        f"only in {sync.__name__}: {sorted(public_names(sync) - public_names(aio))}, "
        f"only in {aio.__name__}: {sorted(public_names(aio) - public_names(sync))}"
    )


@pytest.mark.parametrize(("sync", "aio"), TWINS)
def test_each_method_takes_the_same_parameters(sync: type, aio: type) -> None:
    sync_methods, aio_methods = public_methods(sync), public_methods(aio)
    assert sync_methods.keys() == aio_methods.keys()
    for name, method in sync_methods.items():
        assert parameters(method) == parameters(aio_methods[name]), name


@pytest.mark.parametrize(("sync", "aio"), TWINS)
def test_what_waits_is_awaited_on_the_asyncio_side(sync: type, aio: type) -> None:
    """Each asyncio method is the sync one itself (a call that returns a stream, defined once in
    ``calls.Calls``, or a local action such as ``cancel``) or a coroutine or async generator."""
    for name, method in public_methods(aio).items():
        shared = method is getattr(sync, name)
        assert shared or inspect.iscoroutinefunction(method) or inspect.isasyncgenfunction(method), name


@pytest.mark.parametrize(("sync", "aio"), TWINS)
def test_each_sync_protocol_has_its_asyncio_twin(sync: type, aio: type) -> None:
    spoken = [name for name in SYNC_TO_ASYNC_PROTOCOL if hasattr(sync, name)]
    assert spoken, sync.__name__
    for name in spoken:
        twin = SYNC_TO_ASYNC_PROTOCOL[name]
        assert hasattr(aio, twin), (aio.__name__, twin)
        assert parameters(getattr(sync, name)) == parameters(getattr(aio, twin)), name


async def test_instances_have_the_same_public_attributes() -> None:
    """What ``__init__`` sets: the client's ``target``, a result's ``group_begin`` and
    ``group_end``, a stream's ``sub_id``."""
    with Client(NOWHERE) as sync_client:
        async with AsyncClient(NOWHERE) as aio_client:
            assert public_names(sync_client) == public_names(aio_client)
            assert "target" in public_names(aio_client)
    call = object()  # what the results and streams wrap; they do not touch it until read
    assert public_names(SowResult(call)) == public_names(AsyncSowResult(call))
    assert {"group_begin", "group_end"} <= public_names(AsyncSowResult(call))
    assert public_names(SubscriptionStream(call)) == public_names(AsyncSubscriptionStream(call))
    assert "sub_id" in public_names(AsyncSubscriptionStream(call))


# every call that takes options, with its positional arguments
CALLS_WITH_OPTIONS = [
    ("sow", ("t",)),
    ("subscribe", ("t",)),
    ("sow_and_subscribe", ("t",)),
    ("publish_iter", ("t", [{"id": 1}])),
    ("publish", ("t", [{"id": 1}])),
    ("replace_subscription", ("s",)),
    ("sow_delete", ("t",)),
]


def test_a_misspelt_option_is_a_type_error_naming_it() -> None:
    with Client(NOWHERE) as c, pytest.raises(TypeError, match="unexpected keyword argument 'fliter'"):
        c.sow("t", fliter="x")  # type: ignore[call-arg]  # what mypy catches, checked at run time too


async def test_a_misspelt_option_is_a_type_error_naming_it_asyncio() -> None:
    async with AsyncClient(NOWHERE) as c:
        with pytest.raises(TypeError, match="unexpected keyword argument 'fliter'"):
            c.sow("t", fliter="x")  # type: ignore[call-arg]  # what mypy catches, checked at run time too


@pytest.mark.parametrize(("call", "args"), CALLS_WITH_OPTIONS)
def test_every_call_refuses_an_unknown_option(call: str, args: tuple[Any, ...]) -> None:
    with Client(NOWHERE) as c:
        method = getattr(c, call)
        with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
            method(*args, bogus=1)


@pytest.mark.parametrize(("call", "args"), CALLS_WITH_OPTIONS)
async def test_every_asyncio_call_refuses_an_unknown_option(call: str, args: tuple[Any, ...]) -> None:
    async with AsyncClient(NOWHERE) as c:
        method = getattr(c, call)
        if inspect.iscoroutinefunction(method):  # publish, replace_subscription, sow_delete: raised when awaited
            with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
                await method(*args, bogus=1)
        else:
            with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
                method(*args, bogus=1)
