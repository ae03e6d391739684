"""The live view of a capture: what the run has measured so far, while it runs.

On a terminal, a ``rich`` table on stderr refreshed a few times a second: stimuli and rate, per
measurement kind min / p50 / p99 / p99.9 / max so far, misses, unknown windows (a gap in the record
stream touched them: neither a sample nor a miss), duplicates, the gaps, losses; over udp:// the
Ethernet stream's datagrams/s and records/s, its losses and how far processing lags it. Otherwise
(a log, CI), a plain line every few seconds, as cyclictest prints. Both print a line for every new
maximum. Figures come from the streaming aggregates: an update costs the same at any run length.

An on-rig capture without raw edges has no edges to pair: its view shows the rig's interval
histograms as they arrive (``engine_interval``, from ``engine.RigHistograms``): per kind the samples,
p50 / p99 / p99.9 and max of the intervals in so far and of the last one, at the bins' resolution.
"""

import sys
import time

from hilat import analysis, engine
from hilat.statistics.distribution import Distribution
from hilat.statistics.percentiles import percentile_label

_PERCENTILES = (0.5, 0.99, 0.999)


def _us(ticks, tick_ns):
    return "-" if ticks is None else f"{ticks * tick_ns / 1000:.3f}"


def _bin_figures(kind, counts):
    """What the rig's bins alone say (ticks, bin resolution): count, max, the overflow bin's count
    and the percentiles, from their ``Distribution``."""
    d = Distribution.rig(kind, 1.0, counts, None)
    return {"count": d.count, "max": d.max_mu, "overflow": d.overflow,
            "percentiles": d.figures_mu(_PERCENTILES)["percentiles"]}


def _max_us(figures, tick_ns):
    """The max of ``_bin_figures``: '>' the bins' range when the overflow bin holds samples."""
    if figures is None:
        return "-"
    return f">{_us(engine.OVERFLOW_FROM, tick_ns)}" if figures["overflow"] else _us(figures["max"], tick_ns)


class LiveView:
    """``enabled=False``: silent. ``tty``: force the terminal (rich) or plain form (default: whether
    ``file`` is a terminal)."""

    def __init__(self, enabled=True, file=None, tty=None, refresh_s=None):
        self.enabled = enabled
        self.file = file or sys.stderr
        self.tty = self.file.isatty() if tty is None else tty
        self.refresh_s = refresh_s or (0.25 if self.tty else 2.0)
        self.capture = None
        self.kinds = []
        self._live = None
        self._console = None
        self._last = 0.0
        self._t0 = time.monotonic()
        self.on_rig = False          # the rig's interval histograms, not the host's pairing
        self.intervals = 0           # engine intervals in so far
        self.last_interval = None    # the latest engine.EngineInterval
        self._shown_bin = {}         # per kind, the highest bin shown as a new maximum
        self._closed = False

    def begin(self, capture, kinds):
        self.capture = capture
        # An on-rig capture's figures are the engine's (its summary too), raw edges beside them or not.
        self.on_rig = capture.settings.on_rig
        self.kinds = list(engine.KINDS) if self.on_rig else list(kinds)
        self._t0 = time.monotonic()
        if not self.enabled or not self.tty:
            return
        from rich.console import Console
        from rich.live import Live

        self._console = Console(file=self.file, force_terminal=True)
        # Refreshed from the capture loop (update()), not a thread: the aggregates are not shared.
        self._live = Live(console=self._console, auto_refresh=False, transient=False)
        self._live.start()

    # ---- figures ----

    def _lost(self):
        c = self.capture
        decoder = c.session.decoder_counters if c.session else {}
        status = c.status
        return {"frames lost": decoder.get("lost", 0), "frames corrupt": decoder.get("corrupt", 0),
                "frames malformed": decoder.get("malformed", 0),
                "gateware drops": sum(status.dropped) if status else 0,
                "overflow markers": c.session.overflows if c.session else 0, **self._stream_lost()}

    def _stream_lost(self):
        link = self._stream()
        if link is None:
            return {}
        counts = link.decoder.counts
        return {"datagrams lost": counts["datagrams_lost"], "records lost on the link": counts["records_lost"]}

    def _stream(self):
        """udp://: the capture's Ethernet stream (udp_receiver.StreamLink), while it runs or after."""
        c = self.capture
        return getattr(c.session, "stream", None) or getattr(c, "stream_link", None) if c.session else None

    def _link(self):
        """The Ethernet stream's rates since the last update and how far processing lags it."""
        link = self._stream()
        if link is None:
            return None
        datagrams_s, records_s = link.rates()
        return (f"link {datagrams_s:,.0f} datagrams/s, {records_s:,.0f} records/s, processing {link.backlog} "
                f"datagrams behind")

    def _state(self):
        c = self.capture
        stream = c.stream
        agg = stream.aggregator
        elapsed = max(time.monotonic() - self._t0, 1e-9)
        lost = self._lost()
        rows = []
        for kind in self.kinds:
            st = agg.distribution("all", kind).figures_mu(_PERCENTILES)
            rows.append((kind, agg.starts[("all", kind)], st, agg.misses[("all", kind)],
                         agg.duplicates[("all", kind)], agg.unknown[("all", kind)]))
        counted = "stimuli" if not c.settings.no_stimulus else f"{self.kinds[0]} starts"
        total = f"/{c.settings.count}" if c.settings.count else ""
        return {"elapsed": elapsed, "paced": stream.paced, "total": total, "counted": counted,
                "records": stream.records, "rate": stream.records / elapsed, "rows": rows, "lost": lost,
                "gaps": stream.gap_count, "mu_ns": c.unit.mu_ns, "link": self._link()}

    def _table(self, s):
        from rich import box
        from rich.table import Table

        table = Table(title=f"hilat capture: {s['paced']}{s['total']} {s['counted']}, {s['records']} records "
                            f"({s['rate']:,.0f}/s), {s['elapsed']:.1f} s; latencies in us",
                      title_justify="left", box=box.SIMPLE_HEAD)
        table.add_column("kind", no_wrap=True, min_width=max(len(k) for k in self.kinds))
        for name in ("samples", "min", "p50", "p99", "p99.9", "max", "misses", "unknown", "dups"):
            table.add_column(name, justify="right", no_wrap=True)
        for kind, starts, st, misses, dups, unknown in s["rows"]:
            pct = st["percentiles"]
            table.add_row(kind, str(starts), _us(st["min"], s["mu_ns"]),
                          *(_us(pct[percentile_label(p)], s["mu_ns"]) for p in _PERCENTILES),
                          _us(st["max"], s["mu_ns"]), str(misses), str(unknown), str(dups))
        lost = ", ".join(f"{what} {n}" for what, n in s["lost"].items())
        table.caption = f"gaps {s['gaps']} (their windows unknown); lost: {lost}" + (
            f"\n{s['link']}" if s["link"] else "")
        table.caption_justify = "left"
        return table

    def _engine_state(self):
        """The rig's intervals in so far: per kind (kind, figures of all of them, of the last one)."""
        c = self.capture
        rig = c.rig_histograms
        last = self.last_interval
        rows = []
        for k, kind in enumerate(self.kinds):
            so_far = _bin_figures(kind, rig.counts(kind)) if rig is not None else None
            latest = _bin_figures(kind, last.counts[k].sum(axis=0)) if last is not None else None
            rows.append((kind, so_far, latest))
        lost = self._lost()
        if rig is not None and rig.intervals_incomplete:
            lost["engine intervals incomplete"] = rig.intervals_incomplete
        origin = rig.origin_tick if rig is not None else 0
        return {"elapsed": max(time.monotonic() - self._t0, 1e-9), "intervals": self.intervals,
                "rig_s": (last.end_tick - origin) / c.ts_hz if last is not None else 0.0,
                "interval_ms": (1 << rig.shift) / c.ts_hz * 1e3 if rig is not None else None,
                "rows": rows, "lost": lost, "tick_ns": 1e9 / c.ts_hz}

    def _engine_table(self, s):
        from rich import box
        from rich.table import Table

        length = f" of {s['interval_ms']:.4g} ms" if s["interval_ms"] else ""
        table = Table(title=f"hilat capture --on-rig: {s['intervals']} intervals{length} from the rig, "
                            f"{s['rig_s']:.3f} s of rig time, {s['elapsed']:.1f} s; latencies in us "
                            "(the engine's bins, 2 digits)",
                      title_justify="left", box=box.SIMPLE_HEAD)
        table.add_column("kind", no_wrap=True, min_width=max(len(k) for k in self.kinds))
        for name in ("samples", "p50", "p99", "p99.9", "max", "last n", "last p99", "last max"):
            table.add_column(name, justify="right", no_wrap=True)
        tick_ns = s["tick_ns"]
        for kind, so_far, latest in s["rows"]:
            cells = []
            for figures, labels in ((so_far, _PERCENTILES), (latest, _PERCENTILES[1:2])):
                cells += [str(figures["count"]) if figures else "-",
                          *(_us(figures and figures["percentiles"][percentile_label(p)], tick_ns)
                            for p in labels), _max_us(figures, tick_ns)]
            table.add_row(kind, *cells)
        table.caption = "lost: " + ", ".join(f"{what} {n}" for what, n in s["lost"].items())
        table.caption_justify = "left"
        return table

    def _engine_line(self, s):
        tick_ns = s["tick_ns"]
        parts = [f"T: {s['elapsed']:7.1f} s I: {s['intervals']} intervals ({s['rig_s']:.3f} s rig time)"]
        for kind, so_far, latest in s["rows"]:
            if so_far is None:
                parts.append(f"{kind} -")
                continue
            pct = so_far["percentiles"]
            text = (f"{kind} n {so_far['count']} P50 {_us(pct['p50'], tick_ns)} P99 {_us(pct['p99'], tick_ns)} "
                    f"P99.9 {_us(pct['p99.9'], tick_ns)} Max {_max_us(so_far, tick_ns)} us")
            if latest is not None:
                text += (f" (last interval n {latest['count']} P99 {_us(latest['percentiles']['p99'], tick_ns)} "
                         f"Max {_max_us(latest, tick_ns)})")
            parts.append(text)
        parts.append(f"lost {sum(s['lost'].values())}")
        return " | ".join(parts)

    def _line(self, s):
        parts = [f"T: {s['elapsed']:7.1f} s C: {s['paced']}{s['total']} {s['counted']} ({s['rate']:,.0f} records/s)"]
        for kind, _starts, st, misses, dups, unknown in s["rows"]:
            pct = st["percentiles"]
            parts.append(f"{kind} Min {_us(st['min'], s['mu_ns'])} P50 {_us(pct['p50'], s['mu_ns'])} "
                         f"P99 {_us(pct['p99'], s['mu_ns'])} Max {_us(st['max'], s['mu_ns'])} us "
                         f"misses {misses} unknown {unknown} dup {dups}")
        parts.append(f"gaps {s['gaps']}")
        parts.append(f"lost {sum(s['lost'].values())}")
        if s["link"]:
            parts.append(s["link"])
        return " | ".join(parts)

    # ---- events ----

    def update(self, force=False):
        if not self.enabled or self.capture is None or self.capture.stream is None:
            return
        now = time.monotonic()
        if not force and now - self._last < self.refresh_s:
            return
        self._last = now
        if self.on_rig:
            s = self._engine_state()
            table, line = self._engine_table, self._engine_line
        else:
            s = self._state()
            table, line = self._table, self._line
        if self._live is not None:
            self._live.update(table(s), refresh=True)
        else:
            self.file.write(line(s) + "\n")
            self.file.flush()

    def engine_interval(self, interval):
        """An interval of the rig's engine came in (``engine.RigHistograms``' ``on_interval``): shown at
        the next update; a kind whose highest bin is above all before prints a new-maximum line."""
        if not self.enabled or not self.on_rig or self._closed:
            return
        self.intervals += 1
        self.last_interval = interval
        rig = self.capture.rig_histograms
        origin = rig.origin_tick if rig is not None else interval.start_tick
        for k, kind in enumerate(self.kinds):
            filled = (interval.counts[k].sum(axis=0) != 0).nonzero()[0]
            if not len(filled) or filled[-1] <= self._shown_bin.get(kind, -1):
                continue
            self._shown_bin[kind] = top = int(filled[-1])
            tick_ns = 1e9 / self.capture.ts_hz
            value = (f"beyond {_us(engine.OVERFLOW_FROM, tick_ns)} us (the overflow bin)" if top == engine.OVERFLOW_BIN
                     else f"{_us(engine.bin_value(top), tick_ns)} us (bin up to {engine.bin_value(top)} ticks)")
            start_s = max(interval.start_tick - origin, 0) / self.capture.ts_hz
            self._say(f"new max {kind}: {value} in the rig's interval from {start_s:.3f} s")

    def new_max(self, kind, worst):
        if not self.enabled or self.capture is None:
            return
        mu_ns = self.capture.unit.mu_ns
        what = "stimulus" if kind in dict(analysis.KINDS) else "sample"
        unit = self.capture.subticks.unit_name
        self._say(f"new max {kind}: {_us(worst['mu'], mu_ns)} us ({worst['mu']} {unit}s) at {what} "
                  f"#{worst['index']}, {unit} {worst['start_mu']}" + (", tagged" if worst["tagged"] else ""))

    def _say(self, text):
        if self._console is not None:
            self._console.print(text, highlight=False)
        else:
            self.file.write(text + "\n")
            self.file.flush()

    def close(self):
        if self._live is not None:
            self.update(force=True)
            self._live.stop()
            self._live = None
        elif self.on_rig:
            self.update(force=True)  # the last intervals come with the flush, after the last refresh
        self._closed = True
