"""One response from ``response.created`` to ``response.done``, as a timed schedule.

The run is sans-I/O: :meth:`ResponseRun.next_due` says when the next step is due
on the server's clock and :meth:`ResponseRun.advance` returns the events of every
step due by ``now``. A run whose replies are not voiced yet waits after
``response.created`` (:meth:`speech_needed`, ``next_due() is None``) and schedules its
steps from the moment :meth:`provide_speech` has voiced the last of them.
Assistant audio is paced faster than real time, like the real service: a 100 ms
chunk every ``0.1 / speed`` seconds (``speed = inf`` sends everything at once). :meth:`cancel` and :meth:`stop_item` take effect at once:
the remaining steps are dropped and the open item is closed as ``incomplete``.

Event order per audio item: ``response.output_item.added``,
``conversation.item.added``, ``response.content_part.added``, then per chunk
``response.output_audio_transcript.delta`` + ``response.output_audio.delta``, then
``response.output_audio.done``, ``response.output_audio_transcript.done``,
``response.content_part.done``, ``conversation.item.done``,
``response.output_item.done``. The run ends with ``response.done`` followed by
``rate_limits.updated`` (the order seen from the real service).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy.typing as npt

from voxline.base.arguments import as_error, real, whole
from voxline.base.audio_format import AudioFormat
from voxline.realtime.errors import ConfigurationError
from voxline.realtime.server.engine import wire_audio
from voxline.realtime.server.engine.conversation import Conversation
from voxline.realtime.server.engine.ids import IdFactory, event
from voxline.realtime.server.engine.output_items import CallOutput, MessageOutput, OutputItem
from voxline.realtime.server.engine.schedule import Schedule, Step
from voxline.realtime.server.engine.usage import RateLimits, audio_tokens, text_tokens, usage_object

__all__ = ["MAX_BURST_S", "STREAM_BURST_S", "Pacing", "ResponseRun", "RunSpec"]

STREAM_BURST_S = 0.03
"""The servers' burst: at 4x real time, two 100 ms chunks (and their transcript) per socket write."""
MAX_BURST_S = 1.0
_TEXT_STEP_S = 0.05
_ARGS_STEP_S = 0.02
_WORDS_PER_TEXT_DELTA = 3
_MAX_TOKENS = {"type": "incomplete", "reason": "max_output_tokens"}


@dataclass(frozen=True, slots=True)
class Pacing:
    """How fast responses stream: ``speed`` x real time (``inf`` = at once), chunk size, first-output latency,
    and ``burst_s``: steps due within that long after a poll go out with it, as one burst (0: each at its time)."""

    speed: float = 4.0
    chunk_ms: int = 100
    latency_s: float = 0.0
    burst_s: float = 0.0

    def __post_init__(self) -> None:
        with as_error(ConfigurationError, "Pacing"):
            real(self.speed, "speed", low=0, above=True, finite=False)
            whole(self.chunk_ms, "chunk_ms", low=1)
            real(self.latency_s, "latency_s", low=0)
            real(self.burst_s, "burst_s", low=0, high=MAX_BURST_S)


@dataclass(frozen=True, slots=True)
class RunSpec:
    """What ``response.created`` / ``response.done`` say about a response."""

    response_id: str
    conversation_id: str | None
    output_modalities: list[str]
    audio_output: dict[str, Any]
    max_output_tokens: int | str
    metadata: dict[str, Any] | None
    output_format: AudioFormat
    input_tokens: tuple[int, int]
    incomplete: bool = False


class ResponseRun:
    """A response being streamed; see the module docstring."""

    def __init__(
        self,
        spec: RunSpec,
        outputs: list[OutputItem],
        *,
        ids: IdFactory,
        pacing: Pacing,
        start: float,
        conversation: Conversation | None,
        rate_limits: RateLimits,
    ) -> None:
        self.spec = spec
        self.outputs = outputs
        self.status = "in_progress"
        self._ids = ids
        self._pacing = pacing
        self._conversation = conversation
        self._rate_limits = rate_limits
        self._opened: list[OutputItem] = []
        self._begin = start + pacing.latency_s
        self._steps = Schedule() if self._unvoiced() else Schedule(self._schedule(self._begin))
        self.stepped_at = start
        """When the last step made was due (a burst makes steps before they are due)."""
        self._audio_began: float | None = None  # when the first audio chunk was made

    @property
    def response_id(self) -> str:
        return self.spec.response_id

    @property
    def in_conversation(self) -> bool:
        return self._conversation is not None

    @property
    def done(self) -> bool:
        return self.status != "in_progress"

    @property
    def produced_audio(self) -> bool:
        return any(isinstance(o, MessageOutput) and o.entry.sizes.get(0) for o in self._opened)

    @property
    def audio_seconds(self) -> float:
        """Assistant audio sent so far, in seconds of playback."""
        return sum(o.entry.audio_ms(0) for o in self._opened if isinstance(o, MessageOutput)) / 1000.0

    def speech_needed(self) -> list[str]:
        """Texts of this response still waiting for their speech."""
        return [] if self.done else [o.text for o in self._unvoiced()]

    def provide_speech(self, text: str, samples: npt.ArrayLike, now: float) -> None:
        """Voice every waiting reply that says ``text``; once none waits, stream from ``now`` on."""
        waiting = [o for o in self._unvoiced() if o.text == text]
        if self.done or not waiting:
            return
        audio = wire_audio.from_pcm24k(samples, self.spec.output_format)
        for output in waiting:
            output.voice(audio)
        if not self._unvoiced():
            self._steps = Schedule(self._schedule(max(self._begin, now)))

    def item_ids(self) -> list[str]:
        return [o.item_id for o in self._opened]

    def created_event(self) -> dict[str, Any]:
        return event(self._ids, "response.created", response=self._response([], None))

    def next_due(self) -> float | None:
        return self._steps.next_due

    def advance(self, now: float) -> list[dict[str, Any]]:
        """Events of every step due at ``now`` or earlier."""
        events: list[dict[str, Any]] = []
        while (step := self.step(now)) is not None:
            events.extend(step)
        return events

    def step(self, upto: float, now: float | None = None) -> list[dict[str, Any]] | None:
        """The events of the next step if it is due by ``upto``, else None; ``now`` (default: when it was due)
        is when they are made."""
        step = self._steps.take_due(upto)
        if step is None:
            return None
        self.stepped_at = step.at
        if step.audio and self._audio_began is None:
            self._audio_began = step.at if now is None else now
        return step.action()

    def audio_lead(self, now: float) -> float | None:
        """How many seconds of audio this response has sent beyond what a listener who began playing with its
        first chunk has heard by ``now``: 0 while its next step is its first chunk; None while its next step sends
        no audio, or none is left."""
        head = self._steps.head
        if head is None or not head.audio:
            return None
        began = self._audio_began
        return 0.0 if began is None else self.audio_seconds - (now - began)

    def cancel(self, reason: str) -> list[dict[str, Any]]:
        """Stop now: close the open item as ``incomplete`` and finish as ``cancelled``."""
        if self.done:
            return []
        self._steps.clear()
        events: list[dict[str, Any]] = []
        for output in self._opened:
            if not output.closed:
                events.extend(self._close(output, "incomplete", finished=False))
        return events + self._finish("cancelled", {"type": "cancelled", "reason": reason})

    def stop_item(self, item_id: str) -> list[dict[str, Any]]:
        """Drop the rest of one open item (it was truncated) and close it as ``incomplete``."""
        for index, output in enumerate(self.outputs):
            if output.item_id == item_id and output in self._opened and not output.closed:
                self._steps.drop_output(index)
                return self._close(output, "incomplete", finished=False)
        return []

    # Scheduling.

    def _unvoiced(self) -> list[MessageOutput]:
        return [o for o in self.outputs if isinstance(o, MessageOutput) and o.awaiting_voice]

    def _schedule(self, t: float) -> Iterator[Step]:
        """The steps of the whole response from ``t`` on, in order, each made when the schedule reaches it."""
        speed = self._pacing.speed
        ids = self._ids
        for index, output in enumerate(self.outputs):
            yield Step(t, index, partial(self._open, output))
            if isinstance(output, CallOutput):
                for j in range(len(output.chunks)):
                    yield Step(t + j * _ARGS_STEP_S / speed, index, partial(output.arguments_chunk, ids))
                t += len(output.chunks) * _ARGS_STEP_S / speed
            elif output.audio is not None:
                yield from self._schedule_audio(index, output, t)
                t += self.spec.output_format.bytes_to_ms(len(output.audio)) / 1000.0 / speed
            else:
                groups = range(_WORDS_PER_TEXT_DELTA, len(output.words) + _WORDS_PER_TEXT_DELTA, _WORDS_PER_TEXT_DELTA)
                for j, upto in enumerate(groups):
                    yield Step(t + j * _TEXT_STEP_S / speed, index, partial(output.text_chunk, ids, upto))
                t += len(groups) * _TEXT_STEP_S / speed
            yield Step(t, index, partial(self._close, output, output.final_status))
        if self.spec.incomplete:
            yield Step(t, None, partial(self._finish, "incomplete", dict(_MAX_TOKENS)))
        else:
            yield Step(t, None, partial(self._finish, "completed", None))

    def _schedule_audio(self, index: int, output: MessageOutput, t: float) -> Iterator[Step]:
        assert output.audio is not None
        fmt = self.spec.output_format
        per_chunk = int(self._pacing.chunk_ms * fmt.bytes_per_ms)
        per_chunk -= per_chunk % fmt.bytes_per_sample
        total = len(output.audio)
        speed = self._pacing.speed
        for j, begin in enumerate(range(0, total, per_chunk)):
            end = min(total, begin + per_chunk)
            offset = j * self._pacing.chunk_ms / 1000.0 / speed
            yield Step(t + offset, index, partial(output.audio_chunk, self._ids, begin, end, end == total), True)

    # Events.

    def _open(self, output: OutputItem) -> list[dict[str, Any]]:
        previous: str | None = None
        if self._conversation is not None:
            previous = self._conversation.insert(output.entry)
        self._opened.append(output)
        return output.open(self._ids, previous)

    def _close(self, output: OutputItem, status: str, finished: bool = True) -> list[dict[str, Any]]:
        conversation = self._conversation
        previous = conversation.previous_id(output.item_id) if conversation is not None else None
        return output.close(self._ids, status, previous, finished)

    def _finish(self, status: str, details: dict[str, Any] | None) -> list[dict[str, Any]]:
        self.status = status
        usage = self._usage()
        done = event(
            self._ids,
            "response.done",
            response=self._response([copy.deepcopy(o.entry.item) for o in self._opened], usage, details),
        )
        limits = event(self._ids, "rate_limits.updated", rate_limits=self._rate_limits.spend(usage["total_tokens"]))
        return [done, limits]

    def _usage(self) -> dict[str, Any]:
        out_text = out_audio = 0
        for output in self._opened:
            if isinstance(output, CallOutput):
                out_text += text_tokens(output.entry.item["arguments"])
            else:
                out_text += text_tokens(output.sent_text)
                out_audio += audio_tokens(output.entry.audio_ms(0) / 1000.0, output=True)
        return usage_object(*self.spec.input_tokens, out_text, out_audio)

    def _response(
        self, output: list[dict[str, Any]], usage: dict[str, Any] | None, details: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        spec = self.spec
        return {
            "object": "realtime.response",
            "id": spec.response_id,
            "status": self.status,
            "status_details": details,
            "output": output,
            "conversation_id": spec.conversation_id,
            "output_modalities": list(spec.output_modalities),
            "max_output_tokens": spec.max_output_tokens,
            "audio": {"output": dict(spec.audio_output)},
            "usage": usage,
            "metadata": spec.metadata,
        }
