"""Bounded-memory latency histogram with HdrHistogram's bucketing.

For runs too long to keep every sample: memory is one counts array fixed by the configured range and
precision (256 KiB for 1 tick .. 2^40 ticks at 3 significant digits), whatever the number of samples.

Bucketing is HdrHistogram's, index for index (``AbstractHistogram`` in the Java reference): values
below ``sub_bucket_count << unit_magnitude`` (2048 ticks at 3 digits, lowest 1) are counted exactly;
above, each bucket spans less than ``1 / sub_bucket_half_count`` of its values (< 10^-sf relative).
Statistics follow the reference too: ``max`` is the highest value equivalent to the largest sample,
``mean``/``stddev`` use each bucket's median equivalent value, percentiles are highest equivalent values.

Percentile ranks are the reference's (see ``percentiles``), not ``hilat.analysis.percentile_rank``: the
Java rounding, 1 ulp down in percent, is what makes these values equal the reference's to the bucket.
"""

from __future__ import annotations

import logging
import math
from typing import Iterable, Iterator, NamedTuple

import numpy as np

from hilat import kernels
from hilat.hdr import codec
from hilat.hdr.codec import HdrFormatError

log = logging.getLogger(__name__)

_RECORD_SLICE = 1 << 13                    # samples per pass: temporaries stay small (no mmap churn) and in cache


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
        if self.highest_recordable < 1 << 53 and kernels.available():   # one compiled pass
            lo, hi, counted = kernels.hdr_count(np.ascontiguousarray(v), self._counts, self.highest_recordable,
                                                self._sub_bucket_mask, self.unit_magnitude,
                                                self.sub_bucket_half_count_magnitude)
            if counted:
                self._add_recorded(int(v.size), lo, hi)
                return
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
        if hi - lo < v.size:
            # Dense (latencies span a few dozen ticks): each value counted once by bincount, then only
            # the values present go to their buckets; the same counts without a bucket index per sample.
            per_value = np.bincount(v) if hi < v.size else np.bincount(v - lo)
            present = np.flatnonzero(per_value)
            values = present if hi < v.size else present + lo
            np.add.at(self._counts, self.counts_array_index(values), per_value[present])
        else:
            # bincount is ~10x faster than np.add.at; counted only up to the highest index present (a
            # few thousand bins for latencies), not over the whole counts array (tens of thousands).
            counts = np.bincount(self.counts_array_index(v))
            self._counts[:len(counts)] += counts
        self._add_recorded(int(v.size), lo, hi)

    def _add_recorded(self, n, lo, hi):
        self._total += n
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

    def add_counts(self, index, counts) -> None:
        """Add ``counts`` at counts-array indices (arrays; an index may repeat): counts made elsewhere
        in this layout (the rig's engine bins its samples with the same index), so nothing is
        re-binned. As for a decoded histogram, min and max recorded become the lowest and highest
        equivalent values of the extreme buckets."""
        index = np.asarray(index, dtype=np.int64).reshape(-1)
        counts = np.asarray(counts, dtype=np.int64).reshape(-1)
        if index.shape != counts.shape:
            raise ValueError(f"{len(index)} indices for {len(counts)} counts")
        if len(index) and (index.min() < 0 or index.max() >= self.counts_len):
            raise ValueError(f"counts-array index out of 0..{self.counts_len - 1}")
        if len(counts) and counts.min() < 0:
            raise ValueError("counts must be >= 0")
        index = index[counts > 0]
        if not len(index):
            return
        np.add.at(self._counts, index, counts[counts > 0])
        self._total += int(counts.sum())
        lo = self.value_from_index(int(index.min()))
        hi = self.highest_equivalent_value(self.value_from_index(int(index.max())))
        self._min_recorded = lo if self._min_recorded is None else min(self._min_recorded, lo)
        self._max_recorded = hi if self._max_recorded is None else max(self._max_recorded, hi)

    def count_out_of_range(self, below: int = 0, above: int = 0, largest: int | None = None) -> None:
        """Count values refused elsewhere (e.g. the rig's overflow bin) as out of range: they stay in
        ``out_of_range_below``/``_above`` and in the .hlog's ``#[OutOfRange: ...]`` note."""
        if below < 0 or above < 0:
            raise ValueError("out-of-range counts must be >= 0")
        self._count_out_of_range(int(below), int(above), largest)

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

    def _medians(self) -> tuple[np.ndarray, np.ndarray]:
        nz, c = self._nonzero()
        mid = (self.value_from_index(nz) + (self._bucket_width_at_index(nz) >> 1)).astype(np.float64)
        return mid, c.astype(np.float64)

    # The sums run bucket by bucket in doubles, in the reference's order (np.cumsum adds in sequence), so
    # the last digit is the reference's too (its .hgrm footer prints them).

    @property
    def mean(self) -> float:
        """Mean of the bucket median equivalent values, weighted by count (reference ``getMean``); 0 if empty."""
        if not self._total:
            return 0.0
        mid, c = self._medians()
        return float(np.cumsum(mid * c)[-1]) / self._total

    @property
    def stddev(self) -> float:
        """Population standard deviation of the bucket median values (reference ``getStdDeviation``)."""
        if not self._total:
            return 0.0
        mean = self.mean
        mid, c = self._medians()
        d = mid - mean
        return math.sqrt(float(np.cumsum((d * d) * c)[-1]) / self._total)

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

    # ---- encoding (codec.py) ------------------------------------------------------------------------

    def encode(self, compression_level: int = 9) -> bytes:
        """HdrHistogram V2 compressed encoding (envelope + zlib), as ``encodeIntoCompressedByteBuffer``."""
        relevant = self.counts_array_index(self.max) + 1
        return codec.encode(self._counts[:relevant], self.significant_figures, self.lowest, self.highest,
                            self.int_to_double_ratio, compression_level)

    def encode_base64(self) -> str:
        """``encode()`` in base64: the histogram field of an .hlog line."""
        return codec.to_base64(self.encode())

    @classmethod
    def decode(cls, data: bytes | str) -> HdrHistogram:
        """Histogram from a V2 compressed encoding (bytes) or its base64 text. Raises HdrFormatError."""
        header = codec.decode(data)
        try:
            h = cls(header.lowest, header.highest, header.significant_figures)
        except ValueError as e:
            raise HdrFormatError(f"invalid histogram parameters: {e}") from None
        h.int_to_double_ratio = header.int_to_double_ratio
        counts = codec.decode_counts(header.payload, h.counts_len)
        h._counts[:len(counts)] = counts
        h._total = int(counts.sum())
        if h._total:
            h._min_recorded, h._max_recorded = h.min, h.max
        return h
