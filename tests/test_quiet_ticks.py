"""Skipping the ticks :attr:`SessionCore.quiet_until` calls quiet changes nothing the session reports.

Two cores take the same server events and the same playout blocks; one ticks after every
block, the other only when its ``quiet_until`` has passed. Every tick the second skipped
must have done nothing in the first, and the two must agree on everything else.
"""

from __future__ import annotations

import base64
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from voxline.audio.playout import PlayoutBuffer
from voxline.session.core import NO_CORE_EFFECTS, SessionCore
from tests.support.protocol_frames import frame, response

BLOCK = 480
RATE = 24_000


def _audio(samples: int) -> str:
    return base64.b64encode(np.full(samples, 100, "<i2").tobytes()).decode()


def _reply(n: int, deltas: list[tuple[int, int]], words: list[int], done_at: int | None) -> list[tuple[int, dict[str, Any]]]:
    """Server events of reply ``n`` as (block, payload): audio deltas (block, length in blocks), words, the ends."""
    rid, iid = f"resp_{n}", f"item_{n}"
    item = {"id": iid, "object": "realtime.item", "type": "message", "role": "assistant", "content": []}
    first = min((b for b, _ in deltas), default=0)
    out: list[tuple[int, dict[str, Any]]] = [
        (first, {"type": "response.created", "response": response(rid)}),
        (first, {"type": "response.output_item.added", "response_id": rid, "output_index": 0, "item": item}),
    ]
    for block, blocks in sorted(deltas):
        out.append((block, {"type": "response.output_audio.delta", "response_id": rid, "item_id": iid, "output_index": 0,
                            "content_index": 0, "delta": _audio(BLOCK * blocks)}))
    for block in words:
        out.append((block, {"type": "response.output_audio_transcript.delta", "response_id": rid, "item_id": iid,
                            "output_index": 0, "content_index": 0, "delta": "word "}))
    if done_at is not None:
        end = max(done_at, max((b for b, _ in deltas), default=0))
        out.append((end, {"type": "response.output_audio.done", "response_id": rid, "item_id": iid, "output_index": 0,
                          "content_index": 0}))
        out.append((end, {"type": "response.done", "response": response(rid, "completed")}))
    return out


replies = st.lists(
    st.tuples(
        st.lists(st.tuples(st.integers(0, 60), st.integers(1, 40)), min_size=1, max_size=10),
        st.lists(st.integers(0, 60), max_size=6),
        st.one_of(st.none(), st.integers(0, 80)),
        st.integers(0, 120),  # offset of the reply, in blocks
    ),
    min_size=1,
    max_size=3,
)


@settings(max_examples=200, deadline=None)
@given(replies, st.one_of(st.none(), st.integers(0, 200)), st.sampled_from([0, 2]))
def test_quiet_ticks_do_nothing(plan: list[Any], barge_at: int | None, ahead: int) -> None:
    script: list[tuple[int, dict[str, Any]]] = []
    for n, (deltas, words, done_at, offset) in enumerate(plan):
        script += [(b + offset, p) for b, p in _reply(n, deltas, words, None if done_at is None else done_at + offset)]
    if barge_at is not None:
        script.append((barge_at, {"type": "input_audio_buffer.speech_started", "item_id": "item_u", "audio_start_ms": 0}))
        script.append((barge_at + 10, {"type": "input_audio_buffer.speech_stopped", "item_id": "item_u",
                                       "audio_end_ms": 200}))
    script.sort(key=lambda step: step[0])  # stable: each reply's own order is kept
    frames = [(block, frame(dict(payload))) for block, payload in script]

    worlds = []
    for skipping in (False, True):
        from voxline.realtime.protocol import RealtimeProtocol

        protocol, playout = RealtimeProtocol(), PlayoutBuffer()
        worlds.append((skipping, protocol, playout, SessionCore(protocol, playout), [], []))
    buf = np.zeros(BLOCK, np.int16)
    skipped = 0
    for k in range(320):
        now = k * BLOCK / RATE
        ticks = []
        for skipping, protocol, playout, core, log, effects_log in worlds:
            for _block, text in (f for f in frames if f[0] == k):
                protocol.receive(text)
                for out in protocol.events():
                    log.append(core.handle(out, now))
            protocol.data_to_send()
            playout.read_into(buf, now + ahead * BLOCK / RATE)  # ``ahead``: blocks handed out before they are heard
            if skipping and now < core.quiet_until:
                ticks.append(None)
                continue
            effects = core.tick(now)
            ticks.append(effects)
            effects_log.append((k, effects))
        full, quiet = ticks
        if quiet is None:
            skipped += 1
            assert full is NO_CORE_EFFECTS, f"block {k}: a skipped tick would have reported {full}"
        else:
            assert full == quiet
    (_, _, playout_a, core_a, log_a, _), (_, _, playout_b, core_b, log_b, _) = worlds
    assert log_a == log_b
    assert core_a._state is core_b._state
    assert {k: p.first_heard for k, p in core_a._parts.items()} == {k: p.first_heard for k, p in core_b._parts.items()}
    assert playout_a.sizes() == playout_b.sizes()


def test_a_steady_reply_ticks_only_at_its_retires_and_its_end() -> None:
    from voxline.realtime.protocol import RealtimeProtocol

    protocol, playout = RealtimeProtocol(), PlayoutBuffer()
    core = SessionCore(protocol, playout)
    script = _reply(0, [(0, 50), (1, 50), (2, 50)], [0, 1, 2], 3)  # 3 s of audio in the first blocks
    buf = np.zeros(BLOCK, np.int16)
    ticked = []
    for k in range(200):  # 4 s
        now = k * BLOCK / RATE
        for _b, payload in (s for s in script if s[0] == k):
            protocol.receive(frame(dict(payload)))
            for out in protocol.events():
                core.handle(out, now)
        playout.read_into(buf, now)
        if now >= core.quiet_until:
            core.tick(now)
            ticked.append(k)
    playing = [k for k in ticked if k < 150]
    assert len(playing) < 30  # every 10th block (the retires) and the blocks around the events, not 150
    assert core._state.value == "listening"  # the end of the reply was still seen
