"""HdrHistogram's V2 compressed encoding: what ``.hlog`` lines carry, base64-wrapped.

As the reference encodes it (``encodeIntoCompressedByteBuffer``)::

    compressed envelope  cookie 0x1c849314 (V2 compressed base 0x1c849304 | 0x10), int32 length, zlib data
    zlib data            cookie 0x1c849313 (V2 encoding base 0x1c849303 | 0x10), int32 payload length,
                         int32 normalizing index offset (0), int32 significant digits, int64 lowest,
                         int64 highest, float64 integer-to-double ratio (1.0); then the counts up to the
                         index of the max value as ZigZag LEB128-64b9B varints, a negative value -n
                         standing for n consecutive empty buckets.

All integers big-endian. The histogram itself (``HdrHistogram.encode`` / ``decode``) is in
``histogram.py``; this module knows bytes and counts arrays only.
"""

from __future__ import annotations

import base64
import binascii
import struct
import zlib
from typing import NamedTuple

import numpy as np

V2_ENCODING_COOKIE = 0x1C849303 | 0x10
V2_COMPRESSED_COOKIE = 0x1C849304 | 0x10
_HEADER = struct.Struct(">iiiiqqd")        # cookie, payload length, offset, digits, lowest, highest, ratio
_ENVELOPE = struct.Struct(">ii")           # cookie, compressed length
_MAX_DECODED_BYTES = 64 << 20              # refuse decompression bombs; 5 digits to 2^62 needs < 56 MiB


def _cookie_base(cookie: int) -> int:
    return cookie & ~0xF0


class HdrFormatError(ValueError):
    """An encoded histogram or interval log that cannot be decoded (says what and where)."""


class Decoded(NamedTuple):
    """The header of a V2 encoding and its counts payload (still varint-encoded: see ``decode_counts``)."""
    significant_figures: int
    lowest: int
    highest: int
    int_to_double_ratio: float
    payload: bytes


def encode(counts: np.ndarray, significant_figures: int, lowest: int, highest: int,
           int_to_double_ratio: float = 1.0, compression_level: int = 9) -> bytes:
    """V2 compressed encoding (envelope + zlib) of ``counts``, the counts array up to the max's index."""
    payload = _encode_counts(counts)
    header = _HEADER.pack(V2_ENCODING_COOKIE, len(payload), 0, significant_figures, lowest, highest,
                          int_to_double_ratio)
    compressed = zlib.compress(header + payload, compression_level)
    return _ENVELOPE.pack(V2_COMPRESSED_COOKIE, len(compressed)) + compressed


def to_base64(data: bytes) -> str:
    """An encoding as the histogram field of an .hlog line."""
    return base64.b64encode(data).decode("ascii")


def decode(data: bytes | str) -> Decoded:
    """Header and counts payload of a V2 compressed encoding (bytes) or its base64 text.

    Raises HdrFormatError for anything but a well-formed integer-histogram encoding."""
    if isinstance(data, str):
        try:
            data = base64.b64decode(data.strip(), validate=True)
        except (binascii.Error, ValueError) as e:
            raise HdrFormatError(f"histogram is not valid base64 ({e})") from None
    data = bytes(data)
    if len(data) < _ENVELOPE.size:
        raise HdrFormatError(f"encoded histogram too short ({len(data)} bytes)")
    cookie, length = _ENVELOPE.unpack_from(data)
    if _cookie_base(cookie) != _cookie_base(V2_COMPRESSED_COOKIE):
        raise HdrFormatError(f"not a V2 compressed histogram (cookie 0x{cookie & 0xFFFFFFFF:08x}, "
                             f"expected 0x{V2_COMPRESSED_COOKIE:08x})")
    if length != len(data) - _ENVELOPE.size:
        raise HdrFormatError(f"compressed length field says {length} bytes but {len(data) - _ENVELOPE.size} follow")
    try:
        inflater = zlib.decompressobj()
        raw = inflater.decompress(data[_ENVELOPE.size:], _MAX_DECODED_BYTES)
        if inflater.unconsumed_tail:
            raise HdrFormatError(f"decompressed histogram larger than {_MAX_DECODED_BYTES} bytes")
        if not inflater.eof:
            raise HdrFormatError("compressed histogram is truncated (zlib stream incomplete)")
    except zlib.error as e:
        raise HdrFormatError(f"compressed histogram is corrupt (zlib: {e})") from None
    if len(raw) < _HEADER.size:
        raise HdrFormatError(f"decompressed histogram too short for its header ({len(raw)} bytes)")
    cookie, payload_len, offset, digits, lowest, highest, ratio = _HEADER.unpack_from(raw)
    if _cookie_base(cookie) != _cookie_base(V2_ENCODING_COOKIE):
        raise HdrFormatError(f"not a V2 histogram encoding (cookie 0x{cookie & 0xFFFFFFFF:08x}, "
                             f"expected 0x{V2_ENCODING_COOKIE:08x})")
    if offset != 0:
        raise HdrFormatError(f"normalizing index offset {offset} not supported (only integer histograms)")
    if payload_len < 0 or payload_len > len(raw) - _HEADER.size:
        raise HdrFormatError(f"payload length {payload_len} exceeds the {len(raw) - _HEADER.size} bytes present")
    return Decoded(digits, lowest, highest, ratio, raw[_HEADER.size:_HEADER.size + payload_len])


# ---- ZigZag LEB128-64b9B counts payload -----------------------------------------------------------------

def _encode_counts(counts: np.ndarray) -> bytes:
    """Counts as the reference's V2 payload: each count a varint; a run of n >= 2 zeros as -n."""
    if counts.size == 0:
        return b""
    zero = counts == 0
    # Tokens: every non-zero count; every maximal run of zeros as one token (0 if 1 long, else -length).
    run_start = zero & np.concatenate(([True], ~zero[:-1]))
    starts = np.flatnonzero(run_start)
    nonzero_at = np.flatnonzero(~zero)
    ends = np.append(nonzero_at, counts.size)[np.searchsorted(nonzero_at, starts)]
    run_len = ends - starts
    t = counts.astype(np.int64)    # a copy
    t[starts] = np.where(run_len > 1, -run_len, 0)
    t = t[~zero | run_start]
    u = ((t << 1) ^ (t >> 63)).view(np.uint64)                       # ZigZag
    nbytes = np.ones(u.size, dtype=np.int64)
    for k in range(1, 9):
        nbytes += (u >> np.uint64(7 * k)) != 0
    first = np.cumsum(nbytes) - nbytes
    out = np.empty(int(nbytes.sum()), dtype=np.uint8)
    for k in range(9):
        sel = nbytes > k
        if not np.any(sel):
            break
        if k < 8:
            b = (u[sel] >> np.uint64(7 * k)) & np.uint64(0x7F)
            b |= np.where(nbytes[sel] > k + 1, np.uint64(0x80), np.uint64(0))
        else:                                                          # 9th byte carries 8 bits
            b = (u[sel] >> np.uint64(56)) & np.uint64(0xFF)
        out[first[sel] + k] = b.astype(np.uint8)
    return out.tobytes()


def decode_counts(payload: bytes, counts_len: int) -> np.ndarray:
    """Inverse of ``_encode_counts``; raises HdrFormatError on a malformed or oversized stream."""
    b = np.frombuffer(payload, dtype=np.uint8)
    if b.size == 0:
        return np.zeros(0, dtype=np.int64)
    cont = (b & 0x80) != 0
    # Varints longer than 8 bytes (9th byte = 8 data bits) break the vectorised split; rare: decode slowly.
    if b.size >= 8 and np.any(np.convolve(cont.astype(np.int8), np.ones(8, dtype=np.int8), "valid") == 8):
        tokens = _decode_varints_slow(payload)
    else:
        if cont[-1]:
            raise HdrFormatError("counts payload ends inside a varint")
        end = np.flatnonzero(~cont)
        start = np.concatenate(([0], end[:-1] + 1))
        group = np.repeat(np.arange(end.size), end - start + 1)
        shift = (np.arange(b.size) - start[group]).astype(np.uint64) * np.uint64(7)
        parts = (b & 0x7F).astype(np.uint64) << shift
        u = np.bitwise_or.reduceat(parts, start)
        tokens = (u >> np.uint64(1)).view(np.int64) ^ -(u & np.uint64(1)).view(np.int64)
    run = np.where(tokens < 0, -tokens, 1)
    if int(run.sum()) > counts_len:
        raise HdrFormatError(f"counts payload describes {int(run.sum())} buckets, more than the {counts_len} "
                             "the header's range allows")
    return np.repeat(np.where(tokens < 0, 0, tokens), run)


def _decode_varints_slow(payload: bytes) -> np.ndarray:
    out = []
    i, n = 0, len(payload)
    while i < n:
        value = 0
        for k in range(9):
            if i >= n:
                raise HdrFormatError("counts payload ends inside a varint")
            byte = payload[i]
            i += 1
            if k == 8:
                value |= byte << 56
                break
            value |= (byte & 0x7F) << (7 * k)
            if not byte & 0x80:
                break
        out.append((value >> 1) ^ -(value & 1))
    return np.array(out, dtype=np.int64)
