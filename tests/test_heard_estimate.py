"""The heard-text estimate picks its method from the marks, whatever their number or order."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from voxline.session.mirror import estimate_heard

marks = st.lists(st.tuples(st.integers(0, 40), st.sampled_from([0.0, 100.0, 250.0, 400.0])), max_size=30)


@given(marks, st.floats(0.0, 500.0))
def test_arrival_is_used_exactly_when_two_marks_differ(text_marks: list[tuple[int, float]], heard_ms: float) -> None:
    text = "one two three four five six seven eight nine ten"
    got = estimate_heard(text, text_marks, heard_ms, 500.0)
    spread = len({ms for _offset, ms in text_marks}) >= 2
    assert got.method == ("arrival" if spread else "duration")
    assert text.startswith(got.text)


def test_a_cut_does_not_walk_every_mark_to_choose_the_method() -> None:
    class Counting(list[tuple[int, float]]):
        seen = 0

        def __iter__(self):  # type: ignore[no-untyped-def]
            for mark in super().__iter__():
                Counting.seen += 1
                yield mark

    many = Counting([(i, float(i)) for i in range(10_000)])
    got = estimate_heard("word " * 10_000, many, 0.0, 10_000.0)  # cut before any of it was heard
    assert (got.text, got.method) == ("", "arrival")
    assert Counting.seen < 10  # the method check stops at the second mark


ordered = st.lists(st.tuples(st.integers(0, 8), st.sampled_from([0.0, 40.0, 100.0, 250.0])), max_size=30).map(
    lambda steps: [(sum(s for s, _ in steps[: i + 1]), sorted(ms for _, ms in steps)[i]) for i in range(len(steps))])


@given(ordered, st.floats(0.0, 500.0))
def test_arrival_keeps_the_text_before_the_first_delta_beyond_what_was_heard(
        text_marks: list[tuple[int, float]], heard_ms: float) -> None:
    text = "one two three four five six seven eight nine ten"
    got = estimate_heard(text, text_marks, heard_ms, 500.0)
    if got.method == "arrival" and heard_ms > 0:
        beyond = [offset for offset, ms in text_marks if ms > heard_ms]
        assert got.text == text[: beyond[0] if beyond else len(text)].rstrip()


def test_a_cut_reads_a_few_marks_of_a_long_transcript() -> None:
    class Counting(list[tuple[int, float]]):
        seen = 0

        def __getitem__(self, index):  # type: ignore[no-untyped-def,override]
            Counting.seen += 1
            return super().__getitem__(index)

        def __iter__(self):  # type: ignore[no-untyped-def]
            for mark in super().__iter__():
                Counting.seen += 1
                yield mark

    many = Counting([(5 * i, float(i)) for i in range(10_000)])
    got = estimate_heard("word " * 10_000, many, 5_000.5, 10_000.0)
    assert got.method == "arrival" and got.text == ("word " * 5_001).rstrip()
    assert Counting.seen < 40  # a bisection, not a walk over every delta
