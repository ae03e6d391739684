"""``hilat capture``: configure the rig, run stimuli, stream every edge to a run directory.

The capture is a stream (docs/analysis.md, "Streaming capture"): bytes -> raw.bin -> records
(``hilat.link.batch``, as arrays) -> edges -> edges.bin and the streaming pairing
(``aggregate.StreamingAggregator``) -> samples/KIND.bin, the rolling .hlog and the live view. Memory
is flat however long the run: nothing holds the records. At the end (or on SIGUSR1, as an interim)
summary.json and summary.txt are rendered from the aggregates, without reading the run back.
The run directory's layout is in ``hilat.rundir.layout``.

This module is the capture's lifecycle (``Capture.run``: set-up, collect, finish); its settings and
plan are ``settings``, the record stream and its consumers ``stream``, and what it writes at the
end (meta.json, the summaries) ``results``.

On-rig (``CaptureSettings.on_rig``, docs/engine.md): the rig's engine pairs and bins; its frames go
to ``engine.RigHistograms`` (hlog/rig.hlog, outliers.bin, engine.json) and the summary comes from
its bins and exact statistics, complete whatever the link carries. Raw edges are off, or best effort
beside it (``raw``); meta.json's ``results`` says which results are complete.
"""

import errno
import logging
import signal
import time
from datetime import datetime
from pathlib import Path

from hilat import analysis, calibration, engine, units
from hilat.acquisition import link_plan
from hilat.acquisition import live as live_view
from hilat.acquisition.results import CaptureResults
from hilat.acquisition.settings import channel_roles, effective_deadline, engine_offset, plan
from hilat.acquisition.stream import _Stream
from hilat.calibration import tdc_placement, tdc_rig
from hilat.calibration.resolution import subticks_for
from hilat.link import protocol as p
from hilat.link.rig import RigError, RigSilent
from hilat.link.session import Session
from hilat.link.transport import TransportError
from hilat.reports.interval_log import IntervalLog
from hilat.rundir.layout import RunError
from hilat.rundir.reader import load_run
from hilat.rundir.writer import RunWriter
from hilat.statistics.streaming import SampleOutOfRange

log = logging.getLogger("hilat")


# What a write into the run directory fails with when the disk (or a quota, a file size limit) is full.
_WRITE_ERRORS = {errno.ENOSPC, errno.EFBIG, errno.EDQUOT, errno.EROFS, errno.EIO}


class Capture(CaptureResults):
    """One capture run; keeps everything it received even when the run ends badly.

    ``Capture(url, settings)`` opens its own session; ``Capture(None, settings, session=s)`` uses an
    open ``Session`` (the CLI identifies the rig and checks the settings on that one link)."""

    def __init__(self, url, settings, extra_meta=None, session=None, live=None):
        self.url = url if url is not None else session.url
        self.settings = settings
        self.extra_meta = extra_meta or {}
        self.session = session
        self.live = live             # a live.LiveView, or None: the capture makes one when progress is on
        self.status = None
        self.identity = None
        self.start_tick = None
        self.interrupted = False
        self.stopped_by = None       # the signal that interrupted it, when not Ctrl-C (SIGTERM, SIGHUP)
        self.error = None
        self.run_dir = None
        self.writer = None
        self.stream = None
        self.hlog = None
        self.calibration = None    # meta["calibration"]: what is applied, once the rig identified
        self.interim_summaries = 0
        self.engine_config = None  # engine.EngineConfig of an on-rig capture, once configured
        self.rig_histograms = None # engine.RigHistograms of an on-rig capture, from its start on
        self.engine_limits = None  # the engine's ENGINE_STATS before the run (its limits, trigger delay)
        self.link_plan = None      # link_plan.LinkPlan: the raw edges' expected rate against the link's
        self.stream_link = None    # udp_receiver.StreamLink of a udp:// capture, once its stream closed
        self.finished_cleanly = False  # the stimuli stopped and everything before the rig's clock arrived
        self.observed_end = None
        self._complete_before = None   # tick before which every record arrived or is a gap (the drain)
        self._roles = None         # analysis.Channels, once the rig identified
        self._measures = []        # measures.Measure, once the rig identified
        self._fired = {}           # {stimulus channel: StimulusSettings} fired by this capture
        self._pace = None          # (channel, level): the edge --count counts
        self._subticks = None      # analysis.Subticks, once the calibration is known
        self._t0 = None
        self._interim_requested = False
        self._last_flush = 0.0

    # set-up ---------------------------------------------------------------------------------------

    def _make_run_dir(self):
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        name = stamp + (f"-{self.settings.label}" if self.settings.label else "")
        run_dir = Path(self.settings.out_dir) / name
        suffix = 1
        while run_dir.exists():
            suffix += 1
            run_dir = Path(self.settings.out_dir) / f"{name}-{suffix}"
        run_dir.mkdir(parents=True)
        return run_dir

    def _configure(self, session):
        ident = self.identity
        flags = p.CAPTURE_ENABLE | p.CAPTURE_RISE | p.CAPTURE_FALL
        inputs = range(ident.n_stimulus, ident.n_stimulus + ident.n_inputs)
        session.configure_capture({ch: flags for ch in range(session.n_channels)},
                                  {ch: self.settings.glitch for ch in inputs})
        # Stimulus output k is channel k of the capture stream and output k of the rig (the channel
        # table puts the outputs first).
        for stim, s in self._fired.items():
            session.configure_stimulus(stim, s.mode, width=s.width, period=s.period, jitter=s.jitter,
                                       probability=s.probability, burst_count=s.burst_count,
                                       burst_spacing=s.burst_spacing, count=self.settings.count or 0, seed=s.seed,
                                       invert=s.invert)
        if self.settings.on_rig:
            self._configure_engine(session)
        if session.datagrams and self.settings.raw:
            # udp://: the raw edges come as datagrams into stream.bin (docs/ethernet.md), enabled
            # before START, which restarts the stream.
            session.open_stream(self.run_dir / "stream.bin")
        self.start_tick = session.start(self._fired_mask)
        if self.settings.on_rig:
            self.rig_histograms = engine.RigHistograms(
                self.engine_config.interval_shift, self.ts_hz, origin_tick=self.start_tick, start_time=self._t0,
                with_tag=self._roles.tag is not None, on_interval=self.live.engine_interval,
                on_log_lines=self.writer.rig_intervals, on_outliers=self.writer.outliers)
            session.engine_sink = self.rig_histograms.feed

    def _configure_engine(self, session):
        s = self.settings
        limits = session.engine_stats()
        try:
            config = engine.EngineConfig.from_roles(
                self._roles, deadline=self.deadline_ticks, offset=engine_offset(self.offset_ticks),
                interval_shift=s.engine_interval_shift, raw=s.raw, trigger=s.trigger,
                thresholds=tuple(s.outlier_thresholds.get(kind) for kind in engine.KINDS))
            config.check_limits(limits)
            config.message()
        except ValueError as e:
            raise RigError(str(e)) from None
        session.configure_engine(config)
        self.engine_config = config
        self.engine_limits = limits

    @property
    def _fired_mask(self):
        return sum(1 << ch for ch in self._fired)

    def _plan(self):
        try:
            self._roles, self._measures, self._fired, self._pace = plan(self.settings, self.identity)
        except ValueError as e:
            raise RigError(str(e)) from None

    def _check_link(self):
        """One line before the start when the raw edges will not fit through the link (docs/analysis.md,
        "Gaps"); the plan is kept in meta.json."""
        if self.settings.on_rig or not self.settings.raw or not self._fired:
            return
        if str(self.url).startswith("udp://"):
            return   # gigabit Ethernet: ~14.6 M records/s, beyond any stimulus rate the plan knows
        serial = not str(self.url).startswith(("socket://", "loop://"))
        self.link_plan = link_plan.plan(self._fired, self._pace[0], self._roles, self.identity,
                                        self.settings.baudrate if serial else None, count=self.settings.count)
        if self.link_plan.over:
            log.warning("%s", self.link_plan.warning())

    def _open_stream(self):
        builtin = not self.settings.no_stimulus
        kinds = list(analysis.kind_titles(self._roles, self._measures, builtin))
        self.writer.set_kinds(kinds)
        if self.settings.hlog_interval_s and self.settings.raw:
            (self.run_dir / "hlog").mkdir(exist_ok=True)
            self.hlog = IntervalLog(self.run_dir / "hlog" / "capture.hlog", self.unit.mu_hz,
                                    self.settings.hlog_interval_s, self._t0)
        if self.live is None:
            # On-rig without raw edges it shows the engine's intervals as they come.
            self.live = live_view.LiveView(enabled=self.settings.progress)
        self.live.begin(self, kinds)
        # The stream works in the edges' unit: durations in ticks become sub-ticks when S > 1.
        offset, deadline, measures = analysis.in_subticks(self.units_per_tick, self.offset_ticks,
                                                          self.deadline_ticks, self._measures)
        self.stream = _Stream(self.writer, self._roles, measures, builtin, deadline, offset, self._pace,
                              self.unit.mu_hz, hlog=self.hlog, chunk_records=self.settings.chunk_records,
                              on_new_max=self.live.new_max, subticks=self.subticks,
                              code_counts=self._code_counts())

    # stream ---------------------------------------------------------------------------------------

    def _done_stimulating(self):
        s = self.settings
        if s.count is not None and self.stream.paced >= s.count:
            return True
        if s.duration_ticks is not None and self.stream.last_mu is not None:
            return self.stream.last_mu >= (self.start_tick + s.duration_ticks) * self.units_per_tick
        return False

    def _rig_finished(self, status):
        """STATUS says the stimulus finished its count, yet fewer stimuli than the count arrived:
        edges were lost on the way (counted), so stop waiting for them. What is still on its way
        arrives in the drain that follows (``_finish``); frames lost on the link never do, so the
        records received are not compared with those the rig sent."""
        self.status = status
        stim = self._roles.stimulus
        return bool(stim in self._fired and len(status.stim_status) > stim and status.stim_status[stim] & p.STIM_DONE
                    and self.settings.count is not None)

    def _stimuli_fired(self):
        """The paced stimulus channel's pulses as the rig's generator counted them (its last STATUS),
        else the count asked for; None without either."""
        stim = self._roles.stimulus if self._roles else None
        fired = getattr(self.status, "fired", None) if self.status else None
        if fired and stim is not None and stim < len(fired) and stim in self._fired:
            return int(fired[stim])
        return self.settings.count if self._fired else None

    def _tick(self):
        """After every read: the live view, and an interim summary when SIGUSR1 asked for one."""
        self.live.update()
        now = time.monotonic()
        if now - self._last_flush >= 1.0:
            # Decoded data reaches the disk within a second (raw.bin is unbuffered anyway), written
            # behind: the decoding does not wait for it.
            self._last_flush = now
            self.writer.flush(wait=False)
        if self._interim_requested:
            self._interim_requested = False
            self.write_interim()

    def _on_rig_status(self, status):
        """On-rig: the run ends when the rig says its stimulus finished its count (or its clock
        passed the duration), whatever the raw edges (if any) that arrived."""
        self.status = status
        s = self.settings
        stim = self._roles.stimulus
        if s.count is not None:
            return len(status.stim_status) > stim and bool(status.stim_status[stim] & p.STIM_DONE)
        if s.duration_ticks is not None:
            return self.session.now() >= self.start_tick + s.duration_ticks
        return False

    def _collect(self, session):
        if self.settings.on_rig:
            # The engine may be silent for a whole interval: the rig answering STATUS is what counts.
            session.collect(self.stream, lambda: False, on_status=self._on_rig_status, status_every=0.25,
                            idle_timeout=None, tick=self._tick)
        else:
            session.collect(self.stream, self._done_stimulating, on_status=self._rig_finished, tick=self._tick)

    def _finish(self, session):
        """Stop stimuli, then let every response up to the last deadline arrive."""
        if self._fired:
            session.stop(self._fired_mask)
        # Wait one response window past the last stimulus (with no stimulus: a measure's deadline, else 1 ms).
        window = self.settings.deadline_ticks or max(
            [s.period + s.jitter for s in self._fired.values()]
            or [m.deadline_ticks or 0 for m in self._measures] + [self.identity.ts_hz // 1000])
        if self.deadline_ticks:
            window = min(window, self.deadline_ticks)
        # The last stimulus fired before the rig's clock now (the STOP is acknowledged): the last one
        # received may be far older, its successors still on the way or lost (a link past its rate).
        target = session.now() + window + 64
        session.wait_clock(target, self.stream, tick=self._tick)
        self._complete_before = target
        # Records older than `target` are in the FIFO or on the wire: read until quiet, or until a
        # record at or past `target` arrives.
        if self.settings.raw:
            session.drain(self.stream, until_tick=target)
        self._close_stream(session)
        if self.rig_histograms is not None:
            self._flush_engine(session)
        self.status = session.finish(self.stream)

    def _close_stream(self, session):
        """udp://: the rig's counts of what it sent, the stream disabled, the rest decoded."""
        if session.stream is not None:
            self.stream_link = session.close_stream(self.stream)
            if self.live is not None:
                self.live.update()
            c = self.stream_link.counters()
            lag = c.get("processing_done_after_last_arrival_s")
            log.info("stream: the rig sent %s records in %s datagrams; %d records arrived, %d datagrams (%d records) "
                     "lost%s", c.get("rig_records_sent"), c.get("rig_datagrams_sent"), c["records"],
                     c["datagrams_lost"], c["records_lost"],
                     f"; processing was done {lag:.2f} s after the last datagram (at most {c['peak_lag_datagrams']} "
                     "datagrams behind)" if lag is not None else "")

    def _flush_engine(self, session):
        """The engine closes every interval (its bins arrive before the ACK), then its exact totals."""
        self.rig_histograms.end_tick = session.now()
        session.engine_flush(self.stream)
        self.rig_histograms.feed(session.engine_stats())

    # run ------------------------------------------------------------------------------------------

    def _on_sigusr1(self, signum, frame):
        self._interim_requested = True

    def run(self):
        try:
            self.run_dir = self._make_run_dir()
            self.writer = RunWriter(self.run_dir)
        except OSError as e:
            raise RunError(f"cannot create a run directory in {self.settings.out_dir}: {e.strerror or e}") from None
        self._t0 = time.time()
        own_session = self.session is None
        session = self.session
        previous_usr1 = None
        try:
            if own_session:
                session = self.session = Session(self.url, baudrate=self.settings.baudrate, raw_sink=self.writer.raw)
                session.open()
            else:
                session.set_raw_sink(self.writer.raw)
            self.identity = session.identity
            log.info("rig: %s, %s; ts %.3f MHz", self.identity.gateware, self.identity.firmware,
                     self.identity.ts_hz / 1e6)
            self._plan()
            self._check_link()
            self.calibration = calibration.for_rig(self.identity, self.settings.calibration_dir,
                                                   reason_if_none=self.settings.no_calibration_reason)
            for warning in self.calibration["warnings"]:
                log.warning("%s", warning)

            self._subticks = tdc_rig.placement_for(self.identity, self.calibration)
            self._open_stream()
            try:
                previous_usr1 = signal.signal(signal.SIGUSR1, self._on_sigusr1)
            except ValueError:  # not the main thread: no interim summaries on a signal
                previous_usr1 = None
            self._configure(session)
            self._write_started(session)
            self._collect(session)
            self._finish(session)
            self._tdc_online()
            self.finished_cleanly = True
            fired = self._stimuli_fired()
            if fired is not None and self.stream.paced < fired:
                log.warning("the rig fired %d stimuli, %d arrived: the others' edges were lost (counted; their "
                            "windows are unknown)", fired, self.stream.paced)
        except KeyboardInterrupt as e:
            self.interrupted = True
            # SIGTERM, SIGHUP (hilat.shutdown.Terminated) are said by name; Ctrl-C is the default.
            self.stopped_by = signal.Signals(e.signum).name if hasattr(e, "signum") else None
            log.warning("interrupted%s: stopping the rig and keeping what was captured",
                        f" ({self.stopped_by})" if self.stopped_by else "")
            if session is not None and session.rig is not None and self.identity is not None:
                try:
                    session.rig.command_timeout = 2.0
                    session.stop()
                    if self.stream is not None:
                        session.drain(self.stream, quiet=0.1)
                        self._close_stream(session)
                        if self.rig_histograms is not None:
                            self._flush_engine(session)
                        self.status = session.finish(self.stream)
                except (RigError, TransportError, KeyboardInterrupt):
                    pass
        except RigSilent as e:
            self.error = str(e)
            if self.start_tick is not None:   # mid-run: say what it likely is
                self.error += (": the rig stopped answering mid-run (reset, powered off, or its cable pulled?); the "
                               "run up to its last record is kept, what came after is unknown")
        except (RigError, TransportError) as e:
            self.error = str(e)
        except SampleOutOfRange as e:   # a value no histogram holds: an error, never a dropped sample
            self.error = f"run {self.run_dir}: {e}"
            log.error("%s", self.error)
        except OSError as e:   # the run directory cannot be written: disk full, a file size limit
            if e.errno not in _WRITE_ERRORS:
                raise
            self._stop_on_write_error(session, e)
        finally:
            if previous_usr1 is not None:
                signal.signal(signal.SIGUSR1, previous_usr1)
            if self.live is not None:
                self.live.close()
            decoder = session.decoder_counters if session is not None else {}
            if own_session and session is not None:
                session.close()
            try:
                self._write(decoder)
            except OSError as e:
                self.error = self.error or self._write_error(e)
            finally:
                try:
                    self.writer.close()
                except OSError as e:
                    self.error = self.error or self._write_error(e)
        return self

    # a TDC rig's online mode (docs/tdc.md, "Online mode") -------------------------------------------------

    def _code_counts(self):
        tdc_inputs = self.identity.tdc_inputs
        if not (self.settings.tdc_online and tdc_inputs):
            if self.settings.tdc_online:
                log.warning("--tdc-online: this rig has no TDC; nothing to re-estimate")
            return None
        return tdc_rig.CodeCounts(self.identity.n_stimulus, tdc_inputs)

    def _tdc_online(self):
        """Re-estimate each TDC input's bins from the run's codes, store them for later captures and
        state it in the run (this run's edges keep the bins in force at its start: placed as they came)."""
        counts = self.stream.code_counts if self.stream is not None else None
        if counts is None:
            return
        table, _why = tdc_placement.predicted_table(calibration.rig_identity(self.identity))
        entries = tdc_rig.online_results(self.identity, self.calibration, counts, table)
        stored_in = None
        for entry in entries:
            if entry["result"] is not None and self.settings.calibration_dir is not None:
                stored_in = tdc_rig.store_tdc_input(self.identity, entry["result"], self.settings.calibration_dir)[1]
        lines = tdc_rig.online_lines(entries, stored_in)
        for line in lines:
            log.info("%s", line)
        self.calibration["tdc_online"] = [{k: v for k, v in e.items() if k != "result"} for e in entries]
        self.calibration["statement"] = list(self.calibration["statement"]) + lines

    # crash safety (docs/analysis.md, "What survives a failure") ----------------------------------------

    def _write_started(self, session):
        """meta.json as the stimuli start, marked interim: a capture killed before it ends leaves a run
        directory that ``hilat report`` reads (from raw.bin) and says was cut short. The end of the run
        replaces it."""
        self.writer.write_json("meta.json", self._meta(session.decoder_counters, interim=True))

    def _write_error(self, e):
        return f"cannot write the run directory {self.run_dir}: {e.strerror or e}"

    def _stop_on_write_error(self, session, e):
        """Disk full (or a file size limit): stop the rig, leave what is on disk as it is (each file
        readable up to its last whole item), and end with the reason as the capture's error."""
        self.error = self._write_error(e)
        if session is not None and session.rig is not None and self.identity is not None:
            session.raw_sink = None   # what still arrives stays in memory, not half on disk
            try:
                session.rig.command_timeout = 2.0
                session.stop()
            except (RigError, TransportError, OSError):
                pass
            try:   # meta.json with the error, if it still fits (the end of the run may not get that far)
                self.writer.write_json("meta.json", self._meta(session.decoder_counters))
            except OSError:
                pass

    # results --------------------------------------------------------------------------------------

    def roles(self):
        """The channel roles of this rig (its IDENTIFY table) and this stimulus's polarity."""
        return channel_roles(self.settings, self.identity)

    @property
    def records_received(self):
        return self.stream.records if self.stream else 0

    def load(self):
        """The run directory just written, as ``reader.Run`` (its edges read on first use)."""
        return load_run(self.run_dir)

    def pairing(self):
        """The built-in kinds per stimulus, recomputed exactly from the run's edges."""
        return self.load().pairing

    def measurements(self):
        """Every kind of this capture, recomputed exactly from the run's edges."""
        return self.load().measurements

    @property
    def deadline_ticks(self):
        """The deadline the pairing uses (``effective_deadline``), the engine's and the host's."""
        return effective_deadline(self.settings)

    @property
    def offset_ticks(self):
        return self.calibration["offset_ticks"] if self.calibration else 0

    @property
    def ts_hz(self):
        """Ticks per second for converting to ns: the calibrated frequency when there is one."""
        if self.calibration:
            return self.calibration["ts_hz"]
        return self.identity.ts_hz if self.identity else 1

    @property
    def samples_per_tick(self):
        """How often the rig samples each input a tick."""
        return getattr(self.identity, "samples_per_tick", 1) or 1

    @property
    def subticks(self):
        """Where the raw edges' times put an input edge in its tick (``analysis.Subticks``): nominal
        bins, or a resolution calibration's centres when one is in force; fixed once the rig identified
        and the calibration is known."""
        if self._subticks is not None:
            return self._subticks
        return subticks_for(self.samples_per_tick, self.identity.n_stimulus if self.identity else 0)

    @property
    def units_per_tick(self):
        return self.subticks.units_per_tick

    @property
    def unit(self):
        """The run's unit (``units.RunUnit``): that of the raw edges' times, samples and values."""
        return units.RunUnit.of(self.ts_hz, self.subticks)
