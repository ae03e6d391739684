"""A scripted rig with the measurement engine (fake_rig.FakeRig's script), for on-rig captures.

It identifies with CAP_ENGINE, ACKs CAPTURE_CONFIG, STIM_CONFIG and STOP, answers TIME_REQ (a clock
that moves on by a second's worth of ticks at each one), STATUS_REQ (stim0 done once started) and
ENGINE_STATS_REQ (limits; after START the exact totals of the pattern), refuses an ENGINE_CONFIG
whose roles are not the default table's, whose interval shift is below 16, or whose deadline is 0 or
above the gateware's ``deadline_limit`` of the shift (ACK refused, as the firmware does), and on
START sends the pattern of ``EngineRig.pattern`` (engine_reference.synthetic_edges of STIM_CONFIG's
count of stimuli from START's tick): its outlier records, every interval's ENGINE_BINS but the last
(in an engine's order), and, with the raw flag, its edges as EVENTS. ENGINE_FLUSH sends the last
interval's bins, then its ACK."""

from dataclasses import dataclass, field

import engine_reference as ref
from fake_rig import identify
from hilat.link import protocol as p

from gateware import engine as gateware_engine

ROLES = ref.roles()
LIMITS = dict(trigger_delay=6, min_spacing=8, interval_shift_min=16, bins=p.ENGINE_BINS_PER_HISTOGRAM)


def records_of(edges):
    """EVENTS records (tick, channel mask, levels of every channel after the tick) of the edges."""
    records, levels = [], 0
    for tick, channel, level in zip(*(x.tolist() for x in edges)):
        levels = levels & ~(1 << channel) | level << channel
        if records and records[-1][0] == tick:
            records[-1] = (tick, records[-1][1] | 1 << channel, levels)
        else:
            records.append((tick, 1 << channel, levels))
    return records


@dataclass
class EngineRig:
    """The pattern's settings; after a capture, what the rig sent: ``samples`` (engine_reference
    .Samples), ``edges`` and the last ENGINE_CONFIG."""

    seed: int = 7
    overflow_windows: int = 0
    samples: ref.Samples | None = None
    edges: tuple | None = None
    config: p.EngineConfig | None = None
    refused: list = field(default_factory=list)

    def script(self, receive, send):
        state = {"seq": 0, "now": 1000, "count": 0, "late": [], "raw_records": 0, "started": False}

        def reply(msg):
            send(msg.encode(state["seq"]))
            state["seq"] = (state["seq"] + 1) & 0xFFFF

        while (frames := receive()) is not None:
            for frame in frames:
                msg = frame.msg
                if isinstance(msg, p.Hello):
                    state.update(seq=0, started=False, raw_records=0)
                    reply(identify_with_engine())
                elif isinstance(msg, p.TimeReq):
                    state["now"] += 50_000_000
                    reply(p.Time(frame.seq, state["now"]))
                elif isinstance(msg, p.StatusReq):
                    done = p.STIM_DONE if state["started"] else 0
                    reply(p.Status(state["raw_records"], 0, 0, 0, [0] * 6, [done, 0]))
                elif isinstance(msg, p.EngineStatsReq):
                    reply(self._stats(frame.seq, state["started"]))
                elif isinstance(msg, p.EngineConfig):
                    why = self._refusal(msg)
                    if why:
                        self.refused.append(why)
                        reply(p.Ack(frame.seq, p.ACK_REFUSED, why))
                    else:
                        self.config = msg
                        reply(p.Ack(frame.seq))
                elif isinstance(msg, p.StimConfig):
                    if msg.channel == ROLES.stimulus:
                        state["count"] = msg.count
                    reply(p.Ack(frame.seq))
                elif isinstance(msg, p.Start):
                    reply(p.Ack(frame.seq))
                    for out in self._run(msg.start, state):
                        reply(out)
                elif isinstance(msg, p.EngineFlush):
                    for out in p.pack_engine_bins(state["late"]):
                        reply(out)
                    state["late"] = []
                    reply(p.Ack(frame.seq))
                else:
                    reply(p.Ack(frame.seq))

    def _refusal(self, msg):
        roles = [(msg.start_channel, msg.start_level), (msg.isr_channel, msg.isr_level),
                 (msg.task_channel, msg.task_level), (msg.tag_channel, msg.tag_level)]
        if roles != [(ROLES.stimulus, 1), (ROLES.isr, 1), (ROLES.task, 1), (ROLES.tag, 1)]:
            return f"engine: roles {roles} are not this fake's"
        if msg.interval_shift < LIMITS["interval_shift_min"]:
            return "engine: interval shift out of range"
        if msg.deadline == 0 or msg.deadline > gateware_engine.deadline_limit(msg.interval_shift):
            return "engine: deadline 0 or above 2**shift - 2 sweeps (docs/engine.md)"
        return None

    def _stats(self, command_seq, started):
        if started and self.samples is not None:
            return ref.engine_stats(self.samples, command_seq)
        empty = p.EngineKindStats(0, 0, 0, 0, p.ENGINE_MIN_NONE, 0, 0, 0, p.ENGINE_MIN_NONE, 0, 0)
        return p.EngineStats(command_seq, p.ENGINE_STATE_ENABLED if self.config else 0, 0, 0, 0, 0, **LIMITS,
                             kinds=[empty] * 3)

    def _run(self, start, state):
        """The frames of the pattern from ``start``; the last interval's bins are kept for the flush."""
        cfg = self.config
        self.edges = ref.synthetic_edges(ROLES, state["count"], seed=self.seed, base_tick=start,
                                         overflow_windows=self.overflow_windows)
        end = int(self.edges[0][-1]) + 1
        self.samples = ref.reference_samples(self.edges, ROLES, deadline=cfg.deadline, offset=cfg.offset,
                                             end_tick=end)
        state.update(started=True, now=end + 10_000)
        thresholds = [None if t == p.ENGINE_NEVER else t for t in cfg.thresholds]
        out = list(p.pack_engine_outliers(ref.outliers(self.samples, thresholds)))
        entries = ref.engine_entries(self.samples, cfg.interval_shift, seed=self.seed)
        last = entries[-1].interval if entries else None
        state["late"] = [e for e in entries if e.interval == last]
        out += p.pack_engine_bins([e for e in entries if e.interval != last])
        if cfg.flags & p.ENGINE_RAW:
            records = records_of(self.edges)
            state["raw_records"] = len(records)
            out += p.pack_events(records, mask_bytes=1)
        return out

    def expected(self, kind, subset="all"):
        """The exact figures of one kind: count, min, max, mean (ticks); for all, misses and
        duplicates; and the reference histogram."""
        k = p.ENGINE_KINDS.index(kind)
        s = self.samples
        keep = s.binned[k] & {"all": True, "untagged": ~s.tagged}[subset]
        v = s.value[k][keep]
        out = {"count": len(v), "min": int(v.min()), "max": int(v.max()), "mean": float(v.sum()) / len(v)}
        if subset == "all":
            out.update(misses=int((~s.present[k]).sum()), duplicates=int(s.duplicates[k].sum()),
                       below=int((s.present[k] & (s.value[k] < 0)).sum()))
        return out, ref.histogram(s, k, subset)[0]


def identify_with_engine():
    ident = identify()
    ident.capabilities |= p.CAP_ENGINE
    return ident
