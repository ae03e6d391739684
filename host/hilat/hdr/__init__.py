"""HDR histograms for runs too long to keep every sample, and HdrHistogram interval logs (.hlog).

Split as HdrHistogram's own Python port splits it:

- ``histogram.py``: ``HdrHistogram``, the bucketing, recording, queries (percentiles) and merging;
- ``codec.py``: the V2 compressed encoding (zlib, ZigZag LEB128 counts) and its base64 form;
- ``log.py``: the ``.hlog`` writer and reader (intervals, tags, header lines).

numpy is the only run-time dependency.
"""

from hilat.hdr.codec import HdrFormatError
from hilat.hdr.histogram import Buckets, HdrHistogram, PercentileDistribution
from hilat.hdr.log import Hlog, HlogInterval, HlogWriter, read_hlog, write_hlog

__all__ = [
    "HdrHistogram", "HdrFormatError", "Buckets", "PercentileDistribution",
    "HlogInterval", "Hlog", "HlogWriter", "write_hlog", "read_hlog",
]
