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
