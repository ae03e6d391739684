"""The run directory's fixed-width stores (layout in ``hilat.rundir.layout``): a store's header, its
items read in chunks (``iter_store``) or appended (``StoreAppender``), the one thread that does a run's
bulk writing (``_WriteBehind``), and the built-in kinds' one-item-per-stimulus store converted to and
from per-kind samples."""

import os
import queue
import threading

import numpy as np

from hilat.rundir.layout import (
    _HEADER,
    BUILTIN_KINDS,
    SAMPLE_DTYPE,
    SAMPLES_VERSIONS,
    STIMULUS_DTYPE,
    STORE_VERSION,
    RunError,
)


def _store_version(dtype):
    return 2 if dtype == SAMPLE_DTYPE else STORE_VERSION


def _store_header(magic, dtype):
    return magic + _store_version(dtype).to_bytes(4, "little") + dtype.itemsize.to_bytes(4, "little")


def _open_store(path, magic, dtype):
    """An open store file positioned after its header, and its item count (a torn last item of a
    capture that died mid-write is left out). A samples store of version 1 is read with its own
    item type (``SAMPLES_VERSIONS``): ``iter_store`` converts its items."""
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        raise RunError(f"{path.parent}: no {path.name}") from None
    head = f.read(_HEADER)
    if len(head) < _HEADER or head[:8] != magic:
        f.close()
        raise RunError(f"{path}: not a hilat {magic[5:].decode().lower()} store (bad header)")
    version, itemsize = int.from_bytes(head[8:12], "little"), int.from_bytes(head[12:16], "little")
    file_dtype = SAMPLES_VERSIONS.get(version) if dtype == SAMPLE_DTYPE else (
        dtype if version == STORE_VERSION else None)
    if file_dtype is None or itemsize != file_dtype.itemsize:
        f.close()
        raise RunError(f"{path}: store version {version}, item size {itemsize}; this hilat reads version "
                       f"{_store_version(dtype)}, item size {dtype.itemsize}")
    count = (os.fstat(f.fileno()).st_size - _HEADER) // file_dtype.itemsize
    return f, count, file_dtype


def store_count(path, magic, dtype):
    f, count, _ = _open_store(path, magic, dtype)
    f.close()
    return count


def iter_store(path, magic, dtype, chunk):
    """The items of a store file, ``chunk`` at a time (bounded memory), as ``dtype`` items."""
    f, count, file_dtype = _open_store(path, magic, dtype)
    with f:
        left = count
        while left:
            n = min(chunk, left)
            items = np.fromfile(f, dtype=file_dtype, count=n)
            if len(items) < n:
                raise RunError(f"{path}: shorter than its size said")
            left -= n
            if file_dtype != dtype:  # an older store: the fields it has, the others zero
                converted = np.zeros(len(items), dtype)
                for name in file_dtype.names:
                    converted[name] = items[name]
                items = converted
            yield items


def _read_store(path, magic, dtype):
    parts = list(iter_store(path, magic, dtype, 1 << 62))
    return parts[0] if parts else np.zeros(0, dtype)


# A long capture writes tens of GB (a gigabit stream's edges and samples): the page cache would fill
# with them and the kernel reclaim it on the capture's time. Every LET_GO_BYTES written, the pages of
# a file more than LET_GO_BYTES behind its end are given back: written to disk in the background
# (POSIX_FADV_DONTNEED starts their write-back) and dropped once clean (a later call).
LET_GO_BYTES = 64 << 20


class _WriteBehind:
    """One thread that does a run's bulk writing, jobs in the order they were given: the appenders'
    item arrays and the capture's samples and interval log (``RunWriter.later``). A write (and the
    kernel's dirty-page throttling) then waits there, not in the decoding and pairing. Bounded:
    ``put`` blocks once ``depth`` jobs wait. A failed job (a full disk, a sample no log holds) is
    kept and raised by the next ``put``/``sync``; the jobs after it are not done."""

    def __init__(self, depth=64):
        self._queue = queue.Queue(maxsize=depth)
        self.failed = None      # the first failure: no job after it is done
        self._unraised = None   # that failure until raised once on the capture's thread
        self._thread = threading.Thread(target=self._run, name="hilat-run-writer", daemon=True)
        self._thread.start()

    def _run(self):
        while True:
            job = self._queue.get()
            try:
                if job is None:
                    return
                if self.failed is None:
                    job()
            except Exception as e:   # noqa: BLE001 - raised on the capture's thread (_raise)
                self.failed = self._unraised = e
            finally:
                self._queue.task_done()

    @property
    def here(self):
        """Whether this is the writer's own thread (a job appending writes at once)."""
        return threading.current_thread() is self._thread

    def _raise(self):
        if self._unraised is not None:
            error, self._unraised = self._unraised, None
            raise error

    def put(self, job):
        """``job()`` on the writer's thread, after the jobs given before."""
        self._raise()
        self._queue.put(job)

    def sync(self):
        """Every job given so far done (or its error raised)."""
        self._queue.join()
        self._raise()

    def stop(self):
        self._queue.put(None)
        self._thread.join()


class StoreAppender:
    """One store file written item array by item array (buffered; ``flush`` makes it readable).
    With ``behind`` (a ``_WriteBehind``) the writes happen on its thread; ``flush(wait=False)`` only
    asks for one."""

    def __init__(self, path, magic, dtype, behind=None):
        self.dtype = dtype
        self.file = open(path, "wb", buffering=1 << 20)
        self.file.write(_store_header(magic, dtype))
        self.count = 0
        self._behind = behind
        self._written = self._let_go = 0   # bytes written; bytes given back to the page cache

    def append(self, items):
        if len(items):
            # The array's own bytes (no copy as tobytes makes), contiguous as it always is here.
            data = memoryview(np.ascontiguousarray(items)).cast("B")
            if self._behind is None or self._behind.here:
                self._write(data)
            else:
                self._behind.put(lambda: self._write(data))
            self.count += len(items)

    def _write(self, data):
        self.file.write(data)
        self._written += len(data)
        if self._written - self._let_go >= 2 * LET_GO_BYTES and hasattr(os, "posix_fadvise"):
            self._let_go = self._written - LET_GO_BYTES
            try:
                os.posix_fadvise(self.file.fileno(), 0, self._let_go, os.POSIX_FADV_DONTNEED)
            except OSError:
                pass   # advice only

    def flush(self, wait=True):
        if self._behind is None or self._behind.here:
            self.file.flush()
            return
        self._behind.put(self.file.flush)
        if wait:
            self._behind.sync()

    def close(self):
        try:
            if self._behind is not None:
                self._behind.sync()
        finally:
            self.file.close()


def _stimulus_items(series):
    """STIMULUS_DTYPE items of the built-in kinds' series (BUILTIN_KINDS order, the same stimuli)."""
    first = series[0]
    if any(len(s) != len(first) for s in series):
        raise ValueError("the built-in kinds' samples of one step cover different stimuli")
    items = np.empty(len(first), STIMULUS_DTYPE)
    items["start_mu"] = first.start_mu
    for k, s in enumerate(series):
        items["values"][:, k] = s.values
    items["isr_duplicates"] = np.minimum(series[BUILTIN_KINDS.index("stim_to_isr")].duplicates, 0xFFFF)
    items["task_duplicates"] = np.minimum(series[BUILTIN_KINDS.index("stim_to_task")].duplicates, 0xFFFF)
    items["tag_at_start"], items["tag_in_window"] = first.tag_at_start, first.tag_in_window
    unknown = np.zeros(len(first), np.uint8)
    for k, s in enumerate(series):
        unknown |= (np.asarray(s.unknown) != 0).astype(np.uint8) << k
    items["unknown"] = unknown
    return items


def _samples_of_stimuli(items, kind):
    """One built-in kind's SAMPLE_DTYPE items out of STIMULUS_DTYPE ones."""
    k = BUILTIN_KINDS.index(kind)
    out = np.zeros(len(items), SAMPLE_DTYPE)
    out["start_mu"], out["value_mu"] = items["start_mu"], items["values"][:, k]
    if kind in ("stim_to_isr", "stim_to_task"):
        out["duplicates"] = items["isr_duplicates" if kind == "stim_to_isr" else "task_duplicates"]
    out["tag_at_start"], out["tag_in_window"] = items["tag_at_start"], items["tag_in_window"]
    out["unknown"] = (items["unknown"] >> k) & 1
    return out
