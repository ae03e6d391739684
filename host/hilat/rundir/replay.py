"""A run's edges found again from what the capture kept before decoding: raw.bin (and a udp:// run's
stream.bin) decoded again, with the stream's gaps (``read_raw``), and the events.csv of runs written
before edges.bin (``read_events_csv``, ``iter_events_csv``)."""

from pathlib import Path

import numpy as np

from hilat import analysis
from hilat.link import protocol as p
from hilat.link import udp
from hilat.link.batch import BatchDecoder, holes, segments
from hilat.rundir.layout import RunError


def read_events_csv(path):
    """events.csv (tick,channel,level,tag) -> (ticks, chans, levels); fast, and strict about shape."""
    data = path.read_bytes()
    header, _, body = data.partition(b"\n")
    if header.strip() != b"tick,channel,level,tag":
        raise RunError(f"{path}: unexpected header {header[:60]!r}")
    return _parse_rows(path, body)


def stream_of(meta):
    """How to decode a udp:// run's stream.bin: {"layout": udp.Layout, "session": id} from its meta.json
    (None for a run without a stream)."""
    stream = (meta.get("counters") or {}).get("stream")
    rig = meta.get("rig") or {}
    if not stream or not rig:
        return None
    ethernet = rig.get("ethernet") or [None] * 5
    spt = int(rig.get("samples_per_tick") or 1)
    n_inputs = int(rig["n_inputs"])
    tdc_inputs = int(rig.get("tdc_inputs") or 0)   # protocol 5: 8 bits of TDC code each (docs/tdc.md)
    fraction_bits = p.TDC_CODE_BITS * tdc_inputs if tdc_inputs else n_inputs * (spt.bit_length() - 1)
    layout = udp.Layout(int(rig["n_stimulus"]) + n_inputs, fraction_bits, int(ethernet[4] or udp.DEFAULT_RECORD_WORDS))
    return {"layout": layout, "session": stream.get("session")}


def read_raw(path, subticks=None, with_gaps=False, stream=None):
    """Decode raw.bin again: (times, chans, levels, decoder counters[, gaps]); times in the units of
    ``subticks`` (``analysis.Subticks``; None: ticks). ``with_gaps``: also the stream's holes
    (``analysis.Gaps``: overflow markers and frames lost, as the capture found them; one still open
    at the end runs to the end). ``stream`` (``stream_of(meta)``): the stream.bin beside it is decoded
    too, after raw.bin's records (a udp:// capture's edges; its counters as the decoder's "stream")."""
    decoder = BatchDecoder()
    tracker = analysis.gap_tracker(subticks)
    closed = []
    parts = []
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            closed += _replay(decoder.feed_batch(chunk), tracker, parts, subticks)
    counters = decoder.counters()
    stream_path = Path(path).parent / "stream.bin"
    if stream is not None and stream_path.exists():
        stream_decoder = udp.StreamDecoder(stream["layout"], session=stream.get("session"))
        try:
            for batch in udp.decode_stream_file(stream_path, stream_decoder):
                closed += _replay(batch, tracker, parts, subticks)
        except udp.StreamFileError as e:
            raise RunError(str(e)) from None
        counters["stream"] = stream_decoder.counters()
    if parts:
        ticks, chans, levels = (np.concatenate(x) for x in zip(*parts))
    else:
        ticks, chans, levels = np.zeros(0, np.uint64), np.zeros(0, np.uint8), np.zeros(0, np.uint8)
    out = (ticks.astype(np.int64), chans, levels, counters)
    if with_gaps:
        closed += tracker.close()
        out += (analysis.Gaps.of([(a, b, c) for a, b, c, _reason in closed]),)
    return out


def _replay(batch, tracker, parts, subticks):
    """One RecordBatch of a replay: its holes to ``tracker`` in stream order, its edges to ``parts``;
    returns the gaps it closed."""
    closed = []
    for lo, hi, what in segments(len(batch.ticks), holes(batch.marks)):
        if what is None:
            fractions = batch.fractions[lo:hi] if batch.fractions is not None else None
            closed += tracker.records(batch.ticks[lo:hi], batch.channels[lo:hi], fractions)
        elif isinstance(what, int):
            tracker.frames_lost()
        else:
            tracker.overflow(what.msg.timestamp, what.msg.channels)
    if len(batch.ticks):
        parts.append(analysis.edges_from_records((batch.ticks, batch.channels, batch.levels), batch.fractions,
                                                 subticks))
    return closed


def iter_events_csv(path, chunk_bytes=64 << 20):
    """events.csv in chunks of whole lines: (ticks, chans, levels) per chunk, bounded memory."""
    with open(path, "rb") as f:
        header = f.readline()
        if header.strip() != b"tick,channel,level,tag":
            raise RunError(f"{path}: unexpected header {header[:60]!r}")
        rest = b""
        while True:
            block = f.read(chunk_bytes)
            data = rest + block
            if not block:
                if data.strip():
                    yield _parse_rows(path, data)
                return
            cut = data.rfind(b"\n") + 1
            rest = data[cut:]
            if cut:
                yield _parse_rows(path, data[:cut])


def _parse_rows(path, body):
    body = body.strip()
    if not body:
        return np.zeros(0, np.int64), np.zeros(0, np.uint8), np.zeros(0, np.uint8)
    flat = body.replace(b"\r", b"").replace(b"\n", b",")
    try:
        values = np.array(flat.split(b","), dtype=np.int64)
    except ValueError:
        raise RunError(f"{path}: a field is not a whole number") from None
    if len(values) % 4:
        raise RunError(f"{path}: rows must have 4 fields (tick,channel,level,tag)")
    table = values.reshape(-1, 4)
    last = p.MAX_CHANNELS - 1
    if (table[:, 1] < 0).any() or (table[:, 1] > last).any() or ((table[:, 2] != 0) & (table[:, 2] != 1)).any():
        raise RunError(f"{path}: channel must be 0..{last} and level 0 or 1")
    return table[:, 0], table[:, 1].astype(np.uint8), table[:, 2].astype(np.uint8)
