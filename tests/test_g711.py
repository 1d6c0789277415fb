"""G.711 codecs against a per-sample transcription of the ITU-T G.191 reference algorithm."""

from __future__ import annotations

import numpy as np
import pytest

from voxline.audio.g711 import alaw_decode, alaw_encode, ulaw_decode, ulaw_encode

ALL_SAMPLES = np.arange(-32768, 32768, dtype=np.int32).astype(np.int16)
ALL_CODES = np.arange(256, dtype=np.int32).astype(np.uint8)


def ref_ulaw_compress(x: int) -> int:
    absno = ((~x) >> 2) + 33 if x < 0 else (x >> 2) + 33
    absno = min(absno, 0x1FFF)
    i = absno >> 6
    segno = 1
    while i != 0:
        segno += 1
        i >>= 1
    high = 8 - segno
    low = 15 - ((absno >> segno) & 0x0F)
    code = (high << 4) | low
    return code | 0x80 if x >= 0 else code


def ref_ulaw_expand(code: int) -> int:
    sign = -1 if code < 0x80 else 1
    mantissa = ~code
    exponent = (mantissa >> 4) & 0x07
    segment = exponent + 1
    mantissa &= 0x0F
    step = 4 << segment
    return sign * ((0x80 << exponent) + step * mantissa + step // 2 - 4 * 33)


def ref_alaw_compress(x: int) -> int:
    ix = (~x) >> 4 if x < 0 else x >> 4
    if ix > 15:
        iexp = 1
        while ix > 16 + 15:
            ix >>= 1
            iexp += 1
        ix -= 16
        ix += iexp << 4
    if x >= 0:
        ix |= 0x80
    return ix ^ 0x55


def ref_alaw_expand(code: int) -> int:
    ix = (code ^ 0x55) & 0x7F
    iexp = ix >> 4
    mant = ix & 0x0F
    if iexp > 0:
        mant += 16
    mant = (mant << 4) + 8
    if iexp > 1:
        mant <<= iexp - 1
    return mant if code > 127 else -mant


def test_ulaw_encode_matches_reference_on_every_int16() -> None:
    expected = np.array([ref_ulaw_compress(int(x)) for x in ALL_SAMPLES], dtype=np.uint8)
    np.testing.assert_array_equal(ulaw_encode(ALL_SAMPLES), expected)


def test_alaw_encode_matches_reference_on_every_int16() -> None:
    expected = np.array([ref_alaw_compress(int(x)) for x in ALL_SAMPLES], dtype=np.uint8)
    np.testing.assert_array_equal(alaw_encode(ALL_SAMPLES), expected)


def test_decoders_match_reference_on_every_code() -> None:
    np.testing.assert_array_equal(ulaw_decode(ALL_CODES), [ref_ulaw_expand(int(c)) for c in ALL_CODES])
    np.testing.assert_array_equal(alaw_decode(ALL_CODES), [ref_alaw_expand(int(c)) for c in ALL_CODES])


@pytest.mark.parametrize(
    ("decode", "code", "value"),
    [
        (ulaw_decode, 0xFF, 0),
        (ulaw_decode, 0x7F, 0),
        (ulaw_decode, 0x80, 32124),
        (ulaw_decode, 0x00, -32124),
        (alaw_decode, 0xD5, 8),
        (alaw_decode, 0x55, -8),
        (alaw_decode, 0xAA, 32256),
        (alaw_decode, 0x2A, -32256),
    ],
)
def test_published_table_anchors(decode, code: int, value: int) -> None:  # type: ignore[no-untyped-def]
    assert int(decode(bytes([code]))[0]) == value


def test_known_encodings_of_silence_and_extremes() -> None:
    samples = np.array([0, -1, 32767, -32768], dtype=np.int16)
    assert ulaw_encode(samples).tolist() == [0xFF, 0x7F, 0x80, 0x00]
    assert alaw_encode(samples).tolist() == [0xD5, 0x55, 0xAA, 0x2A]


def test_encoding_a_decoded_value_gives_the_code_back() -> None:
    np.testing.assert_array_equal(alaw_encode(alaw_decode(ALL_CODES)), ALL_CODES)
    roundtrip = ulaw_encode(ulaw_decode(ALL_CODES))
    # 0x7F decodes to 0, which encodes as the positive zero 0xFF; every other code comes back.
    assert [int(c) for c in ALL_CODES if roundtrip[c] != c] == [0x7F]


def test_bytes_and_arrays_are_both_accepted_and_shapes_kept() -> None:
    block = np.array([[100, -100], [2000, -2000]], dtype=np.int16)
    codes = ulaw_encode(block)
    assert codes.shape == (2, 2) and codes.dtype == np.uint8
    assert ulaw_decode(codes.tobytes()).tolist() == ulaw_decode(codes.ravel()).tolist()


def test_wrong_dtypes_are_refused() -> None:
    with pytest.raises(TypeError, match="int16"):
        ulaw_encode(np.zeros(4, dtype=np.float32))
    with pytest.raises(TypeError, match="uint8"):
        alaw_decode(np.zeros(4, dtype=np.int16))
