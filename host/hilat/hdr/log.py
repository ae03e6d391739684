"""HdrHistogram interval logs (``.hlog``, format 1.3): the writer and the reader.

As Java's ``HistogramLogWriter`` / ``HistogramLogReader`` write and read them: header comments
(``#[StartTime: ...]``, ``#[BaseTime: ...]``, the format version, HdrHistogram_rust's
``#[MaxValueDivisor: ...]``), the CSV legend, then one line per interval: optional ``Tag=NAME,``,
start and length in seconds, the interval's max, and its histogram in base64 (``codec.py``).
"""

from __future__ import annotations

import io
import os
import re
import time
from dataclasses import dataclass, field
from typing import IO, Iterable

from hilat.hdr.codec import HdrFormatError
from hilat.hdr.histogram import HdrHistogram

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


def _interval_lines(start_s, length_s, hist, tag, max_value_unit_ratio, n):
    """The lines of one interval (an OutOfRange note first when values were refused)."""
    if not isinstance(hist, HdrHistogram):
        raise TypeError(f"interval {n}: expected an HdrHistogram, got {type(hist).__name__}")
    prefix = ""
    if tag is not None:
        if not tag or _TAG_FORBIDDEN.search(tag):
            raise ValueError(f"interval {n}: tag {tag!r} must be non-empty, without commas, spaces or newlines")
        prefix = f"Tag={tag},"
    lines = []
    if hist.out_of_range:
        worst = "-" if hist.out_of_range_max is None else hist.out_of_range_max
        lines.append(f"#[OutOfRange: below={hist.out_of_range_below} above={hist.out_of_range_above} max={worst}]")
    lines.append(f"{prefix}{start_s:.3f},{length_s:.3f},{hist.max / max_value_unit_ratio:.3f},"
                 f"{hist.encode_base64()}")
    return lines


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
        lines += _interval_lines(start_s, length_s, hist, tag, max_value_unit_ratio, n)
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
    then each ``interval`` line as it closes, so that a reader sees whole intervals while the
    capture runs (``flush``). Same format and arguments as ``write_hlog``."""

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
        self._file.write("\n".join(_interval_lines(start_s, length_s, histogram, tag, self._ratio, 0)) + "\n")

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
