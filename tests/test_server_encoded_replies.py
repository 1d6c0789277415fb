"""The local server encodes a cached reply once for all its sessions, and sends the same bytes as before."""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re
from typing import Any

import numpy as np

from voxline.base.audio_format import PCM16_24K
from voxline.realtime.server.engine import Engine
from voxline.realtime.server.engine.ids import IdFactory
from voxline.realtime.server.engine.responses import Pacing
from voxline.realtime.server.engine.speech import VoiceCache
from voxline.realtime.server.engine.state import EngineConfig
from tests.support.engine_harness import Harness, fake_voice, script

_ID = re.compile(r"\b(event|item|resp|sess|call|conv)_[A-Za-z0-9]{16,32}\b")
REPLY = "A reply long enough for several chunks of audio, voiced by the fake voice."

# sha256 of the whole event stream (one JSON text per line) of a session answering one
# response.create, taken with the encoding made per chunk and per session; ids are masked (they
# are the id factory's business, tested in test_server_ids); taken again, the same but for
# conversation.item.done naming the item before it, once it did
STREAM_PCM = "a2331d9607df5a42ca1e863d17443eb61b8c394de540420475d8a3d52d779a4a"
STREAM_PCMU = "b889beebf231c97059cf924e15b6acba00afedc48b324174ffce47c54fc247d9"


def _stream(fmt: dict[str, Any] | None) -> tuple[str, int]:
    h = Harness(script({"say": REPLY}), speed=4.0)
    if fmt:
        h.send({"type": "session.update", "session": {"type": "realtime", "audio": {"output": {"format": fmt}}}})
    h.send({"type": "response.create"})
    events = h.run()
    text = _ID.sub(r"\1_*", "\n".join(json.dumps(e) for e in events))
    return hashlib.sha256(text.encode()).hexdigest(), len(events)


def test_the_wire_bytes_and_their_order_are_those_encoded_per_chunk() -> None:
    assert _stream(None) == (STREAM_PCM, 34)
    assert _stream({"type": "audio/pcmu"}) == (STREAM_PCMU, 34)


def _deltas(voices: VoiceCache, seed: int) -> list[str]:
    engine = Engine(EngineConfig(pacing=Pacing(speed=math.inf)), script({"say": REPLY}), voices,
                    wall_time=1_700_000_000.0, ids=IdFactory(seed))
    engine.open()
    events = engine.receive(json.dumps({"type": "response.create"}), 0.0) + engine.poll(0.0)
    return [e["delta"] for e in events if e["type"] == "response.output_audio.delta"]


def test_sessions_sharing_a_voice_cache_share_each_chunk_encoded_once() -> None:
    voices = VoiceCache.for_scenario(script({"say": REPLY}), fake_voice)
    first, second = _deltas(voices, 1), _deltas(voices, 2)
    assert len(first) > 3 and len(first) == len(second)
    assert all(a is b for a, b in zip(first, second, strict=True))  # the same text object: encoded once
    heard = np.frombuffer(b"".join(base64.b64decode(d) for d in first), dtype="<i2")
    assert np.array_equal(heard, fake_voice(REPLY))
    assert voices.wire(REPLY, PCM16_24K) is voices.wire(REPLY, PCM16_24K)


def test_a_reply_voiced_anew_is_encoded_anew() -> None:
    voices = VoiceCache.for_scenario(script({"say": REPLY}), fake_voice)
    before = voices.wire(REPLY, PCM16_24K)
    voices.put(REPLY, -fake_voice(REPLY))
    after = voices.wire(REPLY, PCM16_24K)
    assert before is not None and after is not None and after is not before
    assert np.array_equal(np.frombuffer(after.data, dtype="<i2"), -fake_voice(REPLY))
    assert voices.wire("never voiced", PCM16_24K) is None
