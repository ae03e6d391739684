"""Bounded-memory latency histogram with HdrHistogram's bucketing, and HdrHistogram interval logs (.hlog).

For runs too long to keep every sample: memory is one counts array fixed by the configured range and
precision (256 KiB for 1 tick .. 2^40 ticks at 3 significant digits), whatever the number of samples.

Bucketing is HdrHistogram's, index for index (``AbstractHistogram`` in the Java reference): values
below ``sub_bucket_count << unit_magnitude`` (2048 ticks at 3 digits, lowest 1) are counted exactly;
above, each bucket spans less than ``1 / sub_bucket_half_count`` of its values (< 10^-sf relative).
Statistics follow the reference too: ``max`` is the highest value equivalent to the largest sample,
``mean``/``stddev`` use each bucket's median equivalent value, percentiles are highest equivalent values.

Encoding is HdrHistogram's V2 compressed form (what ``.hlog`` lines carry, base64-wrapped)::

    compressed envelope  cookie 0x1c849314 (V2 compressed base 0x1c849304 | 0x10), int32 length, zlib data
    zlib data            cookie 0x1c849313 (V2 encoding base 0x1c849303 | 0x10), int32 payload length,
                         int32 normalizing index offset (0), int32 significant digits, int64 lowest,
                         int64 highest, float64 integer-to-double ratio (1.0); then the counts up to the
                         index of the max value as ZigZag LEB128-64b9B varints, a negative value -n
                         standing for n consecutive empty buckets.

All integers big-endian. numpy is the only run-time dependency.
"""

from __future__ import annotations

import base64
import binascii
import io
import logging
import math
import os
import re
import struct
import time
import zlib
from dataclasses import dataclass, field
from typing import IO, Iterable, Iterator, NamedTuple

import numpy as np

log = logging.getLogger(__name__)

__all__ = [
    "HdrHistogram", "HdrFormatError", "Buckets", "PercentileDistribution",
    "HlogInterval", "Hlog", "write_hlog", "read_hlog",
]

V2_ENCODING_COOKIE = 0x1C849303 | 0x10
V2_COMPRESSED_COOKIE = 0x1C849304 | 0x10
_HEADER = struct.Struct(">iiiiqqd")        # cookie, payload length, offset, digits, lowest, highest, ratio
_ENVELOPE = struct.Struct(">ii")           # cookie, compressed length
_MAX_DECODED_BYTES = 64 << 20              # refuse decompression bombs; 5 digits to 2^62 needs < 56 MiB
_RECORD_SLICE = 1 << 13                    # samples per pass: temporaries stay small (no mmap churn) and in cache


def _cookie_base(cookie: int) -> int:
    return cookie & ~0xF0


class HdrFormatError(ValueError):
    """An encoded histogram or interval log that cannot be decoded (says what and where)."""


class Buckets(NamedTuple):
    """Non-empty buckets, ascending: value range [lowest, highest] (inclusive) and count of each."""
    lowest: np.ndarray
    highest: np.ndarray
    count: np.ndarray


class PercentileDistribution(NamedTuple):
    """HdrHistogram's percentile distribution (.hgrm rows): plot ``value`` against ``1/(1-percentile/100)``.

    ``percentile`` is in percent; the last row is at 100 (its inverse is infinite)."""
    value: np.ndarray
    percentile: np.ndarray
    total_count: np.ndarray


class HdrHistogram:
    """Counts of integer values (ticks) in HdrHistogram's buckets, constant memory in the sample count.

    ``lowest``: lowest discernible value (>= 1; rounded down to a power of two for the bucket unit);
    ``highest``: highest value that must be trackable (>= 2 * lowest); the counts array covers up to
    ``highest_recordable`` (>= highest), exactly as the reference sizes it;
    ``significant_figures``: 0..5 decimal digits of precision kept at every magnitude.

    Values outside [0, highest_recordable] are never recorded nor silently dropped: they are counted
    in ``out_of_range_below`` / ``out_of_range_above`` (the largest one kept in ``out_of_range_max``)
    and logged as a warning.
    """

    def __init__(self, lowest: int = 1, highest: int = 1 << 40, significant_figures: int = 3):
        lowest, highest, significant_figures = int(lowest), int(highest), int(significant_figures)
        if lowest < 1:
            raise ValueError(f"lowest must be >= 1, got {lowest}")
        if highest < 2 * lowest:
            raise ValueError(f"highest must be >= 2 * lowest, got highest={highest}, lowest={lowest}")
        if not 0 <= significant_figures <= 5:
            raise ValueError(f"significant_figures must be 0..5, got {significant_figures}")
        self.lowest = lowest
        self.highest = highest
        self.significant_figures = significant_figures
        # Same float formulas as the reference, so every implementation derives the same layout.
        self.unit_magnitude = int(math.floor(math.log(lowest) / math.log(2)))
        largest_single_unit = 2 * 10 ** significant_figures
        sub_bucket_count_magnitude = int(math.ceil(math.log(largest_single_unit) / math.log(2)))
        self.sub_bucket_half_count_magnitude = max(sub_bucket_count_magnitude, 1) - 1
        self.sub_bucket_count = 1 << (self.sub_bucket_half_count_magnitude + 1)
        self.sub_bucket_half_count = self.sub_bucket_count // 2
        self._sub_bucket_mask = (self.sub_bucket_count - 1) << self.unit_magnitude
        self.bucket_count = self._buckets_needed(highest)
        self.counts_len = (self.bucket_count + 1) * self.sub_bucket_half_count
        # Highest equivalent value of the last index, in Python ints (may exceed int64 for huge ranges).
        last_bucket = self.bucket_count - 1
        self.highest_recordable = ((self.sub_bucket_count << (last_bucket + self.unit_magnitude)) - 1)
        if self.highest_recordable >= 1 << 62:
            raise ValueError(f"highest {highest} too large: the buckets would reach beyond 2^62 "
                             f"(up to {self.highest_recordable}); use highest <= 2^61")
        self._counts = np.zeros(self.counts_len, dtype=np.int64)
        self._total = 0
        self._min_recorded: int | None = None
        self._max_recorded: int | None = None
        self.out_of_range_below = 0
        self.out_of_range_above = 0
        self.out_of_range_max: int | None = None
        self.int_to_double_ratio = 1.0

    def _buckets_needed(self, value: int) -> int:
        smallest_untrackable = self.sub_bucket_count << self.unit_magnitude
        buckets = 1
        while smallest_untrackable <= value:
            if smallest_untrackable > (2**63 - 1) // 2:
                return buckets + 1
            smallest_untrackable <<= 1
            buckets += 1
        return buckets

    # ---- layout -------------------------------------------------------------------------------------

    def counts_array_index(self, values):
        """Counts-array index of each value (int or array of non-negative ints <= highest_recordable)."""
        v = np.asarray(values, dtype=np.int64)
        x = v | np.int64(self._sub_bucket_mask)
        # Bit length of x from the float exponent; x > 2^53 may round up to the next power of two.
        bits = (x.astype(np.float64).view(np.int64) >> 52) - 1022
        if self.highest_recordable >= 1 << 53:
            bits = bits - (np.left_shift(np.int64(1), bits - 1) > x)
        bucket = bits - (self.unit_magnitude + self.sub_bucket_half_count_magnitude + 1)
        # ((bucket + 1) << half magnitude) + sub_bucket - half count, with sub_bucket = v >> (bucket + unit)
        index = (bucket << self.sub_bucket_half_count_magnitude) + (v >> (bucket + self.unit_magnitude))
        return int(index) if index.ndim == 0 else index

    def value_from_index(self, index):
        """Lowest value counted at a counts-array index (int or array)."""
        i = np.asarray(index, dtype=np.int64)
        bucket = (i >> self.sub_bucket_half_count_magnitude) - 1
        sub = (i & (self.sub_bucket_half_count - 1)) + self.sub_bucket_half_count
        first = bucket < 0
        sub = np.where(first, sub - self.sub_bucket_half_count, sub)
        bucket = np.where(first, 0, bucket)
        value = sub << (bucket + self.unit_magnitude)
        return int(value) if value.ndim == 0 else value

    def _bucket_width_at_index(self, index):
        i = np.asarray(index, dtype=np.int64)
        bucket = np.maximum((i >> self.sub_bucket_half_count_magnitude) - 1, 0)
        return np.left_shift(np.int64(1), bucket + self.unit_magnitude)

    def size_of_equivalent_value_range(self, values):
        """Width of the bucket holding each value."""
        w = self._bucket_width_at_index(self.counts_array_index(values))
        return int(w) if w.ndim == 0 else w

    def lowest_equivalent_value(self, values):
        """Lowest value sharing each value's bucket."""
        return self.value_from_index(self.counts_array_index(values))

    def highest_equivalent_value(self, values):
        """Highest value sharing each value's bucket (what percentiles and ``max`` report)."""
        i = self.counts_array_index(values)
        v = self.value_from_index(i) + self._bucket_width_at_index(i) - 1
        return int(v) if v.ndim == 0 else v

    def median_equivalent_value(self, values):
        """Middle (rounded up) of each value's bucket (what ``mean`` and ``stddev`` use)."""
        i = self.counts_array_index(values)
        v = self.value_from_index(i) + (self._bucket_width_at_index(i) >> 1)
        return int(v) if v.ndim == 0 else v

    # ---- recording ----------------------------------------------------------------------------------

    def record(self, values) -> int:
        """Count every value of an array of ticks (vectorised). Returns how many were out of range.

        Integer arrays of any width are taken as they are; float arrays only if every value is a
        finite integer (NaN is refused: a miss is the caller's to count, not a latency).
        """
        out_before = self.out_of_range
        arr = np.asarray(values)
        if arr.ndim != 1:
            arr = arr.reshape(-1)
        if arr.size == 0:
            return 0
        if arr.dtype.kind == "f":
            if not np.all(np.isfinite(arr)):
                raise ValueError("cannot record non-finite values (NaN/inf) in a histogram of ticks")
            if not np.all(arr == np.floor(arr)):
                raise ValueError("cannot record non-integer values in a histogram of ticks")
            too_big = arr >= 2.0**63
            if np.any(too_big):
                self._count_out_of_range(0, int(np.count_nonzero(too_big)), int(arr[too_big].max()))
                arr = arr[~too_big]
            arr = np.maximum(arr, -1.0).astype(np.int64)     # any negative is out of range; keep it in int64
        elif arr.dtype.kind == "u" and arr.dtype.itemsize == 8:
            too_big = arr > np.uint64(2**63 - 1)
            if np.any(too_big):
                self._count_out_of_range(0, int(np.count_nonzero(too_big)), int(arr[too_big].max()))
                arr = arr[~too_big]
            arr = arr.astype(np.int64)
        elif arr.dtype.kind not in "iub":
            raise TypeError(f"cannot record values of dtype {arr.dtype} (need integer ticks)")
        for start in range(0, arr.size, _RECORD_SLICE):
            self._record_slice(arr[start:start + _RECORD_SLICE].astype(np.int64, copy=False))
        lost = self.out_of_range - out_before
        if lost:
            log.warning("%d value(s) outside the histogram range 0..%d not recorded (counted as out of range)",
                        lost, self.highest_recordable)
        return lost

    def _record_slice(self, v: np.ndarray) -> None:
        lo, hi = int(v.min()), int(v.max())
        if lo < 0 or hi > self.highest_recordable:
            below = v < 0
            above = v > self.highest_recordable
            n_above = int(np.count_nonzero(above))
            self._count_out_of_range(int(np.count_nonzero(below)), n_above, int(v[above].max()) if n_above else None)
            v = v[~(below | above)]
            if v.size == 0:
                return
            lo, hi = int(v.min()), int(v.max())
        # bincount is ~10x faster than np.add.at; the counts array is small (tens of thousands).
        self._counts += np.bincount(self.counts_array_index(v), minlength=self.counts_len)
        self._total += int(v.size)
        self._min_recorded = lo if self._min_recorded is None else min(self._min_recorded, lo)
        self._max_recorded = hi if self._max_recorded is None else max(self._max_recorded, hi)

    def _count_out_of_range(self, below: int, above: int, largest: int | None) -> None:
        self.out_of_range_below += below
        self.out_of_range_above += above
        if largest is not None:
            self.out_of_range_max = largest if self.out_of_range_max is None else max(self.out_of_range_max, largest)

    def record_value(self, value: int, count: int = 1) -> bool:
        """Count one value ``count`` times. Returns False (and counts it as out of range) if it is."""
        value, count = int(value), int(count)
        if count < 0:
            raise ValueError(f"count must be >= 0, got {count}")
        if value < 0 or value > self.highest_recordable:
            self._count_out_of_range(count if value < 0 else 0, count if value >= 0 else 0,
                                     value if value >= 0 else None)
            log.warning("value %d outside the histogram range 0..%d not recorded (counted as out of range)",
                        value, self.highest_recordable)
            return False
        if count:
            self._counts[self.counts_array_index(value)] += count
            self._total += count
            self._min_recorded = value if self._min_recorded is None else min(self._min_recorded, value)
            self._max_recorded = value if self._max_recorded is None else max(self._max_recorded, value)
        return True

    def add(self, other: HdrHistogram) -> None:
        """Add another histogram's counts (and out-of-range tallies) to this one.

        Same layout: counts are added index by index. Otherwise each of the other's buckets is
        recorded at its lowest value, as the reference does. Raises ValueError if the other holds
        values above this histogram's range (nothing is added then).
        """
        if other._total and other.max > self.highest_recordable:
            raise ValueError(f"the other histogram holds values up to {other.max}, "
                             f"beyond this one's range (up to {self.highest_recordable})")
        if self._same_layout(other):
            self._counts += other._counts
        else:
            nz = np.flatnonzero(other._counts)
            idx = self.counts_array_index(other.value_from_index(nz))
            np.add.at(self._counts, idx, other._counts[nz])
        self._total += other._total
        for mine, theirs, pick in (("_min_recorded", other._min_recorded, min),
                                   ("_max_recorded", other._max_recorded, max)):
            if theirs is not None:
                cur = getattr(self, mine)
                setattr(self, mine, theirs if cur is None else pick(cur, theirs))
        self._count_out_of_range(other.out_of_range_below, other.out_of_range_above, other.out_of_range_max)

    def _same_layout(self, other: HdrHistogram) -> bool:
        return (self.unit_magnitude, self.sub_bucket_count, self.counts_len) == \
               (other.unit_magnitude, other.sub_bucket_count, other.counts_len)

    def reset(self) -> None:
        """Forget every count (the layout stays)."""
        self._counts[:] = 0
        self._total = 0
        self._min_recorded = self._max_recorded = None
        self.out_of_range_below = self.out_of_range_above = 0
        self.out_of_range_max = None

    def copy(self) -> HdrHistogram:
        """An independent histogram with the same layout and contents."""
        h = HdrHistogram(self.lowest, self.highest, self.significant_figures)
        h.add(self)
        h.int_to_double_ratio = self.int_to_double_ratio
        return h

    # ---- queries ------------------------------------------------------------------------------------

    @property
    def total_count(self) -> int:
        """Number of values recorded (out-of-range ones excluded)."""
        return self._total

    @property
    def out_of_range(self) -> int:
        """Number of values refused because they were negative or above ``highest_recordable``."""
        return self.out_of_range_below + self.out_of_range_above

    @property
    def counts(self) -> np.ndarray:
        """The counts array (read-only view), index for index the reference's."""
        view = self._counts.view()
        view.flags.writeable = False
        return view

    @property
    def memory_bytes(self) -> int:
        """Bytes held by the counts array: fixed by range and precision, independent of the sample count."""
        return int(self._counts.nbytes)

    @property
    def max(self) -> int:
        """Highest value equivalent to the largest recorded value (reference ``getMaxValue``); 0 if empty."""
        if not self._total:
            return 0
        return self.highest_equivalent_value(self.value_from_index(int(np.flatnonzero(self._counts)[-1])))

    @property
    def min(self) -> int:
        """Lowest value equivalent to the smallest recorded value (reference ``getMinValue``); 0 if empty."""
        if not self._total:
            return 0
        return self.value_from_index(int(np.flatnonzero(self._counts)[0]))

    @property
    def max_recorded(self) -> int | None:
        """The largest value recorded, exact to the tick (None if empty).

        For a histogram decoded from an encoding or log (which do not carry it) this is ``max``."""
        return self._max_recorded

    @property
    def min_recorded(self) -> int | None:
        """The smallest value recorded, exact to the tick (None if empty); ``min`` after decoding."""
        return self._min_recorded

    def _nonzero(self) -> tuple[np.ndarray, np.ndarray]:
        nz = np.flatnonzero(self._counts)
        return nz, self._counts[nz]

    @property
    def mean(self) -> float:
        """Mean of the bucket median equivalent values, weighted by count (reference ``getMean``); 0 if empty."""
        if not self._total:
            return 0.0
        nz, c = self._nonzero()
        mid = (self.value_from_index(nz) + (self._bucket_width_at_index(nz) >> 1)).astype(np.float64)
        return math.fsum(mid * c.astype(np.float64)) / self._total

    @property
    def stddev(self) -> float:
        """Population standard deviation of the bucket median values (reference ``getStdDeviation``)."""
        if not self._total:
            return 0.0
        mean = self.mean
        nz, c = self._nonzero()
        mid = (self.value_from_index(nz) + (self._bucket_width_at_index(nz) >> 1)).astype(np.float64)
        return math.sqrt(math.fsum((mid - mean) ** 2 * c.astype(np.float64)) / self._total)

    def percentiles(self, percentiles: Iterable[float], rounding: str = "up") -> np.ndarray:
        """Values at several percentiles (0..100) at once; see ``value_at_percentile``. Returns int64 array."""
        p = np.asarray(list(percentiles) if not isinstance(percentiles, np.ndarray) else percentiles,
                       dtype=np.float64).reshape(-1)
        if np.any(np.isnan(p)):
            raise ValueError("percentile is NaN")
        if not self._total:
            return np.zeros(p.shape, dtype=np.int64)
        total = float(self._total)
        if rounding == "up":
            # Java HdrHistogram >= 2.1.10: 1 ulp down, then round the count up.
            requested = np.clip(np.nextafter(p, -np.inf), 0.0, 100.0)
            target = np.ceil((requested * total) / 100.0)
        elif rounding == "nearest":
            # HdrHistogram_c / older Java: round the count half up.
            target = np.trunc((np.minimum(p, 100.0) / 100.0) * total + 0.5)
        else:
            raise ValueError(f"rounding must be 'up' or 'nearest', got {rounding!r}")
        target = np.maximum(target, 1.0).astype(np.int64)
        index = np.searchsorted(np.cumsum(self._counts), target, side="left")
        low = self.value_from_index(index)
        high = low + self._bucket_width_at_index(index) - 1
        return np.where(p == 0.0, low, high).astype(np.int64)

    def value_at_percentile(self, percentile: float, rounding: str = "up") -> int:
        """Highest equivalent value of the sample at ``percentile`` (0..100); 0 if empty.

        ``rounding="up"`` (default) is Java HdrHistogram's current ``getValueAtPercentile``: the sample
        of rank ceil(p/100 * N), so the result is the highest equivalent value of numpy's
        ``percentile(..., method="inverted_cdf")``. ``rounding="nearest"`` takes rank
        round(p/100 * N), as HdrHistogram_c and the ``hdrhistogram`` Python package do.
        At 0 the lowest equivalent value of the smallest sample is returned.
        """
        return int(self.percentiles([percentile], rounding)[0])

    def count_at_value(self, value: int) -> int:
        """Count in the bucket holding ``value``."""
        return int(self._counts[self.counts_array_index(value)])

    def recorded_buckets(self) -> Buckets:
        """The non-empty buckets as arrays, for plotting a (log-log) histogram."""
        nz, c = self._nonzero()
        low = self.value_from_index(nz)
        return Buckets(low, low + self._bucket_width_at_index(nz) - 1, c.copy())

    def __iter__(self) -> Iterator[tuple[int, int]]:
        """(value, count) for every non-empty bucket, ascending; value is the bucket's highest equivalent
        value, as the reference's RecordedValuesIterator reports it."""
        b = self.recorded_buckets()
        return zip(b.highest.tolist(), b.count.tolist())

    def percentile_distribution(self, ticks_per_half_distance: int = 5) -> PercentileDistribution:
        """Rows of HdrHistogram's percentile distribution (Java ``PercentileIterator``, as in .hgrm output).

        Reporting levels start at 0% and take ``ticks_per_half_distance`` equal steps in each half of
        the remaining distance to 100%; the last row is the max at 100%.
        """
        if ticks_per_half_distance < 1:
            raise ValueError("ticks_per_half_distance must be >= 1")
        if not self._total:
            empty = np.zeros(0, dtype=np.int64)
            return PercentileDistribution(empty, np.zeros(0), empty)
        nz, c = self._nonzero()
        cum = np.cumsum(c)
        pct = (100.0 * cum.astype(np.float64)) / float(self._total)
        last = len(nz) - 1
        rows: list[tuple[int, float, int]] = []
        level = 0.0
        k = 0
        while True:
            k = max(k, int(np.searchsorted(pct, level, side="left")))
            rows.append((int(nz[k]), level, int(cum[k])))
            gap = 100.0 - level
            if k == last or gap <= 0:     # the reference's extra last step: the max at 100%
                rows.append((int(nz[last]), 100.0, int(cum[last])))
                break
            halvings = int(math.log(100.0 / gap) / math.log(2))
            level += 100.0 / (ticks_per_half_distance * 2 ** (halvings + 1))
        idx = np.array([r[0] for r in rows], dtype=np.int64)
        value = self.value_from_index(idx) + self._bucket_width_at_index(idx) - 1
        return PercentileDistribution(value, np.array([r[1] for r in rows]),
                                      np.array([r[2] for r in rows], dtype=np.int64))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, HdrHistogram):
            return NotImplemented
        return ((self.lowest, self.highest, self.significant_figures, self._total, self.int_to_double_ratio)
                == (other.lowest, other.highest, other.significant_figures, other._total, other.int_to_double_ratio)
                and np.array_equal(self._counts, other._counts))

    __hash__ = None  # mutable

    def __repr__(self) -> str:
        return (f"HdrHistogram(lowest={self.lowest}, highest={self.highest}, "
                f"significant_figures={self.significant_figures}, total_count={self._total}, "
                f"out_of_range={self.out_of_range})")

    # ---- encoding -----------------------------------------------------------------------------------

    def encode(self, compression_level: int = 9) -> bytes:
        """HdrHistogram V2 compressed encoding (envelope + zlib), as ``encodeIntoCompressedByteBuffer``."""
        relevant = self.counts_array_index(self.max) + 1
        payload = _encode_counts(self._counts[:relevant])
        header = _HEADER.pack(V2_ENCODING_COOKIE, len(payload), 0, self.significant_figures,
                              self.lowest, self.highest, self.int_to_double_ratio)
        compressed = zlib.compress(header + payload, compression_level)
        return _ENVELOPE.pack(V2_COMPRESSED_COOKIE, len(compressed)) + compressed

    def encode_base64(self) -> str:
        """``encode()`` in base64: the histogram field of an .hlog line."""
        return base64.b64encode(self.encode()).decode("ascii")

    @classmethod
    def decode(cls, data: bytes | str) -> HdrHistogram:
        """Histogram from a V2 compressed encoding (bytes) or its base64 text. Raises HdrFormatError."""
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
        try:
            h = cls(lowest, highest, digits)
        except ValueError as e:
            raise HdrFormatError(f"invalid histogram parameters: {e}") from None
        h.int_to_double_ratio = ratio
        counts = _decode_counts(raw[_HEADER.size:_HEADER.size + payload_len], h.counts_len)
        h._counts[:len(counts)] = counts
        h._total = int(counts.sum())
        if h._total:
            h._min_recorded, h._max_recorded = h.min, h.max
        return h


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


def _decode_counts(payload: bytes, counts_len: int) -> np.ndarray:
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


# ---- interval log (.hlog) --------------------------------------------------------------------------------

HLOG_FORMAT_VERSION = "1.3"
HLOG_LEGEND = '"StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram"'
_TAG_FORBIDDEN = re.compile(r"[, \r\n]")


@dataclass
class HlogInterval:
    """One interval line: start (seconds, relative to the log's base time if it has one), length
    (seconds), max as written (value / max value unit ratio), the histogram, and its tag if any."""
    start_s: float
    length_s: float
    max_value: float
    histogram: HdrHistogram
    tag: str | None = None


@dataclass
class Hlog:
    """A parsed interval log."""
    intervals: list[HlogInterval] = field(default_factory=list)
    start_time: float | None = None          # seconds since the epoch (#[StartTime: ...])
    base_time: float | None = None           # seconds since the epoch (#[BaseTime: ...])
    max_value_divisor: float | None = None   # #[MaxValueDivisor: ...] if written (HdrHistogram_rust)
    format_version: str | None = None
    comments: list[str] = field(default_factory=list)

    def merged(self, tag: str | None = None) -> HdrHistogram | None:
        """Sum of the interval histograms with ``tag`` (None: untagged), or None if there are none."""
        total = None
        for iv in self.intervals:
            if iv.tag != tag:
                continue
            if total is None:
                total = iv.histogram.copy()
            else:
                total.add(iv.histogram)
        return total


def _fmt_time(seconds: float) -> str:
    # Java's Date.toString() form, in UTC.
    return time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime(seconds))


def write_hlog(dest: str | os.PathLike | IO, intervals: Iterable[tuple], start_time: float | None = None,
               base_time: float | None = None, max_value_unit_ratio: float = 1.0, *,
               comments: Iterable[str] = ()) -> None:
    """Write an HdrHistogram interval log (format 1.3, as Java's ``HistogramLogWriter``).

    ``intervals``: (start_s, length_s, histogram) or (start_s, length_s, histogram, tag) tuples; start
    in seconds, relative to ``base_time`` when one is given (as the reference writes them), written
    to the millisecond. ``start_time`` / ``base_time``: seconds since the epoch, written as the
    ``#[StartTime: ...]`` / ``#[BaseTime: ...]`` header lines. ``Interval_Max`` is the histogram's max
    divided by ``max_value_unit_ratio`` (e.g. ticks per microsecond to log it in us); a ratio other
    than 1 is also noted as ``#[MaxValueDivisor: ...]``, as HdrHistogram_rust does.
    An interval whose histogram refused out-of-range values is preceded by a comment
    ``#[OutOfRange: below=N above=N max=V]`` (other readers skip it; ``read_hlog`` restores the counts),
    so no loss disappears in the export.
    ``dest``: a path, or a text or binary file object.
    """
    if not max_value_unit_ratio > 0:
        raise ValueError(f"max_value_unit_ratio must be > 0, got {max_value_unit_ratio}")
    lines = [f"#{c}" for c in comments]
    lines.append(f"#[Histogram log format version {HLOG_FORMAT_VERSION}]")
    if start_time is not None:
        lines.append(f"#[StartTime: {start_time:.3f} (seconds since epoch), {_fmt_time(start_time)}]")
    if base_time is not None:
        lines.append(f"#[BaseTime: {base_time:.3f} (seconds since epoch)]")
    if max_value_unit_ratio != 1.0:
        lines.append(f"#[MaxValueDivisor: {max_value_unit_ratio:.3f}]")
    lines.append(HLOG_LEGEND)
    for n, item in enumerate(intervals):
        if len(item) == 3:
            (start_s, length_s, hist), tag = item, None
        elif len(item) == 4:
            start_s, length_s, hist, tag = item
        else:
            raise ValueError(f"interval {n}: expected (start_s, length_s, histogram[, tag]), got {len(item)} items")
        if not isinstance(hist, HdrHistogram):
            raise TypeError(f"interval {n}: expected an HdrHistogram, got {type(hist).__name__}")
        prefix = ""
        if tag is not None:
            if not tag or _TAG_FORBIDDEN.search(tag):
                raise ValueError(f"interval {n}: tag {tag!r} must be non-empty, without commas, spaces or newlines")
            prefix = f"Tag={tag},"
        if hist.out_of_range:
            worst = "-" if hist.out_of_range_max is None else hist.out_of_range_max
            lines.append(f"#[OutOfRange: below={hist.out_of_range_below} above={hist.out_of_range_above} max={worst}]")
        lines.append(f"{prefix}{start_s:.3f},{length_s:.3f},{hist.max / max_value_unit_ratio:.3f},"
                     f"{hist.encode_base64()}")
    text = "\n".join(lines) + "\n"
    if isinstance(dest, (str, os.PathLike)):
        with open(dest, "w", encoding="ascii", newline="\n") as f:
            f.write(text)
    elif isinstance(dest, (io.RawIOBase, io.BufferedIOBase)) or "b" in getattr(dest, "mode", ""):
        dest.write(text.encode("ascii"))
    else:
        dest.write(text)


class HlogWriter:
    """An interval log written interval by interval (a capture's rolling log): the header at once,
    then each ``interval`` line as it closes, flushed, so that a reader sees whole intervals while
    the capture runs. Same format and arguments as ``write_hlog``."""

    def __init__(self, path: str | os.PathLike, start_time: float | None = None, base_time: float | None = None,
                 max_value_unit_ratio: float = 1.0, *, comments: Iterable[str] = ()):
        self._file = open(path, "w", encoding="ascii", newline="\n")
        self._ratio = max_value_unit_ratio
        head = io.StringIO()
        write_hlog(head, [], start_time=start_time, base_time=base_time, max_value_unit_ratio=max_value_unit_ratio,
                   comments=comments)
        self._file.write(head.getvalue())
        self._file.flush()

    def interval(self, start_s: float, length_s: float, histogram: HdrHistogram, tag: str | None = None) -> None:
        lines = io.StringIO()
        write_hlog(lines, [(start_s, length_s, histogram, tag)], max_value_unit_ratio=self._ratio)
        # Only the interval's own lines (an OutOfRange comment and the interval), not the header again.
        body = [line for line in lines.getvalue().splitlines()
                if not line.startswith(("#[Histogram log", "#[MaxValueDivisor", '"StartTimestamp"'))]
        self._file.write("\n".join(body) + "\n")

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        self._file.close()


_START_TIME = re.compile(r"#\[StartTime:\s*([-+0-9.eE]+)")
_BASE_TIME = re.compile(r"#\[BaseTime:\s*([-+0-9.eE]+)")
_DIVISOR = re.compile(r"#\[MaxValueDivisor:\s*([-+0-9.eE]+)")
_VERSION = re.compile(r"#\[Histogram log format version\s*([^\]\s]+)")
_OUT_OF_RANGE = re.compile(r"#\[OutOfRange: below=(\d+) above=(\d+) max=(\d+|-)\]$")


def read_hlog(source: str | os.PathLike | IO) -> Hlog:
    """Read an HdrHistogram interval log written by any HdrHistogram implementation (or ``write_hlog``).

    Comment lines are kept; StartTime, BaseTime, format version and MaxValueDivisor notes are parsed;
    the legend and blank lines are skipped; an ``#[OutOfRange: ...]`` note (see ``write_hlog``) is added
    to the next interval's out-of-range counts. Any other malformed line raises HdrFormatError naming
    the file and line number.
    """
    if isinstance(source, (str, os.PathLike)):
        name = os.fspath(source)
        try:
            with open(source, "rb") as f:
                data = f.read()
        except OSError as e:
            raise HdrFormatError(f"{name}: cannot read interval log ({e.strerror or e})") from None
    else:
        name = getattr(source, "name", "<hlog>")
        data = source.read()
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise HdrFormatError(f"{name}: not a text interval log ({e})") from None
    out = Hlog()
    pending_out_of_range = None
    for number, line in enumerate(data.splitlines(), start=1):
        line = line.strip()
        where = f"{name}:{number}"
        if not line:
            continue
        if line.startswith("#"):
            for pattern, attr in ((_START_TIME, "start_time"), (_BASE_TIME, "base_time"),
                                  (_DIVISOR, "max_value_divisor")):
                m = pattern.match(line)
                if m:
                    try:
                        setattr(out, attr, float(m.group(1)))
                    except ValueError:
                        raise HdrFormatError(f"{where}: bad number in {line!r}") from None
                    break
            else:
                m = _VERSION.match(line)
                oor = _OUT_OF_RANGE.match(line)
                if m:
                    out.format_version = m.group(1)
                elif oor:
                    pending_out_of_range = (int(oor.group(1)), int(oor.group(2)),
                                            None if oor.group(3) == "-" else int(oor.group(3)))
                else:
                    out.comments.append(line[1:])
            continue
        if line.startswith('"StartTimestamp"'):
            continue
        tag = None
        if line.startswith("Tag="):
            tag, _, line = line[4:].partition(",")
        fields = line.split(",")
        if len(fields) != 4:
            raise HdrFormatError(f"{where}: expected 'start,length,max,histogram' (4 fields), got {len(fields)}")
        try:
            start_s, length_s, max_value = (float(x) for x in fields[:3])
        except ValueError:
            raise HdrFormatError(f"{where}: start, length and max must be numbers, got {fields[:3]}") from None
        try:
            hist = HdrHistogram.decode(fields[3])
        except HdrFormatError as e:
            raise HdrFormatError(f"{where}: {e}") from None
        if pending_out_of_range:
            hist._count_out_of_range(*pending_out_of_range)
            pending_out_of_range = None
        out.intervals.append(HlogInterval(start_s, length_s, max_value, hist, tag))
    return out
