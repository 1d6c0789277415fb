"""Tool registration and the GA flat tool schemas (``voxline.session.tools``, docs/protocol.md §6).

One :class:`ToolRegistry` can serve any number of sessions: it holds no per-session
state, registration swaps in a new immutable mapping under a lock, and reads never lock.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import copy
import inspect
import json
import math
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, TypeVar, overload

from pydantic import ValidationError

from voxline.realtime.errors import ToolError

from ..lockstep import follows_real_time
from .docstrings import parse_docstring
from voxline.base.contain import contain

from .outputs import describe_exception, describe_invalid, encode_output
from .schema import ArgumentSpec, build_arguments, described
from .threads import ToolThreads

__all__ = ["Failed", "Tool", "ToolRegistry", "Unencodable"]

_SHARED: list[ToolThreads] = []
_SHARED_LOCK = threading.Lock()


class _OneJob(concurrent.futures.Executor):
    """Hands one job to a :class:`ToolThreads` and remembers it, to abandon it if need be."""

    def __init__(self, threads: ToolThreads, tool: str) -> None:
        self._threads = threads
        self._tool = tool
        self._future: concurrent.futures.Future[Any] | None = None

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
        self._future = self._threads.submit_as(self._tool, fn, *args, **kwargs)
        return self._future

    def abandon(self, timed_out: bool) -> None:
        if self._future is not None:
            self._threads.abandon(self._future, timed_out=timed_out)


def _shared_threads() -> ToolThreads:
    """The process's pool for tools invoked without a registry's own."""
    with _SHARED_LOCK:
        if not _SHARED:
            _SHARED.append(ToolThreads())
        return _SHARED[0]

F = TypeVar("F", bound=Callable[..., Any])
R = TypeVar("R")

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")

TIMED_OUT = "the tool ran past its timeout"
"""The message of the cancel a runner gives a call that ran past its time (a session closing gives none)."""


@dataclass(frozen=True, slots=True)
class Tool:
    """One registered tool: its function, its schema and how it may be run."""

    name: str
    description: str
    function: Callable[..., Any]
    parameters: Mapping[str, Any]
    read_only: bool
    timeout: float | None
    needs_approval: bool
    is_async: bool
    arguments: ArgumentSpec = field(repr=False)

    def schema(self) -> dict[str, Any]:
        """The GA flat function tool: ``{"type":"function","name","description","parameters"}``."""
        return {
            "type": "function",
            "name": self.name,
            "description": self.description,
            "parameters": copy.deepcopy(dict(self.parameters)),
        }

    def parse(self, arguments: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """Decode the call's JSON arguments once and validate them.

        Returns ``(decoded, kwargs)``: the JSON object as sent and the keyword arguments for
        the function. Raises :class:`ToolError` ``"invalid arguments: …"`` otherwise.
        """
        try:
            decoded = json.loads(arguments, parse_constant=_not_json) if arguments.strip() else {}
        except json.JSONDecodeError as exc:
            raise ToolError(f"invalid arguments: not valid JSON ({exc.msg} at position {exc.pos})") from None
        except ValueError:  # an integer of more digits than Python reads from text
            raise ToolError("invalid arguments: a number has more digits than can be read") from None
        except RecursionError:
            raise ToolError("invalid arguments: nested too deeply to read") from None
        if not isinstance(decoded, dict):
            raise ToolError(f"invalid arguments: expected a JSON object, got {type(decoded).__name__}")
        try:
            validated = self.arguments.model.model_validate(decoded)
        except ValidationError as exc:
            raise ToolError(f"invalid arguments: {describe_invalid(exc)}") from None
        return decoded, self.arguments.to_kwargs(validated)

    async def invoke(self, kwargs: Mapping[str, Any], threads: ToolThreads | None = None) -> Any:
        """Run the function: awaited if async, on a tool worker thread if not; what it returned (awaited too when it
        is an awaitable, a coroutine say, whichever kind of function handed it back).

        Cancelling the wait (a timeout, a closing session) gives the worker's place back at once
        (:meth:`ToolThreads.abandon`); the function itself cannot be stopped and finishes unheard.
        """
        return await self._run(kwargs, threads, _unchanged, None)

    async def output(self, kwargs: Mapping[str, Any], threads: ToolThreads | None = None) -> str | Unencodable | Failed:
        """Run the function as :meth:`invoke` does, and make what it returned the call's output text
        (:func:`~voxline.session.tools.outputs.encode_output`), or say why it cannot be.

        A sync function's result is encoded on its worker thread, inside the tool's timeout, and what it
        raises is described there (:class:`Failed`): a result that takes long to encode (a large table, a
        model whose serialiser waits), or an exception whose message does, holds neither the event loop,
        which every session shares, nor the call past its time. An async function's exception is raised.
        """
        return await self._run(kwargs, threads, _encoded, _described)

    async def _run(self, kwargs: Mapping[str, Any], threads: ToolThreads | None, then: Callable[[Any], R],
                   failed: Callable[[BaseException], R] | None) -> R:
        """Call the function and hand what it returned to ``then``: on the worker thread for a sync function,
        which hands what the function raised to ``failed`` there (None: raised here)."""
        if self.is_async:
            # the thread work it starts (to_thread, a DNS lookup) is timed as a blocking tool's
            with follows_real_time():
                result = await self.function(**kwargs)
                if inspect.isawaitable(result):  # awaited, as a sync function's awaitable is
                    result = await result
                return then(result)
        pool = _OneJob(threads or _shared_threads(), self.name)
        # through the loop's run_in_executor, marked as a tool's: a lockstep loop lets the session's
        # time follow real time while it works, so its timeout fires as it would in real time
        with follows_real_time():
            work = asyncio.get_running_loop().run_in_executor(pool, _call_then, self.function, kwargs, then, failed)
        try:
            result = await work
        except asyncio.CancelledError as cancel:
            pool.abandon(timed_out=TIMED_OUT in cancel.args)
            raise
        if isinstance(result, _Awaiting):  # a sync wrapper around a coroutine function, which __wrapped__ did not show
            with follows_real_time():
                return then(await result.awaitable)
        return result


@dataclass(frozen=True, slots=True)
class Unencodable:
    """A tool's result that cannot be the call's output text, and why (the function itself returned)."""

    why: str


@dataclass(frozen=True, slots=True)
class Failed:
    """What a sync tool raised, described on its worker thread (``"Type: message"``)."""

    why: str


@dataclass(frozen=True, slots=True)
class _Awaiting:
    """What a sync function returned that is to be awaited on the event loop, not on its thread."""

    awaitable: Any


def _unchanged(value: Any) -> Any:
    return value


def _encoded(value: Any) -> str | Unencodable:
    """``value`` as output text, or why it cannot be; on the event loop or on a tool's worker thread."""
    try:
        return encode_output(value)
    except ToolError as exc:
        return Unencodable(exc.message)
    except BaseException as exc:  # the result's own code raised what no Exception handler takes (SystemExit)
        contain(exc)
        return Unencodable(f"its result could not be encoded: {describe_exception(exc)}")


def _described(exc: BaseException) -> Failed:
    return Failed(describe_exception(exc))


def _call_then(function: Callable[..., Any], kwargs: Mapping[str, Any], then: Callable[[Any], R],
               failed: Callable[[BaseException], R] | None) -> R | _Awaiting:
    """On a tool's worker thread: the function's result handed to ``then``, what it raised to ``failed`` (None:
    raised), or the awaitable it returned."""
    try:
        result = function(**kwargs)
    except KeyboardInterrupt:  # Ctrl-C goes on, wherever it came from
        raise
    except BaseException as exc:  # the tool boundary: nothing a tool raises ends its worker
        if failed is None:
            raise
        return failed(exc)
    if inspect.isawaitable(result):
        return _Awaiting(result)
    return then(result)


def _is_async(func: Callable[..., Any]) -> bool:
    """A coroutine function, also under a decorator that kept ``__wrapped__``, or an object with an async ``__call__``."""
    return any(inspect.iscoroutinefunction(f) for f in _callables(func))


def _callables(func: Callable[..., Any]) -> list[Any]:
    """``func``, what it wraps (``functools.wraps``) and a callable object's ``__call__``."""
    try:
        inner = inspect.unwrap(func)
    except ValueError:  # a cycle of __wrapped__
        inner = func
    return [f for f in (func, inner, getattr(func, "__call__", None), getattr(inner, "__call__", None)) if f is not None]


def _check_not_generator(name: str, func: Callable[..., Any]) -> None:
    """A generator's body would run on the event loop, item by item, past any timeout: refused."""
    if any(inspect.isgeneratorfunction(f) or inspect.isasyncgenfunction(f) for f in _callables(func)):
        raise ToolError(f"tool {name!r} is a generator function: return the result whole (a list of the items, say)")


def _not_json(constant: str) -> Any:
    """``NaN``, ``Infinity`` and ``-Infinity``, which Python's reader takes and JSON does not have."""
    raise ToolError(f"invalid arguments: not valid JSON ({constant} is no JSON value)")


def _check_timeout(name: str, timeout: float | None) -> float | None:
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not math.isfinite(timeout) or timeout <= 0:
        raise ToolError(f"tool {name!r}: timeout must be a positive number of seconds or None, not {timeout!r}")
    return float(timeout)


class ToolRegistry:
    """The tools a session may offer the model; shareable across sessions and threads."""

    def __init__(self, *, threads: ToolThreads | None = None) -> None:
        self._tools: Mapping[str, Tool] = MappingProxyType({})
        self._lock = threading.Lock()
        if threads is not None and not isinstance(threads, ToolThreads):
            raise TypeError(f"threads takes a ToolThreads, not {type(threads).__name__}")
        self.threads = threads or ToolThreads()
        """Worker threads for the blocking tools of every session using this registry."""

    @overload
    def tool(self, func: F, /) -> F: ...

    @overload
    def tool(
        self,
        *,
        name: str | None = None,
        description: str | None = None,
        read_only: bool = False,
        timeout: float | None = 10.0,
        needs_approval: bool = False,
    ) -> Callable[[F], F]: ...

    def tool(  # ``func`` is positional-only in the overload; a ``/`` here trips mypy's overload check
        self,
        func: Callable[..., Any] | None = None,
        *,
        name: str | None = None,
        description: str | None = None,
        read_only: bool = False,
        timeout: float | None = 10.0,
        needs_approval: bool = False,
    ) -> Callable[..., Any]:
        """Decorator registering a function as a tool; the function is returned unchanged.

        Use bare (``@registry.tool``) or with options (``@registry.tool(read_only=True)``).
        """

        def decorate(f: F) -> F:
            self.register(
                f, name=name, description=description, read_only=read_only, timeout=timeout, needs_approval=needs_approval
            )
            return f

        return decorate(func) if func is not None else decorate

    def register(
        self,
        func: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        read_only: bool = False,
        timeout: float | None = 10.0,
        needs_approval: bool = False,
    ) -> Tool:
        """Register ``func`` and return its :class:`Tool`; :class:`ToolError` if it cannot be."""
        if inspect.isclass(func) or not callable(func):
            raise ToolError(f"a tool is a function (or a method, or a functools.partial), not "
                            f"{'the class ' + func.__name__ if inspect.isclass(func) else type(func).__name__}")
        tool_name = name if name is not None else getattr(func, "__name__", None)
        if tool_name is None:
            raise ToolError(f"a {type(func).__name__} has no __name__: give the tool one with name=")
        for option, value in (("read_only", read_only), ("needs_approval", needs_approval)):
            if not isinstance(value, bool):
                raise ToolError(f"{option} takes True or False, not {type(value).__name__}")
        if description is not None and not isinstance(description, str):
            raise ToolError(f"description takes a string, not {type(description).__name__}")
        if not isinstance(tool_name, str) or not _NAME.match(tool_name):
            raise ToolError(f"tool name {tool_name!r} is invalid: use 1-64 letters, digits, '_' or '-'")
        _check_not_generator(tool_name, func)
        doc = parse_docstring(inspect.getdoc(described(func)))
        spec = build_arguments(func, tool_name, doc.params)
        tool = Tool(
            name=tool_name,
            description=description if description is not None else doc.summary,
            function=func,
            parameters=spec.schema,
            read_only=read_only,
            timeout=_check_timeout(tool_name, timeout),
            needs_approval=needs_approval,
            is_async=_is_async(func),
            arguments=spec,
        )
        with self._lock:
            if tool_name in self._tools:
                raise ToolError(f"tool {tool_name!r} is already registered")
            self._tools = MappingProxyType({**self._tools, tool_name: tool})
        return tool

    def get(self, name: str) -> Tool | None:
        """The tool called ``name``, or ``None``."""
        return self._tools.get(name)

    def __getitem__(self, name: str) -> Tool:
        tool = self._tools.get(name)
        if tool is None:
            raise ToolError(f"no tool named {name!r}")
        return tool

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(tuple(self._tools.values()))

    def __len__(self) -> int:
        return len(self._tools)

    def names(self) -> list[str]:
        """Registered tool names, in registration order."""
        return list(self._tools)

    def schemas(self, names: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """Fresh GA flat tool schemas for ``session.update``: all tools, or those named."""
        tools = self._tools
        chosen = list(tools) if names is None else list(names)
        unknown = [n for n in chosen if n not in tools]
        if unknown:
            raise ToolError(f"no tool named {unknown[0]!r}")
        return [tools[n].schema() for n in chosen]
