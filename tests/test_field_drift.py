"""The newest ``openai`` package's realtime fields, walked one by one against the local server.

Every field of the SDK's session (``session.update``), item (``conversation.item.create``) and
response request (``response.create``), at any depth and in every member of a union, is sent
alone (required siblings filled in). The server must accept it and echo it where the service
echoes it (``session.updated``, ``conversation.item.added``, ``response.created``), and must
refuse the same field with a value of the wrong JSON type, naming it. What it does not do is
listed below with the reason; the lists must stay exact, so a field the next SDK release adds
and the server mishandles fails here by name, and so does a gap that has been closed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any, Optional

from openai.types.realtime import ConversationItem, RealtimeResponse, RealtimeResponseCreateParams
from openai.types.realtime import RealtimeSessionCreateRequest

from tests.support.engine_harness import Harness
from tests.support.field_drift import Case, alternatives, cases, echoed
from tests.support.oracle import check_server_event

MCP = "MCP tools and items are not modelled by the local server (README: what is not modelled)"


def is_mcp(path: str) -> bool:
    """A field of an MCP tool, tool choice or item: refused as a whole (see ``MCP``)."""
    return bool(re.search(r"\[mcp|Mcp|mcp_", path))


# field path -> why the server refuses it, or echoes it otherwise than as sent
KNOWN: dict[str, str] = {
    **{f"item[RealtimeConversationItem{kind}].status": "a client-created item is complete: the server reports "
       "status 'completed' whatever was sent" for kind in ("SystemMessage", "UserMessage", "AssistantMessage",
                                                           "FunctionCall", "FunctionCallOutput")},
    **{f"item[RealtimeConversationItemAssistantMessage].content[].{f}": "assistant audio cannot be created by a "
       "client (the server's rule; the SDK's type allows it)" for f in ("audio", "transcript")},
    "response.audio.output.voice[OutputVoiceID]": "echoed as sent, but the SDK's RealtimeResponse declares no "
       "custom voice in audio.output.voice, so its own server event cannot read the echo",
    "item[RealtimeConversationItemUserMessage].content[].audio": "item events carry no audio bytes, as the "
       "service's do; conversation.item.retrieve returns them",
}
# fields whose wrongly typed value the server takes, and why
_SHALLOW = "response.create's input items and prompt are checked for their shape, not each nested field's type"
WRONG_TAKEN: dict[str, str] = {
    **{f"response.input[][message].content[].{f}": _SHALLOW for f in ("audio", "detail", "image_url", "text",
                                                                       "transcript")},
    "response.prompt.variables": _SHALLOW,
    "response.prompt.version": _SHALLOW,
}


def session_cases() -> Iterator[Case]:
    return cases(RealtimeSessionCreateRequest, "session.")


def item_cases() -> Iterator[Case]:
    for member in alternatives(ConversationItem):
        yield from cases(member, f"item[{member.__name__}].")


def response_cases() -> Iterator[Case]:
    return cases(RealtimeResponseCreateParams, "response.")


def send(kind: str, request: dict[str, Any]) -> dict[str, Any]:
    """The server's first answer to ``request`` as a session, item or response."""
    h = Harness()
    frame = {"session": {"type": "session.update", "session": request},
             "item": {"type": "conversation.item.create", "item": request},
             "response": {"type": "response.create", "response": request}}[kind]
    events = h.engine.receive(json.dumps(frame), h.now)
    return events[0]


def echo_of(kind: str, answer: dict[str, Any]) -> Any:
    return {"session": answer.get("session"), "item": answer.get("item"), "response": answer.get("response")}[kind]


def gaps(kind: str, found: Iterator[Case]) -> dict[str, str]:
    out: dict[str, str] = {}
    echoes_in_response = set(RealtimeResponse.model_fields)
    for case in found:
        answer = send(kind, case.request)
        if answer["type"] == "error":
            out[case.path] = f"refused: {answer['error']['message']}"
            continue
        sent = case.request
        if kind == "response":  # the service echoes only what its response object declares
            sent = {k: v for k, v in sent.items() if k in echoes_in_response}
        if not echoed(sent, echo_of(kind, answer)):
            out[case.path] = f"not echoed: sent {json.dumps(sent)}"
            continue
        try:
            check_server_event(answer)
        except AssertionError:
            out[case.path] = "echoed in a shape the SDK's own server event cannot read"
    return out


def test_every_session_item_and_response_field_is_accepted_and_echoed_or_named() -> None:
    found = {**gaps("session", session_cases()), **gaps("item", item_cases()), **gaps("response", response_cases())}
    mcp = {path for path, what in found.items() if is_mcp(path) and what.startswith("refused: Invalid value: 'mcp")}
    unexplained = {path: what for path, what in found.items() if path not in KNOWN and path not in mcp}
    closed = sorted(set(KNOWN) - set(found))
    assert not unexplained, "fields the local server does not handle as the service does:\n" + "\n".join(
        f"  {path}: {what}" for path, what in sorted(unexplained.items()))
    assert not closed, f"listed as gaps but now handled (remove them from KNOWN): {closed}"


def test_every_field_given_a_wrongly_typed_value_is_refused_by_name() -> None:
    taken: dict[str, str] = {}
    for kind, found in (("session", session_cases()), ("item", item_cases()), ("response", response_cases())):
        for case in found:
            if case.wrong is None or case.path in KNOWN or is_mcp(case.path):
                continue
            request = json.loads(json.dumps(case.request).replace(json.dumps(case.value), json.dumps(case.wrong), 1))
            answer = send(kind, request)
            if answer["type"] != "error":
                taken[case.path] = _SHALLOW if case.path in WRONG_TAKEN else f"took {case.wrong!r}"
            elif answer["error"]["param"] is None or not answer["error"]["param"].startswith(kind):
                taken[case.path] = f"refused without naming the field: {answer['error']}"
    assert taken == WRONG_TAKEN, "\n".join(f"{path}: {why}" for path, why in sorted(taken.items()))


def test_the_walk_reaches_the_fields_the_service_added_after_ga() -> None:
    paths = {c.path for c in (*session_cases(), *item_cases(), *response_cases())}
    for added in ("session.audio.input.noise_reduction.strength", "session.audio.input.transcription.keywords",
                  "session.audio.input.transcription.languages", "session.audio.input.transcription.delay",
                  "session.reasoning.effort", "session.parallel_tool_calls", "session.tools[][mcp].tunnel_id",
                  "session.tools[][mcp].allowed_callers", "session.tools[][mcp].defer_loading",
                  "session.truncation[retention_ratio].token_limits.post_instructions"):
        assert added in paths, added
    assert any(p.startswith("session.audio.output.voice[") for p in paths)  # the custom voice {id}
    assert len(paths) > 100
    assert sum(is_mcp(p) for p in paths) > 20  # MCP is named as one gap, field by field in the walk


def test_a_field_the_next_sdk_adds_shows_up_by_name() -> None:
    class NextSession(RealtimeSessionCreateRequest):  # what a later release might declare
        loudness: Optional[float] = None

    found = {path: what for path, what in gaps("session", cases(NextSession, "session.")).items() if not is_mcp(path)}
    assert found == {"session.loudness": "refused: Unknown parameter: 'session.loudness'."}
