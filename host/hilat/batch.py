"""Frames to record arrays: ``BatchDecoder.feed_batch`` gives the EVENTS records of a piece of the
stream as numpy arrays and the other frames as ``protocol.Frame`` objects.

This version decodes frame by frame with ``FrameDecoder.feed`` (same counters, same rules) and
converts the records to arrays once per piece.
"""

from typing import NamedTuple

import numpy as np

from hilat import protocol as p


class RecordBatch(NamedTuple):
    ticks: np.ndarray     # uint64 record timestamps, in arrival order
    channels: np.ndarray  # uint16 channel masks
    levels: np.ndarray    # uint16 level masks
    frames: list          # the frames that are not EVENTS, in arrival order
    events_frames: int    # EVENTS frames decoded into the arrays


class BatchDecoder(p.FrameDecoder):
    def feed_batch(self, data: bytes) -> RecordBatch:
        records, frames, n_events = [], [], 0
        for frame in self.feed(data):
            if isinstance(frame.msg, p.Events):
                records.extend(frame.msg.records)
                n_events += 1
            else:
                frames.append(frame)
        table = np.array(records, dtype=np.uint64).reshape(-1, 3)
        return RecordBatch(table[:, 0], table[:, 1].astype(np.uint16), table[:, 2].astype(np.uint16), frames,
                           n_events)
