"""Compiled loops for the capture's hot path (numba): one pass where numpy needs several.

Each kernel gives exactly what its numpy reference gives (tests/analysis/test_kernels.py compares
them); without numba (``available()`` False) the callers keep their numpy code. Compiled once per
machine and cached next to this file (``cache=True``): a run loads them in milliseconds. numba is
imported on the first use, so a command that never streams does not pay its import.
"""

import math

import numpy as np

_KERNELS = None


def _build():
    import numba

    @numba.njit(cache=True, nogil=True)
    def edges(rec_ticks, masks, levels, out_ticks, out_chans, out_levels):
        # Each set mask bit, lowest channel first, is one edge at its record's tick.
        e = 0
        for r in range(len(masks)):
            mask = np.int64(masks[r])
            level = np.int64(levels[r])
            chan = 0
            while mask:
                if mask & 1:
                    out_ticks[e] = rec_ticks[r]
                    out_chans[e] = chan
                    out_levels[e] = (level >> chan) & 1
                    e += 1
                mask >>= 1
                chan += 1
        return e

    @numba.njit(cache=True, nogil=True)
    def search(haystack, needles, right, out):
        # np.searchsorted by walking the sorted haystack from the previous needle's place: linear
        # when the needles are sorted too (a binary search from the start for one that goes back).
        n = len(haystack)
        i = 0
        for k in range(len(needles)):
            v = needles[k]
            if k and v < needles[k - 1]:
                lo, hi = 0, i
                while lo < hi:
                    mid = (lo + hi) >> 1
                    if haystack[mid] < v or (right and haystack[mid] == v):
                        lo = mid + 1
                    else:
                        hi = mid
                i = lo
            if right:
                while i < n and haystack[i] <= v:
                    i += 1
            else:
                while i < n and haystack[i] < v:
                    i += 1
            out[k] = i

    @numba.njit(cache=True, nogil=True, inline="always")
    def record_bits(words32, i, w, start, width):
        # Bits [start, start + width) (width <= 64) of the record whose first 32-bit word is
        # words32[i, w], low word first: gathered 32-bit word by word.
        value = np.uint64(0)
        got = 0
        while got < width:
            at = start + got
            shift = at & 31
            take = min(32 - shift, width - got)
            part = (np.uint64(words32[i, w + (at >> 5)]) >> np.uint64(shift)) & \
                ((np.uint64(1) << np.uint64(take)) - np.uint64(1))
            value |= part << np.uint64(got)
            got += take
        return value

    @numba.njit(cache=True, nogil=True)
    def slot_records(words32, first_word, count, base, n, fraction_bits, record_words, ticks, channels, levels,
                     fractions):
        # Datagram i's records: record_words 32-bit words each from first_word on, count[i] of them;
        # the tick is base[i] + the first word, channels and levels in the second (2n <= 32), then
        # the kind bit and the fraction wherever they fall. Stops at the first overflow marker (its
        # kind bit): returns the records done, the caller's numpy path then takes the whole batch.
        mask = (1 << n) - 1
        r = 0
        for i in range(words32.shape[0]):
            b = np.uint64(base[i])
            for j in range(count[i]):
                w = first_word + record_words * j
                hi = np.int64(words32[i, w + 1])
                if record_bits(words32, i, w, 32 + 2 * n, 1):
                    return r
                ticks[r] = b + np.uint64(words32[i, w])
                channels[r] = hi & mask
                levels[r] = (hi >> n) & mask
                fractions[r] = record_bits(words32, i, w, 33 + 2 * n, fraction_bits)
                r += 1
        return r

    @numba.njit(cache=True, nogil=True)
    def edge_offsets(masks, first_edge):
        # first_edge[r]: the edges before record r (its mask bits' count summed); first_edge[-1]: all.
        e = 0
        for r in range(len(masks)):
            first_edge[r] = e
            m = np.int64(masks[r])
            while m:
                m &= m - 1
                e += 1
        first_edge[len(masks)] = e
        return e

    @numba.njit(cache=True, nogil=True)
    def group(ticks, key, n_keys, grouped, bounds):
        # A stable counting sort of the ticks by key: group k is grouped[bounds[k]:bounds[k + 1]].
        counts = np.zeros(n_keys, np.int64)
        for i in range(len(key)):
            counts[key[i]] += 1
        bounds[0] = 0
        for k in range(n_keys):
            bounds[k + 1] = bounds[k] + counts[k]
        place = bounds[:-1].copy()
        for i in range(len(key)):
            grouped[place[key[i]]] = ticks[i]
            place[key[i]] += 1

    @numba.njit(cache=True, nogil=True)
    def first_in_window(rises, falls, after, window_end, missing, at, dup, duration):
        # Per window: the first rise at or after after[w] and before window_end[w] (at, else missing),
        # the rises after it in the window (dup), and its pulse's duration to the first fall after it
        # (else missing). after[] and window_end[] need not be sorted: each search starts from the
        # previous window's place and walks back when the bound went back.
        n_r, n_f = len(rises), len(falls)
        lo = hi = fi = 0
        for w in range(len(after)):
            a, e = after[w], window_end[w]
            while lo > 0 and rises[lo - 1] >= a:
                lo -= 1
            while lo < n_r and rises[lo] < a:
                lo += 1
            while hi > 0 and rises[hi - 1] >= e:
                hi -= 1
            while hi < n_r and rises[hi] < e:
                hi += 1
            if hi > lo:
                t = rises[lo]
                at[w] = t
                dup[w] = hi - lo - 1
                while fi > 0 and falls[fi - 1] > t:
                    fi -= 1
                while fi < n_f and falls[fi] <= t:
                    fi += 1
                duration[w] = falls[fi] - t if fi < n_f else missing
            else:
                at[w] = missing
                dup[w] = 0
                duration[w] = missing

    @numba.njit(cache=True, nogil=True)
    def moments(v):
        # (mean, sum of squared deviations, min, max) of v (len > 0): the mean first, then M2 about it.
        total = 0   # exact in int64 (a chunk's values sum far below 2^63); the mean as numpy's below 2^53
        lo = hi = v[0]
        for x in v:
            total += x
            if x < lo:
                lo = x
            if x > hi:
                hi = x
        mean = total / len(v)
        m2 = 0.0
        for x in v:
            d = x - mean
            m2 += d * d
        return mean, m2, lo, hi

    @numba.njit(cache=True, nogil=True)
    def hdr_count(v, counts, highest, sub_bucket_mask, unit_magnitude, half_magnitude):
        # HdrHistogram's counts-array index of each value (as HdrHistogram.counts_array_index), each
        # counted once; (min, max, True), or (min, max, False) with nothing counted when a value lies
        # outside 0..highest (the caller's numpy path counts those out of range).
        lo = hi = v[0]
        for x in v:
            if x < lo:
                lo = x
            if x > hi:
                hi = x
        if lo < 0 or hi > highest:
            return lo, hi, False
        for x in v:
            bits = math.frexp(np.float64(x | sub_bucket_mask))[1]   # its bit length (below 2^53)
            bucket = bits - (unit_magnitude + half_magnitude + 1)
            counts[(bucket << half_magnitude) + (x >> (bucket + unit_magnitude))] += 1
        return lo, hi, True

    return edges, search, slot_records, edge_offsets, group, first_in_window, moments, hdr_count


def available():
    """Whether numba is there (the kernels are then compiled, or loaded from the cache)."""
    global _KERNELS
    if _KERNELS is None:
        try:
            _KERNELS = _build()
        except (ImportError, RuntimeError):  # no numba, or no writable place for its cache
            _KERNELS = False
    return _KERNELS is not False


def edges_from_records(rec_ticks, masks, levels, edge_count):
    """(ticks uint64, channels uint8, levels uint8) of every set bit of ``masks`` (uint16), lowest
    channel first; ``edge_count``: the masks' set bits in all."""
    out = (np.empty(edge_count, np.uint64), np.empty(edge_count, np.uint8), np.empty(edge_count, np.uint8))
    done = _KERNELS[0](np.ascontiguousarray(rec_ticks, dtype=np.uint64), np.ascontiguousarray(masks, dtype=np.uint16),
                       np.ascontiguousarray(levels, dtype=np.uint16), *out)
    assert done == edge_count
    return out


def edges_with_offsets(rec_ticks, masks, levels):
    """``edges_from_records``'s edges, and where each record's start among them: (ticks, channels,
    levels, first_edge) with first_edge (int64, one more than the records) the index of each record's
    first edge. Records r0..r1 give the edges first_edge[r0]..first_edge[r1]."""
    masks = np.ascontiguousarray(masks, dtype=np.uint16)
    first_edge = np.empty(len(masks) + 1, np.int64)
    total = _KERNELS[3](masks, first_edge)
    return (*edges_from_records(rec_ticks, masks, levels, total), first_edge)


def searchsorted(haystack, needles, side="left"):
    """``np.searchsorted(haystack, needles, side)`` (int64 ticks, ``haystack`` sorted), in one pass
    over both when ``needles`` are sorted (the pairing's starts, window ends and rises are)."""
    haystack, needles = np.asarray(haystack), np.asarray(needles)
    if needles.ndim != 1 or haystack.dtype != np.int64 or needles.dtype != np.int64 or not available():
        return np.searchsorted(haystack, needles, side=side)
    out = np.empty(len(needles), np.intp)
    _KERNELS[1](np.ascontiguousarray(haystack), np.ascontiguousarray(needles), side == "right", out)
    return out


def slot_records(rows, first_byte, count, base, n_channels, fraction_bits, record_words=2):
    """(ticks uint64, channels uint16, levels uint16, fractions uint64) of the records of datagram
    slots ``rows`` ((k, slot bytes) uint8; records of ``record_words`` 32-bit words from
    ``first_byte`` on, ``count[i]`` in slot i, ticks from ``base[i]``; fields as hilat.link.udp's
    Layout), or None when an overflow marker is among them (the caller's numpy path then)."""
    total = int(count.sum())
    out = (np.empty(total, np.uint64), np.empty(total, np.uint16), np.empty(total, np.uint16),
           np.empty(total, np.uint64))
    words32 = np.ascontiguousarray(rows).view("<u4")
    done = _KERNELS[2](words32, first_byte // 4, np.ascontiguousarray(count, dtype=np.int64),
                       np.ascontiguousarray(base, dtype=np.uint64), int(n_channels), int(fraction_bits),
                       int(record_words), *out)
    return out if done == total else None


def group(ticks, key, n_keys):
    """(grouped ticks, bounds): ``ticks`` (int64) in a stable order by ``key`` (< ``n_keys``), group k
    being grouped[bounds[k]:bounds[k + 1]]."""
    grouped = np.empty(len(ticks), np.int64)
    bounds = np.empty(n_keys + 1, np.int64)
    _KERNELS[4](np.ascontiguousarray(ticks, dtype=np.int64), np.ascontiguousarray(key, dtype=np.uint8), n_keys,
                grouped, bounds)
    return grouped, bounds


def first_in_window(rises, falls, after, window_end, missing):
    """analysis.pair's per-window search in one pass: (at, dup, duration), int64 each."""
    n = len(after)
    out = (np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.int64))
    _KERNELS[5](np.ascontiguousarray(rises, dtype=np.int64), np.ascontiguousarray(falls, dtype=np.int64),
                np.ascontiguousarray(after, dtype=np.int64), np.ascontiguousarray(window_end, dtype=np.int64),
                int(missing), *out)
    return out


def moments(values):
    """(mean, M2, min, max) of int64 ``values`` (not empty), in two passes without temporaries."""
    mean, m2, lo, hi = _KERNELS[6](np.ascontiguousarray(values, dtype=np.int64))
    return float(mean), float(m2), int(lo), int(hi)


def hdr_count(values, counts, highest, sub_bucket_mask, unit_magnitude, half_magnitude):
    """Count int64 ``values`` into an HdrHistogram's ``counts`` in one pass (highest below 2^53):
    (min, max, counted); nothing is counted when a value is out of 0..highest."""
    lo, hi, ok = _KERNELS[7](values, counts, highest, sub_bucket_mask, unit_magnitude, half_magnitude)
    return int(lo), int(hi), bool(ok)
