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

    return edges, search


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


def searchsorted(haystack, needles, side="left"):
    """``np.searchsorted(haystack, needles, side)`` (int64 ticks, ``haystack`` sorted), in one pass
    over both when ``needles`` are sorted (the pairing's starts, window ends and rises are)."""
    haystack, needles = np.asarray(haystack), np.asarray(needles)
    if needles.ndim != 1 or haystack.dtype != np.int64 or needles.dtype != np.int64 or not available():
        return np.searchsorted(haystack, needles, side=side)
    out = np.empty(len(needles), np.intp)
    _KERNELS[1](np.ascontiguousarray(haystack), np.ascontiguousarray(needles), side == "right", out)
    return out
