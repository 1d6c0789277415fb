"""Text cut to show is redacted before it is cut: a cut that halves a secret leaves nothing recognisable."""

from __future__ import annotations

import io
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voxline.base.redaction import forget_secret, register_secret
from voxline.base.shown import clip
from voxline.realtime import frames
from voxline.session.eventlog import EventLog

SECRET = "QZ7X2LM9ZT4WV8RB3KC6QZ7X"  # of letters and digits no filler below holds


def _pieces(secret: str) -> list[str]:
    return [secret[i:i + 5] for i in range(len(secret) - 4)]


@settings(max_examples=300, deadline=None)
@given(before=st.integers(0, 700), after=st.integers(0, 300), limit=st.integers(2, 400), flat=st.booleans(),
       filler=st.sampled_from(["x", "ab ", "\n  c"]))
def test_no_part_of_a_registered_secret_survives_any_cut(before: int, after: int, limit: int, flat: bool,
                                                         filler: str) -> None:
    text = (filler * before)[:before] + SECRET + (filler * after)[:after]
    register_secret(SECRET)
    try:
        shown = clip(text, limit, flat=flat)
    finally:
        forget_secret(SECRET)
    assert len(shown) <= limit
    assert not any(piece in shown for piece in _pieces(SECRET)), shown
    if len(text) <= limit and not flat:
        assert shown == text.replace(SECRET, "[redacted]") or len(text.replace(SECRET, "[redacted]")) > limit


def test_a_huge_text_is_read_only_as_far_as_its_cut_needs(monkeypatch: pytest.MonkeyPatch) -> None:
    from voxline.base import shown

    given: list[int] = []
    real = shown.redact
    monkeypatch.setattr(shown, "redact", lambda text: given.append(len(text)) or real(text))
    huge = "y" * 50_000_000
    assert clip(huge, 40) == "y" * 39 + "…"
    assert clip("y " * 25_000_000, 40, flat=True).endswith("…")
    assert given and max(given) < 5_000


def test_a_secret_cut_in_a_frames_short_value_or_an_unparsed_line_of_the_event_log_is_not_shown_in_part() -> None:
    register_secret(SECRET)
    try:
        assert not any(piece in frames.short("bad status " * 2 + SECRET) for piece in _pieces(SECRET))
        sink = io.StringIO()
        log = EventLog(sink, lambda: 0.0)
        log.wire("in", "x" * 185 + " key " + SECRET)  # not JSON: kept as a cut line
        log.close()
    finally:
        forget_secret(SECRET)
    unparsed = [json.loads(line)["event"]["unparsed"] for line in sink.getvalue().splitlines()]
    assert unparsed and not any(piece in text for text in unparsed for piece in _pieces(SECRET)), unparsed


@pytest.mark.parametrize("before", [0, 50, 52])
def test_a_user_transcript_line_shows_no_part_of_a_key_however_it_is_cut(before: int) -> None:
    """The replay's user line was the first 60 characters of what the server heard, never redacted: a key said
    (or echoed) whole was printed whole, and one across the cut in part."""
    from voxline.session.events import TranscriptDone
    from voxline.session.replay.result import ReplayLines

    register_secret(SECRET)
    try:
        line = ReplayLines().line(TranscriptDone("user", "item_1", "x" * before + SECRET + " and more"), 1.0)
    finally:
        forget_secret(SECRET)
    assert line is not None and "user transcript" in line
    assert not any(piece in line for piece in _pieces(SECRET)), line


def test_a_malformed_frames_excerpt_shows_no_part_of_a_key_at_its_cut() -> None:
    register_secret(SECRET)
    try:
        shown = frames.excerpt("y" * 195 + SECRET + "}" * 1000)
    finally:
        forget_secret(SECRET)
    assert len(shown) <= 201 and not any(piece in shown for piece in _pieces(SECRET)), shown
