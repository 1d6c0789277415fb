"""G.711 µ-law and A-law codecs (``audio/pcmu`` and ``audio/pcma`` on the wire).

Bit-exact with the ITU-T G.191 reference codec: negative inputs take the one's complement
before quantisation, so the quantiser is symmetric around -1/2. Encoding maps 16-bit
linear samples (``int16``) to 8-bit codes (``uint8``), decoding the other way; both are
table lookups, the tables being built once at import with vectorised arithmetic.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["alaw_decode", "alaw_encode", "ulaw_decode", "ulaw_encode"]

Int16Array = npt.NDArray[np.int16]
UInt8Array = npt.NDArray[np.uint8]


def _bit_length(values: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Number of bits of each non-negative integer (0 for 0), exact for values below 2**52."""
    return np.frexp(values.astype(np.float64))[1].astype(np.int64)


def _all_int16_by_uint16_index() -> npt.NDArray[np.int64]:
    """Every int16 value, ordered so that position ``u`` holds the int16 whose bits are ``u``."""
    return np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.int16).astype(np.int64)


def _magnitude(x: npt.NDArray[np.int64], shift: int) -> npt.NDArray[np.int64]:
    """One's-complement magnitude of each sample, right-shifted to the codec's resolution."""
    return np.where(x < 0, -x - 1, x) >> shift


def _build_ulaw_encode() -> UInt8Array:
    x = _all_int16_by_uint16_index()
    biased = np.minimum(_magnitude(x, 2) + 33, 0x1FFF)
    exponent = np.maximum(_bit_length(biased) - 6, 0)
    mantissa = (biased >> (exponent + 1)) & 0x0F
    code = 0x7F - ((exponent << 4) | mantissa)
    out: npt.NDArray[np.uint8] = (code | np.where(x >= 0, 0x80, 0)).astype(np.uint8)
    return out


def _build_ulaw_decode() -> Int16Array:
    code = np.arange(256, dtype=np.int64)
    inverted = ~code & 0xFF
    exponent = (inverted >> 4) & 0x07
    mantissa = inverted & 0x0F
    magnitude = (((mantissa << 3) + 0x84) << exponent) - 0x84
    return np.where(code & 0x80, magnitude, -magnitude).astype(np.int16)


def _build_alaw_encode() -> UInt8Array:
    x = _all_int16_by_uint16_index()
    magnitude = _magnitude(x, 4)
    exponent = np.maximum(_bit_length(magnitude) - 4, 0)
    mantissa = np.where(exponent == 0, magnitude, (magnitude >> np.maximum(exponent - 1, 0)) & 0x0F)
    code = (exponent << 4) | mantissa | np.where(x >= 0, 0x80, 0)
    return (code ^ 0x55).astype(np.uint8)


def _build_alaw_decode() -> Int16Array:
    code = np.arange(256, dtype=np.int64)
    toggled = (code ^ 0x55) & 0x7F
    exponent = toggled >> 4
    mantissa = toggled & 0x0F
    magnitude = np.where(exponent == 0, (mantissa << 4) + 8, (2 * mantissa + 33) << (exponent + 2))
    return np.where(code & 0x80, magnitude, -magnitude).astype(np.int16)


_ULAW_ENCODE = _build_ulaw_encode()
_ULAW_DECODE = _build_ulaw_decode()
_ALAW_ENCODE = _build_alaw_encode()
_ALAW_DECODE = _build_alaw_decode()
for _table in (_ULAW_ENCODE, _ULAW_DECODE, _ALAW_ENCODE, _ALAW_DECODE):
    _table.flags.writeable = False


def _as_uint16_bits(samples: npt.ArrayLike) -> npt.NDArray[np.uint16]:
    array = np.asarray(samples)
    if array.dtype != np.int16:
        raise TypeError(f"G.711 encoding takes int16 samples, got {array.dtype}")
    return array.view(np.uint16)


def _as_codes(codes: bytes | bytearray | memoryview | npt.ArrayLike) -> UInt8Array:
    if isinstance(codes, (bytes, bytearray, memoryview)):
        return np.frombuffer(codes, dtype=np.uint8)
    array = np.asarray(codes)
    if array.dtype != np.uint8:
        raise TypeError(f"G.711 decoding takes uint8 codes or bytes, got {array.dtype}")
    return array


def ulaw_encode(samples: npt.ArrayLike) -> UInt8Array:
    """µ-law codes for int16 samples (same shape)."""
    return _ULAW_ENCODE[_as_uint16_bits(samples)]


def ulaw_decode(codes: bytes | bytearray | memoryview | npt.ArrayLike) -> Int16Array:
    """int16 samples for µ-law codes given as bytes or a uint8 array."""
    return _ULAW_DECODE[_as_codes(codes)]


def alaw_encode(samples: npt.ArrayLike) -> UInt8Array:
    """A-law codes for int16 samples (same shape)."""
    return _ALAW_ENCODE[_as_uint16_bits(samples)]


def alaw_decode(codes: bytes | bytearray | memoryview | npt.ArrayLike) -> Int16Array:
    """int16 samples for A-law codes given as bytes or a uint8 array."""
    return _ALAW_DECODE[_as_codes(codes)]
