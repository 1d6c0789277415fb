"""A task of its own for an application's code (``base/contain.py::run_apart``): cancelled before it ever ran, it
leaves no 'coroutine … was never awaited' warning behind (a replay stopped while it connected printed one)."""

from __future__ import annotations

import asyncio
import gc
import warnings
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from voxline.base.clock import VirtualClock
from voxline.base.contain import Raised, outcome, run_apart
from voxline.audio.clocked_output import ClockedOutput
from voxline.session.settings import SessionSettings
from voxline.session.voice import VoiceSession
from voxline.realtime.connection import RealtimeConnection


def _never_awaited(main: Callable[[], Coroutine[Any, Any, None]]) -> list[str]:
    """The 'was never awaited' warnings that running ``main()`` (and collecting what it left) gives."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        asyncio.run(main())
        gc.collect()
    return [str(w.message) for w in caught if "was never awaited" in str(w.message)]


async def _work() -> int:
    return 7


def test_a_task_cancelled_before_it_ran_closes_its_coroutine() -> None:
    async def main() -> None:
        task = run_apart(_work())
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    assert _never_awaited(main) == []


def test_a_task_that_ran_gives_its_value_or_what_it_raised() -> None:
    async def fails() -> None:
        raise SystemExit(3)

    async def main() -> tuple[int, object]:
        return outcome(await run_apart(_work())), await run_apart(fails())

    value, raised = asyncio.run(main())
    assert value == 7 and isinstance(raised, Raised) and isinstance(raised.exc, SystemExit)


def test_a_session_whose_opening_is_cancelled_before_it_began_warns_of_nothing() -> None:
    clock = VirtualClock()

    async def connector() -> RealtimeConnection:
        raise AssertionError("never reached")

    async def main() -> None:
        session = VoiceSession(SessionSettings(api_key="k"), output=ClockedOutput(clock), clock=clock,
                               connector=connector)
        entering = asyncio.ensure_future(session.__aenter__())
        await asyncio.sleep(0)  # __aenter__ made its opening task, which has not run yet
        entering.cancel()
        with pytest.raises(asyncio.CancelledError):
            await entering

    assert _never_awaited(main) == []
