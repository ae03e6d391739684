"""The run directory's layout: its files, and the item types of its fixed-width stores. It is written
as the capture streams (``hilat.rundir.writer.RunWriter``) and read back in chunks
(``hilat.rundir.reader``: ``Run``, ``load_run``); the stores' reading and writing is
``hilat.rundir.stores``, the edges decoded again from raw.bin and stream.bin ``hilat.rundir.replay``.

Layout (docs/analysis.md, "Run directory"):

- ``raw.bin``        every byte received from the rig, appended before anything decodes it (over
                     udp://, the command link's datagrams: replies and frames, one after the other);
- ``stream.bin``     udp:// only: every datagram of the Ethernet stream as received, in fixed slots
                     with its length and receive time, written before anything decodes it
                     (``hilat.link.udp``; decoded again with meta.json's rig and ``counters.stream.session``);
- ``edges.bin``      the decoded edges as they arrive: a 16-byte header (``HILATEDG``, format version,
                     item size), then fixed-width little-endian items ``EDGE_DTYPE`` (tick, channel,
                     level), in tick order;
- ``samples/stimuli.bin`` the built-in kinds' samples as the streaming pairing finalises them, one
                     item per stimulus: header ``HILATSTM``, then ``STIMULUS_DTYPE`` items (start tick,
                     each kind's value or -1 for a miss or an unknown, the ISR's and task's duplicates,
                     tag flags, a bit per unknown kind), in start order;
- ``samples/KIND.bin`` the samples of each defined measurement kind (and of the built-in ones in runs
                     written before stimuli.bin): header ``HILATSMP``, then ``SAMPLE_DTYPE`` items
                     (start tick, value or -1, duplicates, tag flags, unknown), in start order (store
                     version 2; version 1, without ``unknown``, is still read);
- ``gaps.bin``       where the record stream had holes (``analysis.Gaps``): header ``HILATGAP``, then
                     ``GAP_DTYPE`` items (start, end, channel mask, reason), as the capture closed them;
- ``meta.json``      rig identity, settings, counters, calibration; ``summary.txt``/``summary.json``:
                     the report document, rendered from the capture's aggregates;
- ``hlog/``          the rolling HdrHistogram interval log of the capture (``capture.hlog``), and of
                     the rig's engine (``rig.hlog``) in an on-rig capture;
- ``outliers.bin``   on-rig: the engine's outlier records (header ``HILATOUT``, ``OUTLIER_DTYPE``).

Times and values are in ticks, or in finer units when meta.json's ``rig.samples_per_tick`` S is above
1 (docs/subtick.md: sub-ticks, 1/S tick, or 1/(64 S) tick with a resolution calibration in force;
``Run.subticks``); meta.json's durations (deadline, offset, measures) stay in ticks.

Runs written before ``edges.bin`` existed keep ``events.csv`` (CSV: tick,channel,level,tag); with
neither, the edges are decoded again from ``raw.bin``. Reports recompute the latencies from the
edges, so they reflect the pairing rules and the calibration, not what an older tool wrote.
"""

import numpy as np

from hilat import analysis

EDGES_MAGIC = b"HILATEDG"
SAMPLES_MAGIC = b"HILATSMP"
STORE_VERSION = 1
EDGE_DTYPE = np.dtype([("tick", "<i8"), ("channel", "u1"), ("level", "u1")])
SAMPLE_DTYPE_V1 = np.dtype([("start_mu", "<i8"), ("value_mu", "<i8"), ("duplicates", "<u2"),
                            ("tag_at_start", "u1"), ("tag_in_window", "u1")])
SAMPLE_DTYPE = np.dtype(SAMPLE_DTYPE_V1.descr + [("unknown", "u1")])
SAMPLES_VERSIONS = {1: SAMPLE_DTYPE_V1, 2: SAMPLE_DTYPE}
# The built-in kinds' samples, one item per stimulus (samples/stimuli.bin): the start tick and the
# tag flags once, each kind's value (analysis.KINDS order), the ISR's and the task's duplicates, and
# the kinds a gap made unknown (bit k: kind k). Half the bytes of five per-kind stores.
STIMULI_MAGIC = b"HILATSTM"
BUILTIN_KINDS = tuple(kind for kind, _ in analysis.KINDS)
STIMULUS_DTYPE = np.dtype([("start_mu", "<i8"), ("values", "<i8", (len(BUILTIN_KINDS),)),
                           ("isr_duplicates", "<u2"), ("task_duplicates", "<u2"), ("tag_at_start", "u1"),
                           ("tag_in_window", "u1"), ("unknown", "u1")])
GAPS_MAGIC = b"HILATGAP"
GAP_DTYPE = np.dtype([("start", "<i8"), ("end", "<i8"), ("channels", "<u4"), ("reason", "u1")])
OUTLIERS_MAGIC = b"HILATOUT"
# The engine's outlier records (ENGINE_OUTLIERS): stimulus tick, tag flags, each kind's value in
# ticks (0xFFFFFFFF: a miss, 0xFFFFFFFE: below range).
OUTLIER_DTYPE = np.dtype([("start_tick", "<u8"), ("flags", "u1"), ("values", "<u4", (3,))])
# Bytes of every store's header: magic (8), version (u32), item size (u32).
_HEADER = 16
# Edges per chunk when a run is read in pieces: 1 Mi edges (10 MiB of items, ~60 MiB while paired).
CHUNK_EDGES = 1 << 20


class RunError(Exception):
    """A run directory that cannot be read; the message says which file and why."""
