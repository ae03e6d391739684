"""Compiled loops for the capture's hot path (numba): one pass where numpy needs several.

Each kernel gives exactly what its numpy reference gives (tests/analysis/test_kernels.py compares
them); without numba (``available()`` False) the callers keep their numpy code. Compiled once per
machine and cached next to this file (``cache=True``): a run loads them in milliseconds. numba is
imported on the first use, so a command that never streams does not pay its import.
"""

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

    @numba.njit(cache=True, nogil=True)
    def slot_records(words32, first_word, count, base, n, fraction_bits, ticks, channels, levels, fractions):
        # Datagram i's records: 64-bit words (two 32-bit halves, low first) from first_word on, count[i]
        # of them; the tick is base[i] + the low half. Stops at the first overflow marker (its kind
        # bit): returns the records done, the caller's numpy path then takes the whole batch.
        mask = (1 << n) - 1
        fmask = (1 << fraction_bits) - 1
        r = 0
        for i in range(words32.shape[0]):
            b = np.uint64(base[i])
            for j in range(count[i]):
                lo = words32[i, first_word + 2 * j]
                hi = np.int64(words32[i, first_word + 2 * j + 1])
                if (hi >> (2 * n)) & 1:
                    return r
                ticks[r] = b + np.uint64(lo)
                channels[r] = hi & mask
                levels[r] = (hi >> n) & mask
                fractions[r] = (hi >> (2 * n + 1)) & fmask
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

    return edges, search, slot_records, edge_offsets


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


def slot_records(rows, first_byte, count, base, n_channels, fraction_bits):
    """(ticks uint64, channels, levels, fractions uint16) of the records of datagram slots ``rows``
    ((k, slot bytes) uint8; records from ``first_byte`` on, ``count[i]`` in slot i, ticks from
    ``base[i]``), or None when an overflow marker is among them (the caller's numpy path then)."""
    total = int(count.sum())
    out = (np.empty(total, np.uint64), np.empty(total, np.uint16), np.empty(total, np.uint16),
           np.empty(total, np.uint16))
    words32 = np.ascontiguousarray(rows).view("<u4")
    done = _KERNELS[2](words32, first_byte // 4, np.ascontiguousarray(count, dtype=np.int64),
                       np.ascontiguousarray(base, dtype=np.uint64), int(n_channels), int(fraction_bits), *out)
    return out if done == total else None
