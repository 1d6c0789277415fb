"""The local server's ids: the service's formats, reproducible when seeded, distinct when not."""

from __future__ import annotations

import re

from voxline.realtime.server.engine.ids import IdFactory, event

SUFFIX = re.compile(r"[A-Za-z0-9]+")


def test_ids_keep_the_prefix_and_a_base62_suffix_of_the_asked_length() -> None:
    for factory in (IdFactory(), IdFactory(5)):
        for prefix, length in (("event", 21), ("item", 21), ("call", 16), ("ek", 32)):
            for mint in (factory.new, factory.secret):
                value = mint(prefix, length)
                head, _, suffix = value.partition("_")
                assert head == prefix and len(suffix) == length and SUFFIX.fullmatch(suffix), value


def test_a_seed_repeats_the_sequence_and_another_seed_does_not() -> None:
    def run(seed: int) -> list[str]:
        factory = IdFactory(seed)
        return [factory.new("event") for _ in range(50)] + [factory.secret("ek", 32)] + [factory.new("item")]

    assert run(3) == run(3)
    assert run(3) != run(4)


def test_unseeded_factories_draw_different_sequences() -> None:
    first, second = IdFactory(), IdFactory()
    a = [first.new("event") for _ in range(200)]
    b = [second.new("event") for _ in range(200)]
    assert len(set(a)) == 200 and not set(a) & set(b)
    assert first.secret("ek", 32) != second.secret("ek", 32)


def test_the_characters_cover_the_whole_alphabet() -> None:
    factory = IdFactory()
    seen = set("".join(factory.new("event").partition("_")[2] for _ in range(500)))
    assert seen == set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")


def test_event_puts_type_and_event_id_first() -> None:
    ev = event(IdFactory(1), "session.updated", session={})
    assert list(ev) == ["type", "event_id", "session"] and ev["event_id"].startswith("event_")
