"""A lockstep replay inside an application's own test: run it, look at what happened, check expectations.

:func:`replay_in_lockstep` plays a recording (a WAV path or an int16 array at 24 kHz) through a
:class:`~voxline.session.VoiceSession` against the built-in server's engine on a virtual clock,
as ``voxline replay --fast`` does, and returns a :class:`ReplayRun`: the
:class:`~.result.ReplayResult`, every wire frame each way, and :meth:`ReplayRun.check`, which
judges the same expectations a farm manifest takes (``barge_ins``, ``max_cut_error_ms``,
``max_reply_latency_ms``, ``no_errors``) and raises ``AssertionError`` with the failed ones on one
line. The pytest plugin (:mod:`voxline.pytest_plugin`) hands it to tests as the
``voxline_replay`` fixture.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
from pydantic import SecretStr, ValidationError

from voxline.base.loop_runner import loop_running
from voxline.base.urls import LOCAL_KEY
from voxline.realtime.errors import ConfigurationError
from voxline.realtime.server.engine.scenario import Scenario, load_scenario, with_transcripts

from ..settings import SessionSettings
from ..tools import ToolRegistry
from .driver import replay_fast
from .farm.manifest import Expectations
from .farm.results import Check, Measured, describe, judge, measure
from .inputs import load_input, load_tools, transcripts_for
from .result import ReplayResult

__all__ = ["ReplayRun", "ReplayRunner", "replay_in_lockstep"]


@dataclass
class ReplayRun:
    """One lockstep replay: what it produced and what crossed the wire."""

    result: ReplayResult
    sent: list[dict[str, Any]] = field(default_factory=list)  # client events, as sent
    received: list[dict[str, Any]] = field(default_factory=list)  # server events, as received

    @property
    def heard(self) -> npt.NDArray[np.int16]:
        """What the listener heard, sample-aligned with the input (int16 mono, 24 kHz)."""
        assert self.result.heard is not None
        return self.result.heard

    @property
    def measured(self) -> Measured:
        """The figures expectations are judged on."""
        return measure(self.result)

    def sent_of(self, kind: str) -> list[dict[str, Any]]:
        """The client events of one ``type`` (e.g. ``conversation.item.truncate``), in order."""
        return [e for e in self.sent if e.get("type") == kind]

    def checks(self, **expect: Any) -> list[Check]:
        """Each expectation given (a farm manifest's ``expect`` keys), judged."""
        try:
            expectations = Expectations.model_validate(expect)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"] if p not in ("count", "range"))
            raise ConfigurationError(f"expectation {where}: {first['msg']}") from None
        return judge(expectations, self.measured)

    def check(self, **expect: Any) -> None:
        """Raise ``AssertionError`` naming every expectation that does not hold, e.g.
        ``check(barge_ins=1, max_cut_error_ms=10)``."""
        failed = [c for c in self.checks(**expect) if not c.ok]
        fatal = self.measured.fatal
        if failed or fatal:
            parts = [describe(c) for c in failed]
            raise AssertionError("; ".join(parts + [f"fatal session error: {m}" for m in fatal]))


class ReplayRunner(Protocol):
    """What the pytest plugin's ``voxline_replay`` fixture gives: :func:`replay_in_lockstep`, for a test to annotate
    its argument with."""

    def __call__(
        self,
        recording: str | Path | npt.NDArray[np.int16],
        *,
        scenario: str | Path | Scenario | None = None,
        transcripts: list[str] | tuple[str, ...] | None = None,
        tools: ToolRegistry | str | None = None,
        voice: str = "tone",
        tail_s: float = 30.0,
        settings: SessionSettings | None = None,
        **options: Any,
    ) -> ReplayRun: ...


def replay_in_lockstep(
    recording: str | Path | npt.NDArray[np.int16],
    *,
    scenario: str | Path | Scenario | None = None,
    transcripts: list[str] | tuple[str, ...] | None = None,
    tools: ToolRegistry | str | None = None,
    voice: str = "tone",
    tail_s: float = 30.0,
    settings: SessionSettings | None = None,
    **options: Any,
) -> ReplayRun:
    """Replay ``recording`` in lockstep against the built-in server's engine.

    ``scenario`` is a built-in name, a TOML file or a :class:`Scenario` (default: ``default``);
    ``transcripts`` script the user's turns (default: a WAV's sidecar ``.txt``, if any); ``tools``
    a :class:`ToolRegistry` or ``MODULE:ATTR``. ``voice`` is the server's (``tone`` needs nothing
    installed). Further ``options`` go to :func:`~.driver.run_replay` (``echo``, ``aec``, ...).
    """
    if loop_running():
        raise ConfigurationError("replay_in_lockstep runs a lockstep event loop of its own and cannot run inside "
                                 "another: call it from a plain (not async) test, or from a thread "
                                 "(await asyncio.to_thread(voxline_replay, ...))")
    if settings is not None and not isinstance(settings, SessionSettings):
        raise TypeError(f"settings takes a SessionSettings, not {type(settings).__name__}")
    if scenario is not None and not isinstance(scenario, (str, Path, Scenario)):
        raise TypeError(f"scenario takes a built-in name, a TOML path or a Scenario, not {type(scenario).__name__}")
    if isinstance(recording, np.ndarray):
        samples = recording
    elif not isinstance(recording, (str, Path)):
        raise TypeError(f"recording takes a WAV path or an int16 array, not {type(recording).__name__}")
    else:
        path = Path(recording)
        samples = load_input(path, quiet=True)
        if transcripts is None:
            transcripts = transcripts_for(path)
    plan = scenario if isinstance(scenario, Scenario) else load_scenario(scenario)
    if transcripts is not None:
        plan = with_transcripts(plan, transcripts)
    registry = load_tools(tools, "tools") if isinstance(tools, str) else tools
    base = settings or SessionSettings(url="ws://local", api_key=SecretStr(LOCAL_KEY))
    session = base.model_copy(update={"transcribe": transcripts is not None})
    run = ReplayRun(ReplayResult(None))

    def on_wire(direction: str, text: str) -> None:
        (run.sent if direction == "out" else run.received).append(json.loads(text))

    run.result = replay_fast(samples, scenario=plan, settings=session, voice=voice, tail_s=tail_s, on_wire=on_wire,
                             tools=registry, **options)
    return run
