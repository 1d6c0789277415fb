"""``response.create`` (and VAD-created responses): choose the scripted turn, build the run.

Only one response may write to the default conversation at a time
(``conversation_already_has_active_response``); out-of-band responses
(``conversation: "none"``) may run alongside it and are not added to the
conversation. An integer ``max_output_tokens`` cuts the reply
(:mod:`voxline.realtime.server.engine.budget`). See :mod:`voxline.realtime.server.engine.scenario` for how turns are chosen.

Spoken replies take their audio from the session's voice cache; a reply it does not hold
makes the response wait for the driver's speech (:mod:`voxline.realtime.server.engine.speech`).
Nothing here synthesizes.
"""

from __future__ import annotations

import re
from typing import Any, assert_never

from voxline.base.audio_format import AudioFormat
from voxline.realtime.server.engine import errors
from voxline.realtime.server.engine.budget import fit_budget
from voxline.realtime.server.engine.conversation import Entry
from voxline.realtime.server.engine.errors import RequestRejected
from voxline.realtime.server.engine.output_items import CallOutput, MessageOutput, OutputItem
from voxline.realtime.server.engine.responses import ResponseRun, RunSpec
from voxline.realtime.server.engine.scenario import Call, Output, Say, Turn
from voxline.realtime.server.engine.session_config import check_metadata, check_modalities, check_reasoning
from voxline.realtime.server.engine.state import SessionState
from voxline.realtime.server.hearing.phrases import first_heard
from voxline.realtime.server.engine.usage import audio_tokens, input_usage, speech_seconds, text_tokens

__all__ = ["check_params", "last_words", "next_outputs", "peek_turn", "render", "start_response"]

_PLACEHOLDER = re.compile(r"\{(user_seconds|user_text|turn)\}")
_ARGUMENT_DELTAS = 4


def check_params(state: SessionState, params: dict[str, Any]) -> None:
    """Refuse what the schema lets through and a response may not ask for; a response that waits to start is checked
    before it waits, so its start cannot fail (and there is a client event to answer then)."""
    check_reasoning(params, state.session.model, "response")
    check_metadata(params.get("metadata"), "response.metadata")
    check_modalities(params, "response")


def start_response(state: SessionState, params: dict[str, Any], now: float) -> list[dict[str, Any]]:
    """Start a response; return ``[response.created]`` (the rest comes from polling the run)."""
    check_params(state, params)
    out_of_band = params.get("conversation", "auto") == "none"
    if not out_of_band:
        active = state.default_run()
        if active is not None:
            raise RequestRejected(errors.active_response(active.response_id))
        state.idle_deadline = None
    modalities = list(params.get("output_modalities") or state.session.output_modalities)
    audio_output = state.session.output
    audio_output.pop("speed", None)
    audio_output.update(params.get("audio", {}).get("output", {}))
    fmt = AudioFormat.from_wire(audio_output["format"])  # the schema has checked it
    response_id = state.ids.new("resp")
    script = [
        Say(render(o.text, state)) if isinstance(o, Say) else o
        for o in (state.scenario.out_of_band if out_of_band else next_outputs(state))
    ]
    max_tokens = params.get("max_output_tokens", state.session.max_output_tokens)
    cut = False
    if isinstance(max_tokens, int):
        script, cut = fit_budget(script, max_tokens, lambda text: _cost(text, modalities))
    outputs = [
        _build(state, output, index, response_id, not out_of_band, modalities, fmt)
        for index, output in enumerate(script)
    ]
    if cut and outputs:
        outputs[-1].final_status = "incomplete"
    items = [] if out_of_band else list(state.conversation)
    spec = RunSpec(
        response_id=response_id,
        conversation_id=None if out_of_band else state.conversation_id,
        output_modalities=modalities,
        audio_output=audio_output,
        max_output_tokens=max_tokens,
        metadata=params.get("metadata"),
        output_format=fmt,
        input_tokens=input_usage(params.get("instructions", state.session.instructions), state.session.tools_tokens,
                                 items),
        incomplete=cut,
    )
    run = ResponseRun(
        spec,
        outputs,
        ids=state.ids,
        pacing=state.config.pacing,
        start=now,
        conversation=None if out_of_band else state.conversation,
        rate_limits=state.rate_limits,
    )
    state.runs.append(run)
    return [run.created_event()]


def next_outputs(state: SessionState) -> tuple[Output, ...]:
    """The outputs of the next default-conversation response (``after`` replies first)."""
    last = state.conversation.get(state.conversation.last_id) if state.conversation.last_id else None
    pending = state.pending_after
    if last is not None and last.item.get("type") == "function_call_output":
        if isinstance(pending, tuple):
            state.pending_after = None
            return pending
        if (resumed := _after_a_rebuilt_call(state, last.item)) is not None:
            return resumed
    turn = peek_turn(state)
    state.turn_index += 1
    outputs, after = turn.outputs, turn.after
    if turn.branches:
        chosen = first_heard([branch.heard for branch in turn.branches], last_words(state))
        if chosen is not None:
            outputs, after = turn.branches[chosen].outputs, turn.branches[chosen].after
    if after is not None:  # a reply in between (e.g. started by VAD) keeps an earlier turn's follow-up
        state.pending_after = after
    return outputs


def _after_a_rebuilt_call(state: SessionState, output: dict[str, Any]) -> tuple[Output, ...] | None:
    """A conversation the client rebuilt (after a drop) that ends with a tool's output: the reply the scenario gives
    after the turn that calls that tool, as a model would go on, rather than the script from its start."""
    call = next((entry.item for entry in state.conversation if entry.item.get("type") == "function_call"
                 and entry.item.get("call_id") == output.get("call_id")), None)
    if call is None:
        return None
    for index, turn in enumerate(state.scenario.turns):
        for outputs, after in ((turn.outputs, turn.after), *((b.outputs, b.after) for b in turn.branches)):
            if after is not None and any(isinstance(o, Call) and o.name == call.get("name") for o in outputs):
                state.turn_index = max(state.turn_index, index + 1)
                return after
    return None


def peek_turn(state: SessionState) -> Turn:
    """The turn the next default-conversation response takes (unless an ``after`` reply is due)."""
    turns = state.scenario.turns
    index = state.turn_index
    if index >= len(turns):
        index = index % len(turns) if state.scenario.after_last == "cycle" else len(turns) - 1
    return turns[index]


def last_words(state: SessionState) -> str:
    """What the user said last: the newest user item's transcript or text (``""`` if none)."""
    for entry in reversed(list(state.conversation)):
        if entry.item.get("role") != "user":
            continue
        for part in reversed(entry.item.get("content") or []):
            if part.get("type") == "input_audio":
                return str(part.get("transcript") or "")
            if part.get("type") == "input_text":
                return str(part.get("text", ""))
        return ""
    return ""


def render(text: str, state: SessionState) -> str:
    """Fill ``{user_seconds}``, ``{user_text}`` and ``{turn}`` from the conversation."""
    seconds, said = 0.0, ""
    for entry in state.conversation:
        if entry.item.get("role") != "user":
            continue
        for index, part in enumerate(entry.item.get("content") or []):
            if part.get("type") == "input_audio":
                seconds = entry.audio_ms(index) / 1000.0
                said = str(part.get("transcript") or said)
            elif part.get("type") == "input_text":
                said = str(part.get("text", ""))
    values = {"user_seconds": f"{seconds:.1f}", "user_text": said or "nothing", "turn": str(state.turn_index)}
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], text)


def _build(
    state: SessionState,
    output: Output,
    index: int,
    response_id: str,
    in_conversation: bool,
    modalities: list[str],
    fmt: AudioFormat,
) -> OutputItem:
    item_id = state.ids.new("item")
    match output:
        case Say(text=text):
            spoken = "audio" in modalities
            wire = state.voices.wire(text, fmt) if spoken else None
            item = {
                "id": item_id,
                "type": "message",
                "object": "realtime.item",
                "status": "in_progress",
                "role": "assistant",
                "content": [],
            }
            return MessageOutput(
                Entry(item, fmt=fmt),
                text,
                None if wire is None else wire.data,
                index,
                response_id,
                in_conversation,
                awaiting_voice=spoken and wire is None,
                encoded=wire,
            )
        case Call(name=name, arguments=arguments):
            call_id = state.ids.new("call", 16)
            item = {
                "id": item_id,
                "type": "function_call",
                "object": "realtime.item",
                "status": "in_progress",
                "call_id": call_id,
                "name": name,
                "arguments": "",
            }
            return CallOutput(
                Entry(item, fmt=fmt), index, response_id, in_conversation, _split(arguments)
            )
        case _:
            assert_never(output)


def _cost(text: str, modalities: list[str]) -> int:
    """Estimated output tokens of a message (transcript or text, plus audio), from the text alone."""
    tokens = text_tokens(text)
    if "audio" in modalities:
        tokens += audio_tokens(speech_seconds(text), output=True)
    return tokens


def _split(arguments: str) -> list[str]:
    """Arguments in up to four nearly equal deltas."""
    if not arguments:
        return []
    n = min(_ARGUMENT_DELTAS, len(arguments))
    size = -(-len(arguments) // n)
    return [arguments[i : i + size] for i in range(0, len(arguments), size)]
