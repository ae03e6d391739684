"""TEMPORARY stand-in (replaced by the vectorised decoder)."""
from typing import NamedTuple

import numpy as np

from hilat import protocol as p


class RecordBatch(NamedTuple):
    ticks: np.ndarray
    channels: np.ndarray
    levels: np.ndarray
    frames: list
    events_frames: int


class BatchDecoder(p.FrameDecoder):
    def feed_batch(self, data):
        recs, frames, n = [], [], 0
        for f in self.feed(data):
            if isinstance(f.msg, p.Events):
                recs.extend(f.msg.records)
                n += 1
            else:
                frames.append(f)
        a = np.array(recs, dtype=np.uint64).reshape(-1, 3)
        return RecordBatch(a[:, 0], a[:, 1].astype(np.uint16), a[:, 2].astype(np.uint16), frames, n)
