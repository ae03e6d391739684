"""Reference models of the timing cores, written from their specification (not their RTL).

Time is in ticks of the ``ts`` clock. A pin "level during tick n" is the level it holds between the
rising clock edges that start ticks n and n+1; an edge "at tick n" is the first tick of its new level.
"""

MASK32 = 2**32 - 1
MASK64 = 2**64 - 1

PERIODIC, DITHER, RANDOM, BURST, ONESHOT = range(5)
ZERO_SEED_REPLACEMENT = 0x2545F491


def xorshift32(x):
    x ^= (x << 13) & MASK32
    x ^= x >> 17
    x ^= (x << 5) & MASK32
    return x


def filtered_edges(changes, glitch, initial=0):
    """Edges a channel's glitch filter accepts, from its pin changes [(tick, level), ...] sorted.

    A change to a new level is accepted at its own tick when the level then holds for at least
    ``glitch`` ticks (``glitch`` <= 1: always). Returns [(tick, level)] of accepted edges.
    """
    level, accepted = initial, []
    for i, (tick, new) in enumerate(changes):
        hold = changes[i + 1][0] - tick if i + 1 < len(changes) else None
        if new != level and (glitch <= 1 or hold is None or hold >= glitch):
            accepted.append((tick, new))
            level = new
    return accepted


def expected_records(edges_by_channel, configs, n_channels, horizon=None, initial_levels=0):
    """Records the capture core must emit.

    ``edges_by_channel``: {channel: [(tick, level), ...]} accepted (filtered) edges.
    ``configs``: {channel: (enable, rise, fall)}.
    Returns [(tick, channels_mask, levels)] in tick order; ``levels`` holds every channel's
    filtered level after that tick's edges.
    """
    events = sorted((t, ch, lvl) for ch, es in edges_by_channel.items() for t, lvl in es)
    levels, records = initial_levels, {}
    for tick, ch, lvl in events:
        if horizon is not None and tick > horizon:
            break
        levels = (levels & ~(1 << ch)) | (lvl << ch)
        enable, rise, fall = configs.get(ch, (1, 1, 1))
        mask, _ = records.get(tick, (0, 0))
        if enable and (rise if lvl else fall):
            mask |= 1 << ch
        records[tick] = (mask, levels)
    return [(t, m, lv) for t, (m, lv) in sorted(records.items()) if m]


class StimulusConfig:
    def __init__(self, mode=PERIODIC, width=1, period=1000, jitter=0, probability=0, burst_count=1,
                 burst_spacing=10, count=0, start_time=0, seed=1, invert=0, at_time=1):
        self.mode, self.width, self.period, self.jitter = mode, width, period, jitter
        self.probability, self.burst_count, self.burst_spacing = probability, burst_count, burst_spacing
        self.count, self.start_time, self.seed, self.invert = count, start_time, seed, invert
        self.at_time = at_time


def stimulus_rises(cfg, n_pulses, start=None):
    """The first ``n_pulses`` rising (active) edge ticks of a channel (fewer if ``count`` stops it)."""
    start = cfg.start_time if start is None else start
    limit = 1 if cfg.mode == ONESHOT else (cfg.count or None)
    n = n_pulses if limit is None else min(n_pulses, limit)
    rises = [start]
    if cfg.mode == RANDOM:
        # The PRNG advances every tick from the first rising edge on; after each rise the channel
        # waits `period` ticks, then fires on the first tick whose PRNG value is < probability.
        state = cfg.seed or ZERO_SEED_REPLACEMENT
        tick, fire = start, start - 1
        while len(rises) < n:
            if tick - fire >= cfg.period and state < cfg.probability:
                rises.append(tick + 1)
                fire = tick
            state = xorshift32(state)
            tick += 1
        return rises
    r = cfg.seed or ZERO_SEED_REPLACEMENT
    burst_pos = 0
    while len(rises) < n:
        if cfg.mode == DITHER:
            interval = cfg.period - cfg.jitter + ((r * (2*cfg.jitter + 1)) >> 32)
            r = xorshift32(r)
        elif cfg.mode == BURST:
            last = burst_pos == cfg.burst_count - 1
            interval = cfg.period - (cfg.burst_count - 1)*cfg.burst_spacing if last else cfg.burst_spacing
            burst_pos = 0 if last else burst_pos + 1
        else:
            interval = cfg.period
        rises.append(rises[-1] + interval)
    return rises


def stimulus_edges(cfg, n_pulses, start=None):
    """Pin edges [(tick, level)] of the first ``n_pulses`` pulses, polarity applied."""
    active, idle = (0, 1) if cfg.invert else (1, 0)
    edges = []
    for rise in stimulus_rises(cfg, n_pulses, start):
        edges += [(rise, active), (rise + cfg.width, idle)]
    return edges
