"""An all-day session holds constant memory: every per-item and per-response table stays small.

SessionCore, RealtimeProtocol, PlayoutBuffer and CallTracker run sans-I/O on plain listener
times through 10,000 turns; server events are plain dicts sent through ``protocol.receive``.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import numpy as np
import pytest

from voxline.audio.playout import PlayoutBuffer
from voxline.realtime import events as ev
from voxline.realtime.protocol import EVENT_HISTORY, ITEM_WINDOW, RealtimeProtocol
from voxline.session.core import SessionCore
from voxline.session.tools.calls import RETIRED_WINDOW, CallState, CallTracker

RATE = 24_000
REPLY = 4_800  # samples of assistant audio per turn (200 ms), in two deltas
DELTA = base64.b64encode(np.full(REPLY // 2, 100, "<i2").tobytes()).decode()
WINDOW = max(EVENT_HISTORY, ITEM_WINDOW, RETIRED_WINDOW)


class Kiosk:
    """A scripted server and a listener, driving the session's sans-I/O parts in lockstep."""

    def __init__(self) -> None:
        self.protocol = RealtimeProtocol()
        self.playout = PlayoutBuffer()
        self.core = SessionCore(self.protocol, self.playout)
        self.tracker = CallTracker()
        self.now = 0.0
        self.last_item = "root"
        self.truncates: list[dict[str, Any]] = []
        self.outputs = 0
        self.barge_ins = 0
        self._n = 0

    # -- the wire ----------------------------------------------------------------------
    def server(self, kind: str, **fields: Any) -> None:
        self._n += 1
        self.protocol.receive(json.dumps({"type": kind, "event_id": f"ev_{self._n}", **fields}))
        for out in self.protocol.events():
            self.barge_ins += self.core.handle(out, self.now).barge_in is not None
            self.tools(out)
        self.answer_client()

    def tools(self, out: Any) -> None:
        match out:
            case ev.ResponseFunctionCallArgumentsDone():
                for call in self.tracker.on_arguments_done(out.response_id, out.item_id, out.call_id, out.name,
                                                           out.arguments):
                    assert self.tracker.begin(call.call_id)
                    self.tracker.on_result(call.call_id, {"ok": True})
            case ev.ResponseDone():
                self.tracker.on_response_done(out.response.id, out.response.status or "completed")
            case ev.ConversationItemDeleted():
                self.tracker.on_item_deleted(out.item_id)
            case _:
                pass

    def answer_client(self) -> None:
        """Drain the tracker into the protocol, then answer what the client sent, as the server would."""
        for command in self.tracker.commands():
            self.protocol.send(command)
        for text in self.protocol.data_to_send():
            sent = json.loads(text)
            match sent["type"]:
                case "conversation.item.truncate":
                    self.truncates.append(sent)
                    self.server("conversation.item.truncated", item_id=sent["item_id"], content_index=0,
                                audio_end_ms=sent["audio_end_ms"])
                case "conversation.item.delete":
                    self.server("conversation.item.deleted", item_id=sent["item_id"])
                case "conversation.item.create":
                    self.outputs += 1
                    item = {"id": f"item_o{self._n}", "object": "realtime.item", **sent["item"]}
                    self.added(item)
                case _:
                    pass  # response.create: the next turn's response.created answers it

    def added(self, item: dict[str, Any]) -> None:
        self.server("conversation.item.added", item=item, previous_item_id=self.last_item)
        self.last_item = item["id"]

    # -- the listener ------------------------------------------------------------------
    def listen(self, seconds: float) -> None:
        """Play one big block from the current listener time; the listener is at its end."""
        n = round(seconds * RATE)
        self.playout.read(n, self.now)
        self.now += n / RATE
        assert self.core.tick(self.now).barge_in is None

    # -- one turn ----------------------------------------------------------------------
    def turn(self, n: int) -> None:
        rid, user, reply = f"resp_{n}", f"item_u{n}", f"item_a{n}"
        self.server("input_audio_buffer.speech_started", item_id=user, audio_start_ms=0)
        self.server("input_audio_buffer.speech_stopped", item_id=user, audio_end_ms=800)
        self.added(message(user, "user"))
        self.server("response.created", response=response(rid))
        self.added(message(reply, "assistant"))
        for _ in range(2):
            self.server("response.output_audio.delta", response_id=rid, item_id=reply, output_index=0,
                        content_index=0, delta=DELTA)
        self.server("response.output_audio_transcript.delta", response_id=rid, item_id=reply, output_index=0,
                    content_index=0, delta="Sure.")
        if n % 7 == 0:
            call = f"item_c{n}"
            self.added({"id": call, "object": "realtime.item", "type": "function_call", "call_id": f"call_{n}",
                        "name": "lookup", "arguments": "{}", "status": "completed"})
            self.server("response.function_call_arguments.done", response_id=rid, item_id=call, output_index=1,
                        call_id=f"call_{n}", name="lookup", arguments="{}")
        if n % 10 == 0:
            self.listen(0.05)
            self.now -= 0.025  # the user talks over the middle of what was just played
            self.server("input_audio_buffer.speech_started", item_id=f"{user}_b", audio_start_ms=0)
            self.server("response.done", response=response(rid, "cancelled"))
        else:
            self.server("response.output_audio_transcript.done", response_id=rid, item_id=reply, output_index=0,
                        content_index=0, transcript="Sure.")
            self.server("response.output_audio.done", response_id=rid, item_id=reply, output_index=0,
                        content_index=0)
            self.server("response.done", response=response(rid, "completed"))
        self.listen(0.5)

    def sizes(self) -> dict[str, int]:
        tables = {"core": self.core.sizes(), "protocol": self.protocol.sizes(), "playout": self.playout.sizes(),
                  "tracker": self.tracker.sizes()}
        return {f"{part}.{name}": n for part, sizes in tables.items() for name, n in sizes.items()}


def message(item_id: str, role: str) -> dict[str, Any]:
    return {"id": item_id, "object": "realtime.item", "type": "message", "role": role, "status": "completed",
            "content": []}


def response(rid: str, status: str = "in_progress") -> dict[str, Any]:
    return {"id": rid, "object": "realtime.response", "status": status, "output": [], "conversation_id": "conv_1"}


@pytest.mark.slow
def test_ten_thousand_turns_hold_constant_memory() -> None:
    kiosk = Kiosk()
    warm: dict[str, int] = {}
    late: dict[str, int] = {}
    for n in range(1, 10_001):
        kiosk.turn(n)
        peaks = warm if n <= 1_000 else late
        for name, size in kiosk.sizes().items():
            peaks[name] = max(peaks.get(name, 0), size)
        if n == 1_000:
            at_1000 = kiosk.sizes()
    at_10000 = kiosk.sizes()
    assert {name: size for name, size in late.items() if size > warm[name]} == {}, "grew after warm-up"
    assert max(late.values()) <= WINDOW
    assert at_10000 == at_1000  # the same phase of the script: the same tables, entry for entry
    # the session still answers exactly: every barge-in cut at what was heard, the last reply heard whole
    assert kiosk.barge_ins == len(kiosk.truncates) == 1_000
    assert {t["audio_end_ms"] for t in kiosk.truncates} == {30}  # 25 ms played + 5 ms fade
    assert kiosk.playout.heard_samples("item_a10000", 0, kiosk.now) == 30 * 24 + 1  # the last, cut reply
    assert kiosk.playout.received_samples("item_a9999") == 0  # retired: it can no longer be cut
    assert kiosk.outputs == 10_000 // 7 and kiosk.protocol.items[-1] == kiosk.last_item


def test_the_last_item_heard_stays_and_older_ones_retire() -> None:
    playout = PlayoutBuffer()
    playout.enqueue(np.ones(2400, np.int16), "A")
    playout.mark_complete("A")
    playout.read(2400, 0.0)
    assert playout.retire(1.0) == []  # A is the last heard: a barge-in in silence still names it
    playout.enqueue(np.ones(2400, np.int16), "B")
    playout.read(2400, 0.1)
    assert playout.retire(0.1 - 1 / RATE) == []  # B is handed out, not yet heard: a cut may still name A
    assert playout.retire(0.1) == ["A"]  # B's first sample is at the listener
    assert playout.heard_samples("B", 0, 1.0) == 2400 and playout.received_samples("A") == 0
    cut = playout.interrupt(1.0)
    assert cut.item_id == "B" and not cut.playing
    assert playout.sizes()["received"] == 1


def test_a_cut_item_retires_once_a_later_one_is_heard() -> None:
    playout = PlayoutBuffer()
    playout.enqueue(np.ones(4800, np.int16), "A")
    playout.read(4800, 0.0)
    cut = playout.interrupt(0.05)
    assert cut.item_id == "A" and playout.retire(1.0) == []
    assert playout.enqueue(np.ones(10, np.int16), "A") is False  # late audio of the cut item is refused
    playout.enqueue(np.ones(2400, np.int16), "B")
    playout.read(2400, 1.0)
    assert playout.retire(1.05) == ["A"]
    assert playout.sizes() == {"received": 1, "complete": 0, "closed": 0, "closed_items": 0, "queue_chunks": 0,
                               "spent_chunks": 0, "ledger_segments": 1, "ledger_items": 1, "ledger_settled": 0}


def test_a_dropped_response_is_forgotten_at_its_done() -> None:
    p = RealtimeProtocol()
    p.receive(json.dumps({"type": "response.created", "event_id": "e1", "response": response("r1")}))
    p.drop_response("r1")
    p.receive(json.dumps({"type": "response.output_audio.delta", "event_id": "e2", "response_id": "r1",
                          "item_id": "a", "output_index": 0, "content_index": 0, "delta": DELTA}))
    assert p.is_dropped("r1") and not [e for e in p.events() if isinstance(e, ev.ResponseOutputAudioDelta)]
    p.receive(json.dumps({"type": "response.done", "event_id": "e3", "response": response("r1", "cancelled")}))
    assert not p.is_dropped("r1") and p.sizes()["dropping"] == 0
    p.drop_response("r1")  # already done: nothing more can come, nothing to remember
    assert p.sizes()["dropping"] == 0


def test_a_retired_call_id_is_still_never_run_twice() -> None:
    tracker = CallTracker()
    assert tracker.on_arguments_done("r", "item_c", "c", "lookup", "{}")
    assert tracker.begin("c")
    tracker.on_result("c", "done")
    tracker.on_response_done("r", "completed")
    assert len(tracker.commands()) == 2  # the output, then one response.create
    assert tracker.sizes() == {"calls": 0, "items": 0, "responses": 0, "pending": 0, "retired": 1}
    assert tracker.state("c") is CallState.ANSWERED
    assert tracker.on_arguments_done("r", "item_c", "c", "lookup", "{}") == []  # a duplicate after done
    restored = CallTracker.from_state(json.loads(json.dumps(tracker.export_state())))
    assert restored.on_arguments_done("r", "item_c", "c", "lookup", "{}") == [] and not restored.begin("c")
    assert restored.commands() == []
