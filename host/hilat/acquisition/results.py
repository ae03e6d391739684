"""What a capture writes at its end, or as an interim on SIGUSR1: meta.json (the run's facts and
counters), engine.json of an on-rig run, and summary.json/summary.txt rendered from the aggregates
without reading the run back. ``CaptureResults`` is a part of ``capture.Capture`` (a mixin): it
reads the capture's state and writes through its run writer."""

import dataclasses
import logging
import time
from datetime import datetime, timezone
from pathlib import Path

from hilat import units
from hilat.reports import report
from hilat.rundir.reader import run_from_meta
from hilat.statistics.run_statistics import RunStatistics
from hilat.statistics.streaming import SampleOutOfRange

log = logging.getLogger("hilat")


class CaptureResults:
    """meta.json, engine.json and the summaries of a ``capture.Capture`` (which this is a part of)."""

    def _meta(self, decoder, interim=False):
        ident = self.identity
        stream = self.stream
        status = self.status
        dropped = list(status.dropped) if status else None
        session = self.session
        return {
            "format": "hilat-run", "version": units.RUN_FORMAT_VERSION,
            "label": self.settings.label, "url": self.url,
            "started": datetime.fromtimestamp(self._t0, timezone.utc).isoformat(),
            "wall_seconds": round(time.time() - self._t0, 3),
            "rig": dataclasses.asdict(ident) if ident else None,
            "settings": _jsonable(dataclasses.asdict(self.settings)),
            # What the run measures, resolved against the rig's table (reports read these back).
            "measures": [m.to_json() for m in self._measures],
            "fired": sorted(self._fired),
            "start_tick": self.start_tick,
            # The unit of edges.bin, samples/ and the hlog (docs/subtick.md): 1/units_per_tick tick,
            # an input edge at tick * units_per_tick + subtick_positions[its fraction].
            "time_unit": self.subticks.to_meta(),
            # The run's unit, mu (hilat.units; run format 5 on): what one unit of those times is.
            "unit": self.unit.to_json(),
            # The deadline the windows closed at (ticks; None: the next stimulus): the rig's engine and
            # the host's pairing of the edges, now and in later reports.
            "deadline_ticks": self.deadline_ticks,
            # Where the last windows closed (the edges' unit): the rig's clock once everything before
            # it had arrived (a report closes them there too); None: just after the last edge.
            "observed_end": self.observed_end,
            "stimuli": stream.aggregator.stimuli if stream and not self.settings.no_stimulus else 0,
            "records": stream.records if stream else 0,
            "edges": self.writer.edge_count,
            "raw_bytes": self.writer.raw_bytes,
            "interrupted": self.interrupted,
            "stopped_by": self.stopped_by,
            "interim": interim,
            "error": self.error,
            "counters": {
                "decoder": decoder,
                "gateware_overflow_markers": session.overflows if session else 0,
                "gateware_dropped_per_channel": dropped,
                "gateware_overflow_flag": status.overflow if status else None,
                "rig_records_sent": status.records_sent if status else None,
                "rig_events_sent": status.events_sent if status else None,
                "rig_frames_sent": status.frames_sent if status else None,
                "rig_stimuli_fired": list(status.fired) if status and status.fired else None,
                "out_of_order_edges": stream.out_of_order if stream else 0,
                "hlog_values_below_zero": self.hlog.below_zero if self.hlog else 0,
                "gaps": stream.gap_count if stream else 0,
                # TDC inputs' changes of code 0, each in a gap (docs/tdc.md, "Edges of code 0")
                "tdc_unmeasured_edges": stream.gaps.unmeasured if stream else 0,
                "stream": self._stream_meta(),
            },
            "link_plan": dataclasses.asdict(self.link_plan) if self.link_plan else None,
            "extra": self.extra_meta,
            "calibration": self._calibration_meta(),
            "results": self._results(decoder, interim),
            "engine": self._engine_meta(),
        }

    def _stream_meta(self):
        """udp://: the datagram stream's counters (docs/ethernet.md, "Losses the host counts"), the rig's
        own counts of what it sent, and how far the processing lagged the link (None: no stream)."""
        link = self.stream_link or (self.session.stream if self.session is not None else None)
        return link.counters() if link is not None else None

    def _results(self, decoder, interim):
        """Which results are complete: on_rig (the engine's; "none" without it) and raw (the edges:
        "none" when off, "partial" when any was lost on the way)."""
        s, session = self.settings, self.session
        unfinished = interim or self.interrupted or self.error is not None
        on_rig = "none"
        if s.on_rig:
            rig = self.rig_histograms
            on_rig = "complete" if rig is not None and not rig.problems() and not unfinished else "partial"
        dropped = sum(self.status.dropped) if self.status else 0
        stream = self._stream_meta() or {}
        lost = (any(decoder.get(k) for k in ("lost", "corrupt", "malformed")) or dropped
                or stream.get("records_lost") or stream.get("receiver_error")
                or (session.overflows if session else 0) or (self.stream.out_of_order if self.stream else 0))
        raw = "none" if not s.raw else ("partial" if lost or unfinished else "complete")
        return {"on_rig": on_rig, "raw": raw}

    def _engine_meta(self):
        rig = self.rig_histograms
        if self.engine_config is None:
            return None
        return {"config": dataclasses.asdict(self.engine_config.message()),
                "trigger": self._trigger_meta(),
                "intervals": rig.intervals_complete + rig.intervals_incomplete if rig else 0,
                "outliers": rig.outliers if rig else 0,
                "problems": rig.problems() if rig else ["the engine never started"],
                "notes": rig.notes() if rig else []}

    def _trigger_meta(self):
        """The trigger-out as configured: in ticks and ns, and the pin's delay after the threshold."""
        trigger = self.engine_config.trigger
        if trigger is None:
            return None
        tick_ns = 1e9 / self.ts_hz
        return {"response": trigger.response, "threshold_ticks": trigger.threshold,
                "threshold_ns": trigger.threshold * tick_ns, "width_ticks": trigger.width,
                "width_ns": trigger.width * tick_ns, "on_late": trigger.on_late,
                "delay_ticks": self.engine_limits.trigger_delay}

    def _observed_end(self):
        """Where the last windows close (the edges' unit): in a run that finished, the tick the drain
        made complete (one response window past the last stimulus); else just after the last edge (a
        capture cut short: what follows is a gap)."""
        last = self.stream.last_mu
        # The drain after the rig's clock passed the target read until quiet or until a record at
        # or past it: every edge before it has arrived, or its loss is a gap.
        if self.finished_cleanly and self._complete_before is not None:
            end = int(self._complete_before) * self.units_per_tick
            return max(end, last + 1) if last is not None else end
        return last + 1 if last is not None else None

    def _write(self, decoder):
        if self.identity is None:
            self.writer.write_json("meta.json", {"format": "hilat-run", "version": units.RUN_FORMAT_VERSION,
                                                 "url": self.url,
                                                 "error": self.error, "label": self.settings.label, "rig": None})
            return
        if self.stream is not None:
            self.observed_end = self._observed_end()
            try:
                self.stream.finish(self.observed_end, cut_short=self.interrupted or self.error is not None)
                self.writer.flush()   # the samples' jobs done (a log's error raised here)
            except SampleOutOfRange as e:
                self.error = self.error or f"run {self.run_dir}: {e}"
                log.error("%s", self.error)
        if self.hlog is not None:
            self.writer.flush()   # every sample in the log (the writer's thread) before it closes
            self.hlog.close((self.stream.last_mu or 0) + 1)
        if self.rig_histograms is not None:
            self.writer.write_json("engine.json", {**self.rig_histograms.finish().to_json(),
                                                   "config": dataclasses.asdict(self.engine_config.message())})
        self.writer.flush()
        meta = self._meta(decoder)
        self.writer.write_json("meta.json", meta)
        if self.stream is not None:
            self._write_summaries(meta)

    def _write_summaries(self, meta, interim=False):
        """summary.json (the report document of ``hilat report --format json``, schema in
        docs/hilat-report.schema.json) and summary.txt, from the aggregates: nothing is read back."""
        run = run_from_meta(self.run_dir, meta, edges=())
        if self.rig_histograms is not None:
            statistics = RunStatistics.of_aggregates(run, self.rig_histograms, edges=self.writer.edge_count)
        else:
            statistics = RunStatistics.of_aggregates(run, self.stream.aggregator)
        doc = report.build_report([run], aggregates={run.path: statistics})
        if interim:
            doc["runs"][0]["problems"].insert(0, f"interim summary #{self.interim_summaries} while capturing: "
                                                 f"the samples final so far ({self.stream.paced} "
                                                 f"{'stimuli' if run.builtin else 'start edges'} received)")
        self.summary = doc
        self.writer.write_text("summary.json", report.format_json(doc))
        self.writer.write_text("summary.txt", report.format_text(doc))

    def write_interim(self):
        """SIGUSR1: summary.json/.txt and meta.json of everything final so far, and the open .hlog
        intervals cut at the last edge; the capture goes on."""
        self.interim_summaries += 1
        if self.hlog is not None and self.stream.last_mu is not None:
            self.writer.flush()
            self.hlog.cut(self.stream.last_mu + 1)
        if self.rig_histograms is not None:  # the closed intervals' bins, the engine's totals so far
            self.rig_histograms.feed(self.session.engine_stats())
        self.writer.flush()
        meta = self._meta(self.session.decoder_counters if self.session else {}, interim=True)
        self.writer.write_json("meta.json", meta)
        self._write_summaries(meta, interim=True)
        log.info("interim summary #%d written to %s", self.interim_summaries, self.run_dir / "summary.txt")

    def _calibration_meta(self):
        if self.calibration is None:
            return None
        meta = dict(self.calibration)
        if self.offset_ticks:
            # A response sooner than the rig's own delay cannot have been caused by the stimulus: its
            # latency is negative after the subtraction (and -1 would read as a miss), so say so.
            early = self.stream.responses_before_offset if self.stream else 0
            meta["responses_before_offset"] = early
            if early:
                meta["warnings"] = meta["warnings"] + [
                    f"{early} responses came sooner than the rig's own loopback delay "
                    f"({self.offset_ticks:g} ticks): check the calibration and the wiring"]
                meta["statement"] = meta["statement"] + [f"WARNING: {meta['warnings'][-1]}"]
        return meta

    def report(self):
        """The run's summary text (summary.txt)."""
        return (self.run_dir / "summary.txt").read_text().rstrip("\n") if self.run_dir else ""


def _jsonable(obj):
    if isinstance(obj, dict):
        return {k: _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, Path):
        return str(obj)
    return obj
