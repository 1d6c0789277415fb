"""Server events encoded with cached base64 spliced in: the same text as ``json.dumps``."""

from __future__ import annotations

import base64
import json

from hypothesis import given, strategies as st

from voxline.realtime.server.engine.speech import WireAudio
from voxline.realtime.server.engine.wire_json import Base64Text, encode_event

_ids = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)


@given(data=st.binary(max_size=600), start=st.integers(0, 300), event_id=_ids, item_id=_ids,
       index=st.integers(-5, 10**12))
def test_a_delta_of_cached_base64_encodes_as_json_dumps_does(data: bytes, start: int, event_id: str, item_id: str,
                                                             index: int) -> None:
    delta = WireAudio(data).b64(min(start, len(data)), len(data))
    assert type(delta) is Base64Text and delta == base64.b64encode(data[min(start, len(data)):]).decode()
    event = {"type": "response.output_audio.delta", "event_id": event_id, "response_id": "resp_1",
             "item_id": item_id, "output_index": index, "content_index": 0, "delta": delta}
    assert encode_event(event) == json.dumps(event)
    assert json.loads(encode_event(event)) == event


def test_other_events_and_deltas_not_last_or_plain_go_through_json_dumps() -> None:
    cached = Base64Text("AAAA")
    for event in ({"type": "response.output_audio_transcript.delta", "delta": 'say "hi"\n'},
                  {"delta": cached, "type": "x"},  # not the last key: the splice would reorder it
                  {"delta": cached},
                  {"type": "session.created", "session": {"id": "sess_1", "audio": None}}):
        assert encode_event(event) == json.dumps(event)
