"""The live view of a capture: what the run has measured so far, while it runs.

On a terminal, a ``rich`` table on stderr refreshed a few times a second: stimuli and rate, per
measurement kind min / p50 / p99 / p99.9 / max so far, misses, duplicates, losses. Otherwise
(a log, CI), a plain line every few seconds, as cyclictest prints. Both print a line for every new
maximum. Figures come from the streaming aggregates: an update costs the same at any run length.
"""

import sys
import time

from hilat import analysis

_PERCENTILES = (0.5, 0.99, 0.999)


def _us(ticks, tick_ns):
    return "-" if ticks is None else f"{ticks * tick_ns / 1000:.3f}"


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

    def begin(self, capture, kinds):
        self.capture = capture
        self.kinds = list(kinds)
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

    def _state(self):
        c = self.capture
        stream = c.stream
        agg = stream.aggregator
        elapsed = max(time.monotonic() - self._t0, 1e-9)
        decoder = c.session.decoder_counters if c.session else {}
        status = c.status
        lost = {"frames lost": decoder.get("lost", 0), "frames corrupt": decoder.get("corrupt", 0),
                "frames malformed": decoder.get("malformed", 0),
                "gateware drops": sum(status.dropped) if status else 0,
                "overflow markers": c.session.overflows if c.session else 0}
        rows = []
        for kind in self.kinds:
            st = agg.stats("all", kind, percentiles=_PERCENTILES)
            rows.append((kind, agg.starts[("all", kind)], st, agg.misses[("all", kind)],
                         agg.duplicates[("all", kind)]))
        counted = "stimuli" if not c.settings.no_stimulus else f"{self.kinds[0]} starts"
        total = f"/{c.settings.count}" if c.settings.count else ""
        return {"elapsed": elapsed, "paced": stream.paced, "total": total, "counted": counted,
                "records": stream.records, "rate": stream.records / elapsed, "rows": rows, "lost": lost,
                "tick_ns": 1e9 / c.ts_hz}

    def _table(self, s):
        from rich import box
        from rich.table import Table

        table = Table(title=f"hilat capture: {s['paced']}{s['total']} {s['counted']}, {s['records']} records "
                            f"({s['rate']:,.0f}/s), {s['elapsed']:.1f} s; latencies in us",
                      title_justify="left", box=box.SIMPLE_HEAD)
        table.add_column("kind", no_wrap=True, min_width=max(len(k) for k in self.kinds))
        for name in ("samples", "min", "p50", "p99", "p99.9", "max", "misses", "dups"):
            table.add_column(name, justify="right", no_wrap=True)
        for kind, starts, st, misses, dups in s["rows"]:
            pct = st["percentiles"]
            table.add_row(kind, str(starts), _us(st["min"], s["tick_ns"]),
                          *(_us(pct[analysis.percentile_label(p)], s["tick_ns"]) for p in _PERCENTILES),
                          _us(st["max"], s["tick_ns"]), str(misses), str(dups))
        lost = ", ".join(f"{what} {n}" for what, n in s["lost"].items())
        table.caption = f"lost: {lost}"
        table.caption_justify = "left"
        return table

    def _line(self, s):
        parts = [f"T: {s['elapsed']:7.1f} s C: {s['paced']}{s['total']} {s['counted']} ({s['rate']:,.0f} records/s)"]
        for kind, _starts, st, misses, dups in s["rows"]:
            pct = st["percentiles"]
            parts.append(f"{kind} Min {_us(st['min'], s['tick_ns'])} P50 {_us(pct['p50'], s['tick_ns'])} "
                         f"P99 {_us(pct['p99'], s['tick_ns'])} Max {_us(st['max'], s['tick_ns'])} us "
                         f"misses {misses} dup {dups}")
        parts.append(f"lost {sum(s['lost'].values())}")
        return " | ".join(parts)

    # ---- events ----

    def update(self, force=False):
        if not self.enabled or self.capture is None or self.capture.stream is None:
            return
        now = time.monotonic()
        if not force and now - self._last < self.refresh_s:
            return
        self._last = now
        s = self._state()
        if self._live is not None:
            self._live.update(self._table(s), refresh=True)
        else:
            self.file.write(self._line(s) + "\n")
            self.file.flush()

    def new_max(self, kind, worst):
        if not self.enabled or self.capture is None:
            return
        tick_ns = 1e9 / self.capture.ts_hz
        what = "stimulus" if kind in dict(analysis.KINDS) else "sample"
        text = (f"new max {kind}: {_us(worst['ticks'], tick_ns)} us ({worst['ticks']} ticks) at {what} "
                f"#{worst['index']}, tick {worst['start_tick']}" + (", tagged" if worst["tagged"] else ""))
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
