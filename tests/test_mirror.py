"""The conversation mirror, fed plain lists of typed server events (no sockets, no clock)."""

from __future__ import annotations

import base64
import dataclasses
import json
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voxline.realtime import events as ev
from voxline.realtime.errors import ConfigurationError
from voxline.realtime.events import parse_server_event, server_event_sample
from voxline.realtime.protocol import RealtimeProtocol
from voxline.realtime.server.engine.core import Engine
from voxline.realtime.server.engine.ids import IdFactory
from voxline.realtime.server.engine.responses import Pacing
from voxline.realtime.server.engine.scenario import parse_scenario
from voxline.realtime.server.engine.state import EngineConfig
from voxline.session.events import BargeIn
from voxline.session.mirror import ConversationMirror, HeardEstimate, MirrorItem, Skipped, estimate_heard_text, plan_rebuild
from voxline.session.tools.calls import CallTracker
from tests.support.counted_ids import CountedId
from tests.support.oracle import check_client_event, check_server_event
from tests.support.server_events import audio_b64, wire

# Server events, each checked against the official SDK before it is parsed.


def user_text(item_id: str, text: str) -> dict[str, Any]:
    content = [{"type": "input_text", "text": text}]
    return {"id": item_id, "object": "realtime.item", "type": "message", "role": "user", "status": "completed",
            "content": content}


def user_audio(item_id: str, transcript: str | None = None) -> dict[str, Any]:
    content = [{"type": "input_audio", "transcript": transcript}]
    return {"id": item_id, "object": "realtime.item", "type": "message", "role": "user", "status": "completed",
            "content": content}


def assistant(item_id: str, status: str = "in_progress", content: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"id": item_id, "object": "realtime.item", "type": "message", "role": "assistant", "status": status,
            "content": content or []}


def call_item(item_id: str, call_id: str, arguments: str = "", status: str = "in_progress") -> dict[str, Any]:
    return {"id": item_id, "object": "realtime.item", "type": "function_call", "status": status,
            "call_id": call_id, "name": "get_weather", "arguments": arguments}


def output_item(item_id: str, call_id: str, output: str) -> dict[str, Any]:
    return {"id": item_id, "object": "realtime.item", "type": "function_call_output", "status": "completed",
            "call_id": call_id, "output": output}


def added(item: dict[str, Any], previous: str | None) -> Any:
    return wire("conversation.item.added", item=item, previous_item_id=previous)


def done(item: dict[str, Any], previous: str | None) -> Any:
    return wire("conversation.item.done", item=item, previous_item_id=previous)


def spoken_reply(item_id: str, previous: str | None, words: list[str], *, ms_per_word: int = 100,
                 response_id: str = "resp_1", finish: bool = True) -> list[Any]:
    """An assistant audio item as the service streams it: one audio and one transcript delta per word."""
    ref = {"response_id": response_id, "output_index": 0}
    part = {**ref, "item_id": item_id, "content_index": 0}
    events = [
        wire("response.output_item.added", **ref, item=assistant(item_id)),
        added(assistant(item_id), previous),
        wire("response.content_part.added", **part, part={"type": "audio", "transcript": ""}),
    ]
    for index, word in enumerate(words):
        events.append(wire("response.output_audio.delta", **part, delta=audio_b64(ms_per_word)))
        events.append(wire("response.output_audio_transcript.delta", **part, delta=(" " if index else "") + word))
    if finish:
        transcript = " ".join(words)
        final = assistant(item_id, "completed", [{"type": "output_audio", "transcript": transcript}])
        events += [
            wire("response.output_audio.done", **part),
            wire("response.output_audio_transcript.done", **part, transcript=transcript),
            wire("response.content_part.done", **part, part={"type": "audio", "transcript": transcript}),
            wire("response.output_item.done", **ref, item=final),
            done(final, previous),
        ]
    return events


def mirror_of(events: list[Any]) -> ConversationMirror:
    mirror = ConversationMirror()
    mirror.apply_all(events)
    return mirror


def ids(mirror: ConversationMirror) -> list[str]:
    return [item.id for item in mirror.items()]


def barge_in(item_id: str, heard_ms: float, received_ms: float, audio_end_ms: int | None,
             deleted: tuple[str, ...] = ()) -> BargeIn:
    return BargeIn(trigger="server_vad", at=1.0, item_id=item_id, heard_ms=heard_ms, received_ms=received_ms,
                   audio_end_ms=audio_end_ms, deleted=deleted, cancelled=False, reaction_s=0.005)


# Order.


def test_items_follow_previous_item_id_null_root_and_deletes() -> None:
    mirror = mirror_of([
        added(user_text("a", "A"), None),
        added(user_text("b", "B"), "a"),
        added(user_text("c", "C"), "a"),  # inserted between a and b
        added(user_text("r", "R"), "root"),
        wire("conversation.item.deleted", item_id="c"),
        added(user_text("z", "Z"), "item_we_never_saw"),  # unknown predecessor: last
    ])
    assert ids(mirror) == ["r", "a", "b", "z"]
    assert len(mirror) == 4 and "c" not in mirror and mirror.get("c") is None
    assert [(i.id, i.deleted, i.text) for i in mirror.deleted()] == [("c", True, "C")]
    later = mirror_of([added(user_text("a", "A"), None), added(user_text("b", "B"), None)])
    assert ids(later) == ["b", "a"]  # null: the item has no predecessor, so it is first


def test_a_known_item_keeps_its_place_and_takes_the_servers_update() -> None:
    mirror = mirror_of([
        added(user_text("a", "A"), None),
        added(user_audio("b"), "a"),
        done({**user_audio("b", "hello"), "status": "completed"}, None),
        wire("conversation.item.retrieved", item=user_text("a", "A2")),
    ])
    assert ids(mirror) == ["a", "b"]
    assert mirror.get("b").text == "hello" and mirror.get("a").text == "A2"  # type: ignore[union-attr]


def test_snapshots_do_not_change_when_the_mirror_does() -> None:
    mirror = mirror_of(spoken_reply("item_a", None, ["Hi"], finish=False))
    before = mirror.items()
    mirror.apply(wire("response.output_audio_transcript.delta", response_id="resp_1", output_index=0,
                      item_id="item_a", content_index=0, delta=" there"))
    assert before[0].text == "Hi" and mirror.get("item_a").text == "Hi there"  # type: ignore[union-attr]
    with pytest.raises(dataclasses.FrozenInstanceError):
        before[0].status = "x"  # type: ignore[misc]


def test_events_about_other_things_are_ignored() -> None:
    mirror = ConversationMirror()
    for sample in ("error", "rate_limits.updated", "input_audio_buffer.speech_started", "response.created"):
        mirror.apply(parse_server_event(json.dumps(server_event_sample(sample))))
    mirror.apply(parse_server_event('{"type": "some.future_event", "x": 1}'))
    assert mirror.items() == [] and mirror.deleted() == []


# Text.


def test_assistant_transcript_deltas_accumulate_and_done_replaces() -> None:
    events = spoken_reply("item_a", None, ["Hello", "there,", "friend."], finish=False)
    mirror = mirror_of(events)
    item = mirror.get("item_a")
    assert item is not None
    assert (item.kind, item.role, item.status, item.text) == ("message", "assistant", "in_progress", "Hello there, friend.")
    assert item.audio_ms_received == pytest.approx(300) and item.response_id == "resp_1"
    assert item.parts[0].type == "output_audio" and item.has_audio  # the SDK's "audio", in GA spelling
    mirror.apply(wire("response.output_audio_transcript.done", response_id="resp_1", output_index=0,
                      item_id="item_a", content_index=0, transcript="Hello there, my friend."))
    assert mirror.get("item_a").text == "Hello there, my friend."  # type: ignore[union-attr]


def test_text_output_deltas_and_done() -> None:
    ref = {"response_id": "resp_t", "output_index": 0, "item_id": "item_t", "content_index": 0}
    mirror = mirror_of([
        added(assistant("item_t"), None),
        wire("response.output_text.delta", **ref, delta="Two "),
        wire("response.output_text.delta", **ref, delta="plus two"),
    ])
    item = mirror.get("item_t")
    assert item is not None and item.text == "Two plus two" and item.parts[0].type == "output_text"
    assert not item.has_audio and item.response_id == "resp_t"
    mirror.apply(wire("response.output_text.done", **ref, text="Two plus two is four."))
    assert mirror.get("item_t").heard_text == "Two plus two is four."  # type: ignore[union-attr]


def test_user_transcription_fills_the_audio_item_when_it_arrives() -> None:
    delta = {"item_id": "item_u", "content_index": 0}
    mirror = mirror_of([
        wire("input_audio_buffer.committed", item_id="item_u", previous_item_id=None),
        added(user_audio("item_u"), None),
        done(user_audio("item_u"), None),
        wire("conversation.item.input_audio_transcription.delta", **delta, delta="what is"),
    ])
    assert mirror.get("item_u").text == "what is"  # type: ignore[union-attr]
    mirror.apply(wire("conversation.item.input_audio_transcription.completed", **delta,
                      transcript="What is the weather?", usage={"type": "duration", "seconds": 1.2}))
    item = mirror.get("item_u")
    assert item is not None and item.text == "What is the weather?" and item.parts[0].type == "input_audio"
    mirror.apply(done(user_audio("item_u", None), None))  # a later copy without a transcript erases nothing
    assert mirror.get("item_u").text == "What is the weather?"  # type: ignore[union-attr]


def test_audio_is_counted_in_the_sessions_output_format() -> None:
    session = server_event_sample("session.updated")["session"]
    session["audio"]["output"]["format"] = {"type": "audio/pcmu"}
    part = {"response_id": "resp_1", "output_index": 0, "item_id": "item_a", "content_index": 0}
    mirror = mirror_of([
        wire("session.updated", session=session),
        added(assistant("item_a"), None),
        wire("response.output_audio.delta", **part, delta=base64.b64encode(bytes(800)).decode()),
        wire("response.output_audio.delta", **part, delta=base64.b64encode(bytes(5)).decode()),  # padded
    ])
    assert mirror.bytes_per_ms == 8.0 and mirror.get("item_a").audio_ms_received == pytest.approx(100.625)  # type: ignore[union-attr]


# Tools.


def tool_turn(previous: str | None) -> list[Any]:
    ref = {"response_id": "resp_f", "output_index": 0}
    final = call_item("item_f", "call_1", '{"city":"Paris"}', "completed")
    response = server_event_sample("response.done")["response"] | {"id": "resp_f", "output": [final]}
    return [
        wire("response.output_item.added", **ref, item=call_item("item_f", "call_1")),
        added(call_item("item_f", "call_1"), previous),
        wire("response.function_call_arguments.delta", **ref, item_id="item_f", call_id="call_1", delta='{"ci'),
        wire("response.function_call_arguments.delta", **ref, item_id="item_f", call_id="call_1", delta='ty":"Paris"}'),
        wire("response.function_call_arguments.done", **ref, item_id="item_f", call_id="call_1",
             name="get_weather", arguments='{"city":"Paris"}'),
        wire("response.output_item.done", **ref, item=final),
        done(final, previous),
        wire("response.done", response=response),
    ]


def test_tool_calls_and_their_client_created_outputs() -> None:
    events = [added(user_text("item_u", "Weather?"), None), *tool_turn("item_u")]
    mirror = mirror_of(events[:4])  # up to the first argument delta
    call = mirror.get("item_f")
    assert call is not None and call.kind == "function_call" and call.arguments == '{"ci' and not call.arguments_done
    mirror.apply_all(events[5:])
    mirror.apply(added(output_item("item_o", "call_1", '{"temp_c":21}'), "item_f"))  # our create, echoed
    call, output = mirror.get("item_f"), mirror.get("item_o")
    assert call is not None and output is not None
    assert (call.call_id, call.name, call.arguments, call.arguments_done, call.status, call.response_id) == (
        "call_1", "get_weather", '{"city":"Paris"}', True, "completed", "resp_f")
    assert (output.kind, output.call_id, output.output, output.role) == ("function_call_output", "call_1",
                                                                          '{"temp_c":21}', None)
    assert ids(mirror) == ["item_u", "item_f", "item_o"]


# Truncation and barge-in.

WORDS = "one two three four five six seven eight nine ten".split()


def test_truncate_keeps_the_received_text_and_marks_the_cut() -> None:
    mirror = mirror_of(spoken_reply("item_a", None, WORDS))  # 1000 ms, 10 words
    mirror.apply(wire("conversation.item.truncated", item_id="item_a", content_index=0, audio_end_ms=400))
    cut = assistant("item_a", "incomplete", [{"type": "output_audio", "transcript": None}])
    mirror.apply(done(cut, None))  # the service dropped its transcript
    item = mirror.get("item_a")
    assert item is not None
    assert (item.truncated, item.cut_ms, item.status, item.text) == (True, 400, "incomplete", " ".join(WORDS))
    assert item.heard_text == "one two three four"


def test_barge_in_records_the_heard_ms_and_freezes_the_item() -> None:
    mirror = mirror_of(spoken_reply("item_a", None, WORDS[:6], finish=False))  # 600 ms received so far
    mirror.apply_barge_in(barge_in("item_a", heard_ms=310.0, received_ms=600.0, audio_end_ms=310))
    part = {"response_id": "resp_1", "output_index": 0, "item_id": "item_a", "content_index": 0}
    mirror.apply(wire("response.output_audio_transcript.delta", **part, delta=" seven"))  # late: not counted
    mirror.apply(wire("response.output_audio.delta", **part, delta=audio_b64(100)))
    full = assistant("item_a", "incomplete", [{"type": "output_audio", "transcript": " ".join(WORDS[:8])}])
    mirror.apply(wire("response.output_item.done", response_id="resp_1", output_index=0, item=full))
    item = mirror.get("item_a")
    assert item is not None and item.heard_ms == 310.0 and not item.truncated
    assert item.text == "one two three four five six" and item.audio_ms_received == pytest.approx(600)
    assert item.heard == HeardEstimate("one two three", "arrival")  # the words whose delta came within 310 ms
    assert mirror.rebuild_commands()[0]["item"]["content"] == [{"type": "output_text", "text": "one two three"}]
    mirror.apply(wire("conversation.item.truncated", item_id="item_a", content_index=0, audio_end_ms=150))
    assert mirror.get("item_a").heard_text == "one"  # type: ignore[union-attr]  # the smaller cut wins


def test_barge_in_received_ms_stands_in_when_no_audio_events_came() -> None:
    mirror = mirror_of([added(assistant("item_w", "in_progress", [{"type": "output_audio", "transcript": "a b c d"}]),
                              None)])  # over WebRTC the audio is a media track
    mirror.apply_barge_in(barge_in("item_w", heard_ms=500.0, received_ms=1000.0, audio_end_ms=None))
    item = mirror.get("item_w")
    assert item is not None and item.audio_ms_received == 1000.0 and item.heard_text == "a b"


@pytest.mark.parametrize(
    ("text", "heard", "total", "expected"),
    [
        ("one two three four", 500, 1000, "one two"),
        ("one two three four", 0, 1000, ""),
        ("one two three four", 1000, 1000, "one two three four"),
        ("one two three four", 2000, 1000, "one two three four"),
        ("one two three four", 100, 0, ""),
        ("supercalifragilistic", 600, 1000, "supercalifragilistic"),
        ("supercalifragilistic", 400, 1000, ""),
    ],
)
def test_heard_text_is_a_proportional_estimate_at_word_ends(text: str, heard: float, total: float,
                                                            expected: str) -> None:
    assert estimate_heard_text(text, heard, total) == expected


def test_items_deleted_by_a_barge_in_are_skipped_before_and_after_the_server_confirms() -> None:
    events = [added(user_text("item_u", "Tell me two things."), None),
              *spoken_reply("item_a", "item_u", WORDS[:4]),
              *spoken_reply("item_b", "item_a", WORDS[4:8], finish=False)]
    mirror = mirror_of(events)
    mirror.apply_barge_in(barge_in("item_a", heard_ms=200.0, received_ms=400.0, audio_end_ms=200,
                                   deleted=("item_b",)))
    plan = mirror.plan_rebuild()
    assert plan.item_ids == ("item_u", "item_a") and Skipped("item_b", "deleted_by_barge_in") in plan.skipped
    assert mirror.pending_deletes == ("item_b",)
    mirror.apply(wire("conversation.item.deleted", item_id="item_b"))
    assert mirror.pending_deletes == () and [i.id for i in mirror.deleted()] == ["item_b"]
    assert mirror.plan_rebuild().item_ids == ("item_u", "item_a") and mirror.plan_rebuild().skipped == ()


def test_an_item_deleted_before_its_generation_ended_stays_deleted() -> None:
    """A reply cut before anything was heard is deleted at once; the end of its generation (its
    ``conversation.item.done``, which the local server sends after the deletion) brings nothing back."""
    events = [added(user_text("item_u", "Go."), None),
              *spoken_reply("item_a", "item_u", WORDS[:4], finish=False),
              wire("conversation.item.deleted", item_id="item_a"),
              done(assistant("item_a"), "item_u"),
              added(user_text("item_v", "Thanks."), "item_u")]
    mirror = mirror_of(events)
    assert ids(mirror) == ["item_u", "item_v"] and [i.id for i in mirror.deleted()] == ["item_a"]
    again = mirror_of([*events, added(user_text("item_a", "The same id, created anew."), "item_v")])
    assert ids(again) == ["item_u", "item_v", "item_a"]  # an id created again after its deletion is a new item


def test_a_barge_in_that_knows_nothing_of_the_item_changes_nothing() -> None:
    mirror = mirror_of(spoken_reply("item_a", None, WORDS[:3]))
    mirror.apply_barge_in(barge_in("item_a", heard_ms=0.0, received_ms=0.0, audio_end_ms=None))
    assert mirror.get("item_a").heard_ms is None  # type: ignore[union-attr]
    mirror.apply_barge_in(barge_in("item_a", heard_ms=0.0, received_ms=300.0, audio_end_ms=None, deleted=("item_a",)))
    assert mirror.pending_deletes == ("item_a",) and mirror.get("item_a").heard_ms is None  # type: ignore[union-attr]


# Rebuild.


def conversation() -> ConversationMirror:
    """A conversation with one of each kind of item the rebuild has to think about."""
    mcp = {"id": "item_m", "type": "mcp_list_tools", "server_label": "s", "tools": []}
    events = [
        added(user_audio("item_u1", "What's the weather in Paris?"), None),
        added(user_text("item_u2", "And be brief."), "item_u1"),
        *spoken_reply("item_a1", "item_u2", ["Let", "me", "check."]),
        *tool_turn("item_a1"),
        added(output_item("item_o1", "call_1", '{"temp_c":21}'), "item_f"),
        *spoken_reply("item_a2", "item_o1", WORDS),
        wire("conversation.item.truncated", item_id="item_a2", content_index=0, audio_end_ms=500),
        added(user_audio("item_u3"), "item_a2"),  # no transcription: nothing to say
        added(mcp, "item_u3"),
        added(call_item("item_f2", "call_2", '{"city":"Rome"}', "completed"), "item_m"),  # no output yet
        added(call_item("item_f3", "call_3", '{"ci'), "item_f2"),  # arguments never finished
        *spoken_reply("item_a3", "item_f3", ["Still", "talking"], finish=False),
    ]
    return mirror_of(events)


def test_rebuild_commands_are_valid_chained_and_keep_ids() -> None:
    plan = conversation().plan_rebuild()
    for command in plan.commands:
        check_client_event(command)
    assert plan.item_ids == ("item_u1", "item_u2", "item_a1", "item_f", "item_o1", "item_a2", "item_f2")
    assert [c["item"]["id"] for c in plan.commands] == list(plan.item_ids)
    assert [c["previous_item_id"] for c in plan.commands] == ["root", *plan.item_ids[:-1]]
    assert [c["item"].get("content") for c in plan.commands[:3]] == [
        [{"type": "input_text", "text": "What's the weather in Paris?"}],
        [{"type": "input_text", "text": "And be brief."}],
        [{"type": "output_text", "text": "Let me check."}],
    ]
    assert plan.commands[3]["item"] == {"id": "item_f", "type": "function_call", "call_id": "call_1",
                                        "name": "get_weather", "arguments": '{"city":"Paris"}'}
    assert plan.commands[4]["item"] == {"id": "item_o1", "type": "function_call_output", "call_id": "call_1",
                                        "output": '{"temp_c":21}'}
    assert plan.commands[5]["item"]["content"] == [{"type": "output_text", "text": "one two three four five"}]
    assert plan.skipped == (Skipped("item_u3", "empty"), Skipped("item_m", "unsupported"),
                            Skipped("item_f3", "unfinished"), Skipped("item_a3", "unfinished"))


def test_rebuild_commands_go_through_the_protocol_core_unchanged() -> None:
    protocol = RealtimeProtocol()
    commands = conversation().rebuild_commands()
    for command in commands:
        protocol.send(command)
    frames = [json.loads(frame) for frame in protocol.data_to_send()]
    for frame in frames:
        check_client_event(frame)
    assert [{k: v for k, v in f.items() if k != "event_id"} for f in frames] == commands


def test_an_unfinished_item_counts_once_something_of_it_is_known() -> None:
    mirror = conversation()
    mirror.record_heard("item_a3", 100.0)  # the connection dropped while it played
    mirror.apply(added(output_item("item_o3", "call_3", '"not run"'), "item_a3"))
    plan = mirror.plan_rebuild()
    assert plan.item_ids[-4:] == ("item_f2", "item_f3", "item_a3", "item_o3")
    assert plan.commands[-2]["item"]["content"] == [{"type": "output_text", "text": "Still"}]
    assert plan.commands[-3]["item"]["arguments"] == '{"ci'  # its output exists: the call goes with it


def test_an_output_without_its_call_is_left_out() -> None:
    mirror = mirror_of([added(output_item("item_o", "call_x", "1"), None), added(user_text("item_u", "hi"), "item_o")])
    plan = mirror.plan_rebuild()
    assert plan.item_ids == ("item_u",) and plan.skipped == (Skipped("item_o", "orphan_output"),)
    assert plan.commands[0]["previous_item_id"] == "root"


def test_adopting_a_rebuild_drops_what_it_left_out() -> None:
    mirror = conversation()
    plan = mirror.plan_rebuild()
    mirror.adopt_rebuild(plan)
    assert tuple(ids(mirror)) == plan.item_ids
    assert {i.id for i in mirror.deleted()} == {s.item_id for s in plan.skipped}
    assert mirror.plan_rebuild().commands == plan.commands


def test_a_rebuild_carries_the_newest_items_and_forgets_the_older_ones() -> None:
    """Every item of a conversation of days went to each new connection (9,686 creates after four hours, a second
    of the loop): the newest ``keep`` go, the older are counted, and the mirror forgets them once adopted."""
    mirror = conversation()
    whole = mirror.plan_rebuild()
    plan = mirror.plan_rebuild(keep=6)
    assert plan.older == len(mirror) - 6 == 5 and plan.commands[0]["previous_item_id"] == "root"
    assert plan.item_ids == ("item_a2", "item_f2") == whole.item_ids[-2:]
    mirror.adopt_rebuild(plan)
    assert tuple(ids(mirror)) == plan.item_ids and mirror.plan_rebuild(keep=6).older == 0
    assert mirror.plan_rebuild().commands == plan.commands
    # a window that begins at a tool output reaches back to its call: the output is never left without it
    plan = conversation().plan_rebuild(keep=7)
    assert plan.older == 3 and plan.item_ids[:3] == ("item_f", "item_o1", "item_a2")


def test_a_conversation_keeps_its_newest_items_past_the_bound() -> None:
    from voxline.session.mirror.order import MAX_ITEMS, ItemOrder
    from voxline.session.mirror.records import MirrorItem

    def item(item_id: str) -> MirrorItem:
        return MirrorItem(id=item_id, kind="message", item_type="message", role="user")

    order = ItemOrder()
    for n in range(MAX_ITEMS + 10):
        order.place(item(f"i{n}"), order.last_id())
    assert len(order) == MAX_ITEMS and next(iter(order)).id == "i10" and order.get("i9") is None
    order.place(item("first"), "root")  # placed first at the bound: it stays, the oldest other goes
    assert [i.id for i in order][:2] == ["first", "i11"] and len(order) == MAX_ITEMS


def test_the_settings_bound_a_rebuild_to_what_the_conversation_keeps() -> None:
    from voxline.session.mirror.order import MAX_ITEMS
    from voxline.session.settings import SessionSettings, SettingsError

    assert SessionSettings(rebuild_items=MAX_ITEMS).rebuild_items == MAX_ITEMS
    with pytest.raises(SettingsError):
        SessionSettings(rebuild_items=MAX_ITEMS + 1)


# JSON.


def test_json_round_trip_keeps_everything() -> None:
    mirror = conversation()
    mirror.apply_barge_in(barge_in("item_a1", 150.0, 300.0, 150, deleted=("item_a3",)))
    mirror.apply(wire("conversation.item.deleted", item_id="item_u2"))
    mirror.apply(wire("response.output_item.added", response_id="resp_9", output_index=0, item=assistant("item_n")))
    data = mirror.to_json()
    assert data["version"] == 1
    text = json.dumps(data)  # plain JSON types only
    again = ConversationMirror.from_json(json.loads(text))
    assert again.to_json() == data
    assert again.items() == mirror.items() and again.deleted() == mirror.deleted()
    assert again.pending_deletes == ("item_a3",)
    assert again.rebuild_commands() == mirror.rebuild_commands()
    again.apply(added(assistant("item_n"), "item_a3"))
    assert again.get("item_n").response_id == "resp_9"  # type: ignore[union-attr]


def test_export_and_load(tmp_path: Any) -> None:
    mirror = conversation()
    path = tmp_path / "mirror.json"
    mirror.export(path)
    assert json.loads(path.read_text(encoding="utf-8")) == mirror.to_json()
    assert ConversationMirror.load(path).items() == mirror.items()


@pytest.mark.parametrize(
    "data",
    [
        {"version": 2, "bytes_per_ms": 48.0, "items": [], "deleted": [], "pending_deletes": [], "response_of": {}},
        {"version": 1, "bytes_per_ms": 48.0, "items": [{"id": "a"}], "deleted": [], "pending_deletes": [],
         "response_of": {}},
        {"version": 1, "bytes_per_ms": 48.0, "items": [{"id": "a", "kind": "message", "item_type": "message"}] * 2,
         "deleted": [], "pending_deletes": [], "response_of": {}},
        {"version": 1},
    ],
)
def test_invalid_state_is_a_clear_error(data: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError, match="invalid conversation mirror state"):
        ConversationMirror.from_json(data)


def test_loading_a_file_that_is_not_json_is_a_clear_error(tmp_path: Any) -> None:
    path = tmp_path / "bad.json"
    path.write_text("[1, 2", encoding="utf-8")
    with pytest.raises(ConfigurationError, match="cannot read conversation mirror state"):
        ConversationMirror.load(path)


# Hypothesis: add / done / delete / truncate against a plain list.

POOL = ["item_a", "item_b", "item_c", "item_d", "item_e"]
previous_ids = st.sampled_from([None, "root", "item_unknown", *POOL])
operations = st.lists(
    st.one_of(
        st.tuples(st.just("added"), st.sampled_from(POOL), previous_ids),
        st.tuples(st.just("done"), st.sampled_from(POOL), previous_ids),
        st.tuples(st.just("deleted"), st.sampled_from(POOL), st.none()),
        st.tuples(st.just("truncated"), st.sampled_from(POOL), st.integers(0, 5000)),
    ),
    max_size=40,
)


def model_step(order: list[str], cuts: dict[str, int], gone: set[str], op: tuple[str, str, Any]) -> None:
    kind, item_id, arg = op
    if kind == "done" and item_id in gone and item_id not in order:
        return  # the end of a deleted item's generation: it stays deleted (added anew, it is back)
    if kind in ("added", "done") and item_id not in order:
        index = 0 if arg in (None, "root") else (order.index(arg) + 1 if arg in order else len(order))
        order.insert(index, item_id)
        cuts.pop(item_id, None)
    elif kind == "deleted" and item_id in order:
        order.remove(item_id)
        gone.add(item_id)
    elif kind == "truncated" and item_id in order:
        cuts[item_id] = arg


def wire_op(op: tuple[str, str, Any]) -> Any:
    kind, item_id, arg = op
    if kind in ("added", "done"):
        return wire(f"conversation.item.{kind}", item=assistant(item_id), previous_item_id=arg)
    if kind == "deleted":
        return wire("conversation.item.deleted", item_id=item_id)
    return wire("conversation.item.truncated", item_id=item_id, content_index=0, audio_end_ms=arg)


@settings(max_examples=200, deadline=None)
@given(operations)
def test_random_add_delete_truncate_sequences_match_a_list_model(ops: list[tuple[str, str, Any]]) -> None:
    mirror = ConversationMirror()
    order: list[str] = []
    cuts: dict[str, int] = {}
    gone: set[str] = set()
    for op in ops:
        mirror.apply(wire_op(op))
        model_step(order, cuts, gone, op)
        assert ids(mirror) == order and len(mirror) == len(order)
        for item_id in POOL:
            item = mirror.get(item_id)
            assert (item is not None) == (item_id in order)
            if item is not None:
                assert (item.truncated, item.cut_ms) == ((True, cuts[item_id]) if item_id in cuts else (False, None))
    assert {i.id for i in mirror.deleted()} == gone
    assert ConversationMirror.from_json(json.loads(json.dumps(mirror.to_json()))).items() == mirror.items()
    plan = mirror.plan_rebuild()
    assert [i for i in order if i in plan.item_ids] == list(plan.item_ids)
    assert set(plan.item_ids) | {s.item_id for s in plan.skipped} == set(order)


# The rebuild against the built-in server's engine.

RATE = 24000


def fake_voice(text: str) -> np.ndarray:
    """20 ms of a saw-tooth per character."""
    return ((np.arange(len(text) * RATE * 20 // 1000) % 2000) - 1000).astype(np.int16)


class Server:
    """A local server engine; everything it sends is checked against the SDK and parsed."""

    def __init__(self, turns: list[dict[str, Any]] | None = None) -> None:
        scenario = parse_scenario({"turns": turns or [{"say": "Hi."}]})
        config = EngineConfig(pacing=Pacing(speed=math.inf, chunk_ms=100, latency_s=0.0))
        self.engine = Engine(config, scenario, fake_voice, wall_time=1_700_000_000.0, ids=IdFactory(3))
        self.sent: list[dict[str, Any]] = []
        self.mirror = ConversationMirror()
        self._take(self.engine.open())

    def _take(self, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for event in events:
            check_server_event(event)
            self.mirror.apply(parse_server_event(json.dumps(event)))
        self.sent += events
        return events

    def send(self, command: dict[str, Any]) -> list[dict[str, Any]]:
        check_client_event(command)
        events = self.engine.receive(json.dumps(command), 0.0)
        assert not [e for e in events if e["type"] == "error"], events
        return self._take(events + self.engine.poll(0.0))

    def added_ids(self) -> list[str]:
        return [e["item"]["id"] for e in self.sent if e["type"] == "conversation.item.added"]


def create(item: dict[str, Any]) -> dict[str, Any]:
    return {"type": "conversation.item.create", "item": item}


def test_rebuild_recreates_the_same_items_in_the_same_order_on_the_engine() -> None:
    first = Server([
        {"output": [{"say": "Let me check."}, {"call": "get_weather", "arguments": {"city": "Paris"}}],
         "after": "It is sunny in Paris today with a light breeze."},
        {"output": [{"call": "get_time", "arguments": {"zone": "UTC"}}]},
    ])
    first.send(create({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Weather?"}]}))
    first.send({"type": "response.create"})
    call = next(i for i in first.mirror.items() if i.kind == "function_call")
    assert call.arguments_done and call.call_id is not None
    first.send(create({"type": "function_call_output", "call_id": call.call_id, "output": '{"sky":"clear"}'}))
    reply = first.send({"type": "response.create"})
    spoken = next(e["item"]["id"] for e in reply if e["type"] == "conversation.item.added")
    heard_ms = 470  # of 47 characters x 20 ms
    first.send({"type": "conversation.item.truncate", "item_id": spoken, "content_index": 0, "audio_end_ms": heard_ms})
    first.mirror.apply_barge_in(barge_in(spoken, heard_ms=heard_ms, received_ms=940.0, audio_end_ms=heard_ms))
    tracker = CallTracker()
    for event in first.send({"type": "response.create"}):
        if event["type"] == "response.function_call_arguments.done":
            tracker.on_arguments_done(event["response_id"], event["item_id"], event["call_id"], event["name"],
                                      event["arguments"])
        elif event["type"] == "response.done":
            tracker.on_response_done(event["response"]["id"], event["response"]["status"])

    mirror = ConversationMirror.from_json(json.loads(json.dumps(first.mirror.to_json())))  # e.g. a new process
    plan = mirror.plan_rebuild()
    assert plan.skipped == () and list(plan.item_ids) == first.added_ids() == ids(first.mirror)
    assert mirror.get(spoken).heard_text == "It is sunny in Paris today"  # type: ignore[union-attr]

    second = Server()
    for command in plan.commands:
        second.send(command)
    assert second.added_ids() == list(plan.item_ids) == ids(second.mirror)
    assert [i.heard_text for i in second.mirror.items()] == [i.heard_text for i in mirror.items()]
    open_call = tracker.runnable()[0]
    assert tracker.begin(open_call.call_id)
    tracker.on_result(open_call.call_id, {"utc": "12:00"})
    for command in tracker.commands():
        second.send(ev.client_event_dict(command))  # the output the tracker owed lands after its call, recreated
    output = next(e for e in second.sent if e["type"] == "conversation.item.added"
                  and e["item"].get("call_id") == open_call.call_id and e["item"]["type"] == "function_call_output")
    assert output["previous_item_id"] == open_call.item_id == plan.item_ids[-1]
    assert plan_rebuild(second.mirror.items()).commands[-2]["item"]["call_id"] == open_call.call_id


def test_a_mirror_item_is_plain_data() -> None:
    item = MirrorItem("i", "message", "message", role="user")
    assert item.text == "" and item.heard_text == "" and not item.frozen and item.listened_ms is None


def test_audio_deltas_add_up_without_a_record_each_and_any_read_sees_them() -> None:
    mirror = ConversationMirror()
    head = spoken_reply("item_a", None, ["one"], finish=False)[:3]
    mirror.apply_all(head)
    record = mirror.get("item_a")
    part = {"response_id": "resp_1", "output_index": 0, "item_id": "item_a", "content_index": 0}
    mirror.apply(wire("response.output_audio.delta", **part, delta=audio_b64(20)))
    stored = mirror._order.get("item_a")  # the record as the mirror holds it, unread
    for _ in range(49):
        mirror.apply(wire("response.output_audio.delta", **part, delta=audio_b64(20)))
    assert mirror._order.get("item_a") is stored  # no delta made a new record
    item = mirror.get("item_a")  # a read folds the running count in
    assert item is not None and item is not record and item.audio_ms_received == pytest.approx(1000.0)
    assert record is not None and record.audio_ms_received == 0.0  # a snapshot stays as it was
    for _ in range(10):
        mirror.apply(wire("response.output_audio.delta", **part, delta=audio_b64(20)))
    assert mirror.to_json()["items"][0]["audio_ms_received"] == pytest.approx(1200.0)
    for _ in range(5):
        mirror.apply(wire("response.output_audio.delta", **part, delta=audio_b64(20)))
    mirror.record_heard("item_a", 700.0)  # a cut folds first: what came before it counts, nothing after
    mirror.apply(wire("response.output_audio.delta", **part, delta=audio_b64(20)))
    cut = mirror.get("item_a")
    assert cut is not None and cut.audio_ms_received == pytest.approx(1300.0) and cut.heard_ms == 700.0


def test_audio_counted_before_another_event_is_in_the_record_that_event_makes() -> None:
    events = spoken_reply("item_a", None, ["alpha", "beta", "gamma"], ms_per_word=100)
    mirror = ConversationMirror()
    marks = []
    for event in events:
        mirror.apply(event)
        if event.type == "response.output_audio_transcript.delta":
            item = mirror.get("item_a")
            assert item is not None
            marks.append(item.text_marks[-1][1])
    assert marks == [pytest.approx(100.0), pytest.approx(200.0), pytest.approx(300.0)]  # audio received by each word


@st.composite
def reply_events(draw: st.DrawFn) -> list[Any]:
    """Two assistant items streaming at once, deltas of random sizes interleaved with other events."""
    part_a = {"response_id": "resp_1", "output_index": 0, "item_id": "item_a", "content_index": 0}
    part_b = {"response_id": "resp_1", "output_index": 1, "item_id": "item_b", "content_index": 0}
    events: list[Any] = [
        wire("response.output_item.added", response_id="resp_1", output_index=0, item=assistant("item_a")),
        added(assistant("item_a"), None),
        wire("response.content_part.added", **part_a, part={"type": "audio", "transcript": ""}),
        added(assistant("item_b"), "item_a"),  # no output_item.added: its response is learnt from its deltas
    ]
    steps = draw(st.lists(st.sampled_from(["audio_a", "word_a", "audio_b", "word_b", "word_a1", "other", "cut_b"]),
                          max_size=40))
    for step in steps:
        match step:
            case "audio_a" | "audio_b":
                part = part_a if step == "audio_a" else part_b
                ms = draw(st.integers(min_value=1, max_value=300))
                events.append(wire("response.output_audio.delta", **part, delta=audio_b64(ms)))
            case "word_a" | "word_b":
                part = part_a if step == "word_a" else part_b
                events.append(wire("response.output_audio_transcript.delta", **part, delta=draw(st.sampled_from([" one", "two", " é", ""]))))
            case "word_a1":  # a second part of the same item: its own text
                events.append(wire("response.output_audio_transcript.delta", **{**part_a, "content_index": 1}, delta=" x"))
            case "other":
                events.append(wire("rate_limits.updated", rate_limits=[]))
            case "cut_b":
                events.append(wire("conversation.item.truncated", item_id="item_b", content_index=0, audio_end_ms=50))
    return events


@settings(max_examples=150, deadline=None)
@given(reply_events())
def test_held_deltas_fold_into_the_records_a_read_after_every_event_would_show(events: list[Any]) -> None:
    lazy, eager = ConversationMirror(), ConversationMirror()
    for event in events:
        lazy.apply(event)
        eager.apply(event)
        eager.items()  # a read folds everything held, so each delta lands in a record of its own
    assert lazy.items() == eager.items()
    assert lazy.to_json() == eager.to_json()


def test_transcript_deltas_of_a_reply_make_no_record_each_and_a_read_sees_them() -> None:
    events = spoken_reply("item_a", None, ["alpha", "beta", "gamma"], ms_per_word=100, finish=False)
    mirror = ConversationMirror()
    mirror.apply_all(events[:4])  # up to the first audio delta
    mirror.apply(events[4])  # the first word: its mark folds the audio before it
    stored = mirror._order.get("item_a")
    mirror.apply_all(events[5:])
    assert mirror._order.get("item_a") is stored  # neither words nor audio made a new record
    item = mirror.get("item_a")
    assert item is not None and item.text == "alpha beta gamma"
    assert item.text_marks == ((0, 100.0), (5, 200.0), (10, 300.0)) and item.audio_ms_received == 300.0


# ---------------------------------------------------------------------------- a conversation of days


def _item(item_id: str) -> MirrorItem:
    return MirrorItem(id=item_id, kind="message", item_type="message", role="user")


def test_placing_an_item_after_the_last_and_removing_a_recent_one_cost_the_same_in_a_long_conversation() -> None:
    """Each item was placed by a look through every id from the first (100 µs an item at 10,000 items, 1 ms at
    100,000: a kiosk's session of days), and a cut's deletions the same: they are looked for among the newest first."""
    from voxline.base.ordered import TAIL
    from voxline.session.mirror.order import ItemOrder

    order = ItemOrder()
    for n in range(4000):
        order.place(_item(CountedId(f"item_{n}")), order.last_id())
    CountedId.compared = 0
    order.place(_item(CountedId("item_new")), "item_3999")
    order.place(_item(CountedId("item_after_unknown")), "item_nobody_knows")
    assert order.remove("item_3998") is not None
    assert CountedId.compared <= 3 * TAIL + 8  # a few dozen steps each, not thousands
    ids = [item.id for item in order]
    assert ids[-4:] == ["item_3997", "item_3999", "item_new", "item_after_unknown"] and len(ids) == 4001


@given(st.lists(st.tuples(st.sampled_from(["place", "remove"]), st.integers(0, 12), st.integers(-2, 12)),
                max_size=60))
def test_item_order_places_and_removes_as_a_plain_list_would(steps: list[tuple[str, int, int]]) -> None:
    from voxline.session.mirror.order import ItemOrder

    order, plain = ItemOrder(), []
    for op, n, after in steps:
        item_id = f"i{n}"
        if op == "remove":
            order.remove(item_id)
            if item_id in plain:
                plain.remove(item_id)
            continue
        previous = None if after == -2 else "root" if after == -1 else f"i{after}"
        order.place(_item(item_id), previous)
        if item_id not in plain:
            at = 0 if previous in (None, "root") else plain.index(previous) + 1 if previous in plain else len(plain)
            plain.insert(at, item_id)
        assert [item.id for item in order] == plain


def test_a_mirror_keeps_the_newest_deleted_items_only() -> None:
    from voxline.session.mirror.mirror import DELETED_KEPT

    mirror = ConversationMirror()
    for n in range(DELETED_KEPT + 50):
        mirror.apply(wire("conversation.item.added", previous_item_id=None, item=user_text(f"item_{n}", "hi")))
        mirror.apply(wire("conversation.item.deleted", item_id=f"item_{n}"))
    kept = [item.id for item in mirror.deleted()]
    assert len(kept) == DELETED_KEPT and kept[-1] == f"item_{DELETED_KEPT + 49}" and kept[0] == "item_50"
