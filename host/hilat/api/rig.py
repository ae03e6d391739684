"""The rig: capture settings, capture, and the simulated rig: part of ``hilat.api`` (its docstring has the whole)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hilat import calibration, shutdown, values
from hilat.acquisition.capture import Capture
from hilat.acquisition.settings import CaptureSettings, StimulusSettings, plan
from hilat.api.run import Run, load
from hilat.api.stats import SettingsError, _ticks, parse_duration
from hilat.calibration import resolution, tdc_placement, tdc_rig
from hilat.engine import Trigger
from hilat.link import identity
from hilat.link import protocol as p
from hilat.link.session import Session
from hilat.link.transport import DEFAULT_BAUDRATE, Transport
from hilat.simulator import SETTINGS, SimulatorProcess, SimulatorSettingsError, read_dut_log

log = logging.getLogger("hilat")


# ---- the rig --------------------------------------------------------------------------------------------

def capture_settings(ts_hz: float, *, count: int | None = None, duration=None, deadline=None, mode: str = "dither",
                     period="100us", jitter="20us", mean=None, width="10 ticks", burst_count: int = 1,
                     burst_spacing="10 ticks", seed: int = 1, invert: bool = False, glitch: int = 0,
                     roles: dict | None = None, active_low=(), measures=(), no_stimulus: bool = False,
                     also_fire=(), on_rig: bool = False, raw: bool | None = None, interval_shift: int = 24,
                     outliers: dict | None = None, trigger: tuple | None = None, trigger_on_late: bool = False,
                     trigger_width=None, label: str = "", out_dir="runs", progress: bool = False,
                     default_count: int = 2000, tdc_online: bool = False):
    """``settings.CaptureSettings`` from typed settings; durations in seconds or with a unit
    (``parse_duration``), ``trigger`` = (response "isr"/"task", time). Raises ValueError on a
    combination that cannot run."""
    if count is not None and (not isinstance(count, int) or count <= 0):
        raise ValueError(f"count must be a whole number > 0, got {count!r}")
    values.stimulus_mode(mode)
    period_t = _ticks(period, ts_hz)
    probability = 0
    if mode == "random":
        if mean is None:
            raise ValueError("mode random needs mean (the mean interval)")
        mean_t = _ticks(mean, ts_hz)
        if mean_t <= period_t:
            raise ValueError("mean must be longer than period (the hold-off)")
        # interval = hold-off + geometric(p) failures: mean = P + (1-p)/p  =>  p = 1/(mean - P + 1)
        probability = min(int(round(2**32 / (mean_t - period_t + 1))), 2**32 - 1)
    if no_stimulus and not measures:
        raise ValueError("no_stimulus measures nothing by itself: give at least one measure")
    if raw and not on_rig:
        raise ValueError("raw goes with on_rig (without it a capture streams the raw edges anyway)")
    if (trigger_on_late or trigger_width is not None) and trigger is None:
        raise ValueError("trigger_on_late and trigger_width go with trigger")
    stim = StimulusSettings(mode=mode, period=period_t, jitter=_ticks(jitter, ts_hz) if mode == "dither" else 0,
                            width=_ticks(width, ts_hz), probability=probability, burst_count=burst_count,
                            burst_spacing=_ticks(burst_spacing, ts_hz), seed=seed, invert=invert)
    trig = None
    if trigger is not None:
        response, threshold = trigger
        trig = Trigger(threshold=_ticks(threshold, ts_hz), response=response,
                       width=_ticks(trigger_width if trigger_width is not None else "1us", ts_hz),
                       on_late=trigger_on_late)
    return CaptureSettings(on_rig=on_rig, raw=bool(raw) or not on_rig, engine_interval_shift=interval_shift,
                           outlier_thresholds={k: _ticks(t, ts_hz) for k, t in (outliers or {}).items()},
                           trigger=trig, roles=dict(roles or {}), active_low=list(active_low),
                           measures=list(measures), no_stimulus=no_stimulus, also_fire=list(also_fire),
                           count=count if count is not None else (None if duration is not None else default_count),
                           duration_ticks=_ticks(duration, ts_hz) if duration is not None else None,
                           deadline_ticks=_ticks(deadline, ts_hz) if deadline is not None else None,
                           glitch=glitch, label=label, out_dir=Path(out_dir), progress=progress, stimulus=stim,
                           tdc_online=tdc_online)


class CaptureError(RuntimeError):
    """A capture that stopped on an error; ``run`` is what it captured (kept on disk)."""

    def __init__(self, message: str, run: Run | None):
        super().__init__(message)
        self.run = run


@dataclass
class Calibration:
    """What a ``Rig.calibrate_*`` measured: ``part`` ("loopback", "clock", "resolution", "tdc": one TDC
    input's bins), ``result``
    (the stored measurement, as the calibration file holds it), ``rig_identity`` (the rig it belongs
    to) and ``stored`` (its file; None when not stored). ``text()`` is what ``hilat calibrate`` prints,
    ``to_json()`` what it prints with --json."""

    part: str
    result: dict[str, Any]
    rig_identity: dict[str, Any]
    stored: Path | None
    url: str
    ts_hz: float             # the rig's nominal tick rate (IDENTIFY), which the texts convert with
    analysis: str = ""       # clock against a 1PPS: its pulses (used, missing, extra), as text

    def text(self) -> str:
        if self.part == "loopback":
            return calibration.loopback_text(self.result, self.url, self.ts_hz, self.stored)
        if self.part == "resolution":
            return calibration.resolution_text(self.result, self.url, self.ts_hz, self.stored)
        if self.part == "tdc":
            return calibration.tdc_text(self.result, self.url) + "\n" + calibration.stored_text(self.stored)
        clock = calibration.clock_text(self.result, self.ts_hz, self.stored)
        return f"{self.analysis}\n{clock}" if self.analysis else clock

    def to_json(self) -> dict[str, Any]:
        return {"rig_identity": self.rig_identity, self.part: self.result,
                "stored": str(self.stored) if self.stored else None}


class Rig:
    """A rig by URL (``/dev/ttyUSB0``, ``socket://HOST:PORT``, ``rfc2217://HOST:PORT``, an Ethernet rig's
    ``udp://HOST[:PORT]``: its raw edges then come as a datagram stream, docs/ethernet.md), as a context
    manager: entering says HELLO and reads its identity; each ``capture`` opens the link for its run.

    ``calibration_dir``: where this rig's calibration is looked up (default ``$HILAT_CALIBRATION_DIR``
    or the user's config dir); ``calibrate=False`` applies none."""

    def __init__(self, url: str, *, baud: int | None = None, calibration_dir: str | Path | None = None,
                 calibrate: bool = True):
        self.url = url
        self.baud = baud
        self.calibration_dir = calibration_dir
        self.calibrate = calibrate
        self._ident = None
        self._status = None
        self._engine = None

    def _transport(self):
        return Transport(self.url, baudrate=self.baud or DEFAULT_BAUDRATE)

    def _session(self):
        return Session(self.url, transport=self._transport())

    def open(self) -> Rig:
        with self._session() as session:
            self._ident = session.identity
            self._status = session.ask_status()
            self._engine = session.engine_stats() if self._ident.capabilities & p.CAP_ENGINE else None
        return self

    def close(self) -> None:
        pass

    def __enter__(self) -> Rig:
        return self.open()

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def identity(self) -> dict[str, Any]:
        """The rig's facts, as ``hilat info --json`` prints them."""

        if self._ident is None:
            self.open()
        resolution = calibration.for_rig(self._ident, self._calibration_dir())
        return identity.describe(self._ident, self._status, self.url, resolution, self._engine)

    @property
    def ts_hz(self) -> float:
        if self._ident is None:
            self.open()
        return float(self._ident.ts_hz)

    def _calibration_dir(self):
        return calibration.resolve_dir(self.calibration_dir) if self.calibrate else None

    # ---- calibration (hilat calibrate; docs/calibration.md) ----

    def calibrate_loopback(self, *, count: int = 1000, period="100us", jitter="25us", width="1us", seed: int = 1,
                           stimulus_channel: int | None = None, channel: int | None = None,
                           store: bool = True) -> Calibration:
        """The rig's own stimulus -> capture offset and jitter, from ``count`` dithered pulses (intervals
        uniform in period +- jitter) through a jumper from ``stimulus_channel`` (default: the rig's first
        stimulus output) to ``channel`` (default: its SPARE input). Stored for this rig unless ``store``
        is False; later captures subtract the offset. Raises ``hilat.calibration.CalibrationError``."""
        with self._session() as session:
            ident = self._ident = session.identity
            ts = ident.ts_hz
            stimulus = {"mode": "dither", "count": count, "period_ticks": _ticks(period, ts),
                        "jitter_ticks": _ticks(jitter, ts), "width_ticks": _ticks(width, ts), "seed": seed}
            if stimulus_channel is None:
                stimulus_channel = calibration.role_channel(ident, "stimulus")
            if channel is None:
                channel = calibration.role_channel(ident, calibration.CALIBRATION_ROLE)
            log.info("loopback: %d pulses from STIM%d, watching channel %d", count, stimulus_channel, channel)
            # A resolution calibration in force places the copies' edges as captures will.
            in_force = calibration.for_rig(ident, self._calibration_dir())
            result = calibration.run_loopback(
                session, count, stimulus["period_ticks"], stimulus["jitter_ticks"], stimulus["width_ticks"],
                stimulus_channel, channel, seed, progress=calibration.ProgressLog("loopback"),
                resolution=in_force.get("resolution"), placement=tdc_rig.placement_for(ident, in_force))
            loop = calibration.loopback_calibration(result, ts, stimulus_channel, channel, stimulus, self.url)
        return self._stored(ident, "loopback", loop, store)

    def calibrate_clock(self, against: str, *, duration=None, channel: int | None = None, pps_period="1s",
                        tries: int = 8, store: bool = True) -> Calibration:
        """The error of the rig's tick clock in ppm, ``against`` "host" (the host's monotonic clock over
        TIME_REQ round trips, ``tries`` at each end; default ``duration`` 10 s) or "pps" (a 1PPS of nominal
        period ``pps_period`` on ``channel``, default the SPARE input; default ``duration`` 60 s of rig
        time). Stored unless ``store`` is False; later captures convert with the calibrated rate. Raises
        ``hilat.calibration.CalibrationError``, ``ImplausibleClock`` (its ``result`` has the numbers) for
        an error no oscillator has; after a 1PPS analysis the error's ``analysis`` is its text."""
        if against not in ("host", "pps"):
            raise SettingsError(f"calibrate_clock against {against!r}: host or pps")
        with self._session() as session:
            ident = self._ident = session.identity
            ts = ident.ts_hz
            duration_ticks = _ticks(duration if duration is not None else ("10s" if against == "host" else "60s"), ts)
            if against == "host":
                log.info("clock against the host: %g s of TIME_REQ round trips", duration_ticks / ts)
                clock = calibration.host_clock_estimate(session.rig.now, ts, duration_ticks / ts, tries=tries,
                                                        progress=calibration.ProgressLog("clock"))
                clock["url"] = self.url
                analysis = ""
            else:
                if channel is None:
                    channel = calibration.role_channel(ident, calibration.CALIBRATION_ROLE)
                period_ticks = _ticks(pps_period, ts)
                period_s = period_ticks / ts
                log.info("clock against a 1PPS on channel %d: %g s of rig time, nominal period %g s",
                         channel, duration_ticks / ts, period_s)
                ticks = calibration.run_pps(session, channel, duration_ticks, progress=calibration.ProgressLog("1PPS"))
                pps = calibration.analyse_pps(ticks, period_ticks)
                analysis = calibration.pps_text(pps, len(ticks), channel, self.url)
                try:
                    clock = calibration.pps_calibration(pps, ts, period_s, channel, self.url, len(ticks))
                except calibration.CalibrationError as e:
                    e.analysis = analysis   # which pulses were used, missing or extra: why it was refused
                    raise
        return self._stored(ident, "clock", clock, store, analysis)

    def calibrate_resolution(self, *, edges: int | None = None, channel: int | str | None = None,
                             precision_ps: float | None = None, tap_table: str | Path | None = None,
                             store: bool = True) -> Calibration:
        """The widths of the sub-tick bins by code density, from ``edges`` edges (default 20000) on
        ``channel`` (a number or a name; default the SPARE input) of a source unrelated to the rig's clock
        (docs/subtick.md). On a rig with a carry-chain TDC (docs/tdc.md) its 256 bins on that TDC input,
        the tap table's predicted bins beside them (``tap_table``: a file; default the board's), default
        100000 edges, or with ``precision_ps`` (each bin's width sigma, ps) as many as the widest
        predicted bin needs; stored per input. Stored unless ``store`` is False; later captures place
        input edges at the bins' centres. Raises ``hilat.calibration.CalibrationError``."""

        with self._session() as session:
            ident = self._ident = session.identity
            if channel is None:
                channel = calibration.role_channel(ident, calibration.CALIBRATION_ROLE)
            elif isinstance(channel, str):
                channel = calibration.input_channel(ident, channel)
            if ident.tdc_inputs:
                return self._calibrate_tdc(session, ident, channel, edges, precision_ps, tap_table, store)
            edges = edges or 20000
            log.info("resolution: %d edges on channel %d", edges, channel)
            fractions = resolution.run_resolution(session, channel, edges,
                                                  progress=calibration.ProgressLog("resolution"))
            result = resolution.resolution_calibration(fractions, ident, ident.ts_hz, channel, self.url)
        return self._stored(ident, "resolution", result, store)

    def _calibrate_tdc(self, session, ident, channel, edges, precision_ps, tap_table, store):
        identity = calibration.rig_identity(ident)
        table, why = tdc_placement.predicted_table(identity, Path(tap_table) if tap_table else None)
        if tap_table and table is None:
            raise calibration.CalibrationError(why)
        precision_s = precision_ps * 1e-12 if precision_ps is not None else None
        if edges is None:
            edges = tdc_rig.TDC_DEFAULT_EDGES
            if precision_s is not None:
                if table is None:
                    raise calibration.CalibrationError(f"--precision needs the predicted bins ({why}): give --edges")
                edges = tdc_rig.edges_for(table, precision_s)
        log.info("TDC resolution: %d edges on channel %d%s", edges, channel,
                 "" if table is None else f" ({tdc_rig.precision_text(table, edges, precision_s)})")
        codes = tdc_rig.run_tdc_resolution(session, channel, edges, progress=calibration.ProgressLog("resolution"))
        result = tdc_rig.tdc_resolution_calibration(codes, ident, channel, self.url, table, precision_s)
        directory = calibration.resolve_dir(self.calibration_dir) if store else None
        identity, path = tdc_rig.store_tdc_input(ident, result, directory)
        return Calibration("tdc", result, identity, path, self.url, ident.ts_hz)

    def _stored(self, ident, part, result, store, analysis=""):
        """The calibration ``part`` of ``result``, stored in this rig's calibration directory when ``store``."""
        directory = calibration.resolve_dir(self.calibration_dir) if store else None
        identity, path = calibration.store_result(ident, part, result, directory)
        return Calibration(part, result, identity, path, self.url, ident.ts_hz, analysis)

    def capture(self, *, hlog_interval="10s", extra_meta: dict | None = None, **settings) -> Run:
        """Run stimuli and capture (``capture_settings`` names the settings), write the run directory
        under ``out_dir`` and return it read back. Raises ``CaptureError`` (with the partial run) when
        the capture stopped on an error, ``KeyboardInterrupt`` when interrupted (the run is kept)."""
        capture = self.capture_raw(hlog_interval=hlog_interval, extra_meta=extra_meta, **settings)
        run = load(capture.run_dir) if capture.run_dir else None
        if capture.error:
            raise CaptureError(f"{capture.error} (what was captured is kept in {capture.run_dir})", run)
        if capture.interrupted:
            raise KeyboardInterrupt(f"capture interrupted; what was captured is kept in {capture.run_dir}")
        return run

    def capture_raw(self, *, hlog_interval="10s", extra_meta=None, no_calibration_reason=None, **settings):
        """The ``capture.Capture`` itself (the CLI prints its report and keeps its exit codes)."""

        with self._session() as session:
            self._ident = session.identity
            try:
                cs = capture_settings(session.identity.ts_hz, **settings)
                plan(cs, session.identity)
            except SettingsError:
                raise
            except ValueError as e:
                raise SettingsError(str(e)) from None
            if not self.calibrate:
                cs.no_calibration_reason = no_calibration_reason or "calibrate=False: none applied"
            else:
                cs.calibration_dir = self._calibration_dir()
            cs.hlog_interval_s = parse_duration(hlog_interval) if hlog_interval not in (0, "0", None) else 0.0
            return Capture(None, cs, extra_meta, session=session).run()

    def __repr__(self):
        return f"<Rig {self.url}>"


# ---- the simulated rig --------------------------------------------------------------------------------

class Simulation:
    """The simulated rig and DUT (Verilator), started by ``simulate``: ``url`` (and ``udp_url`` with
    Ethernet), ``rig()``, and what the DUT model injected (``injected()``, from its log)."""

    def __init__(self, process):
        self._process = process
        info = process.info
        self.url: str = info["url"]
        self.udp_url: str | None = info.get("udp_url")
        self.dut_log = Path(info["dut_log"])
        self.run_dir = Path(info["run_dir"])
        self.console = Path(info["console"]) if info.get("console") else None
        self.pid: int = info["pid"]
        self.sim_dir = Path(info["sim_dir"])

    def rig(self, **kwargs) -> Rig:
        return Rig(self.udp_url or self.url, **kwargs)

    def injected(self) -> list:
        """The latencies the DUT model injected so far (``hilat.simulator.read_dut_log`` rows)."""
        return read_dut_log(self.dut_log)

    def wait(self) -> int:
        """Until the simulator stops (an interrupt, or it ends by itself)."""
        return self._process.wait()


class simulate:
    """``with hilat.simulate() as sim:`` starts the simulated rig and DUT model (built on first use,
    cached), stops it on exit. It runs from a clone of the repository only (``hilat.simulator``).
    ``dut``: DUT model settings ({"isr_base": 80, ...}); ``on_rig``: the build with the measurement
    engine; ``dut_model``/``dut_top``: a DUT model of your own; ``workdir``: where the simulator runs
    and its DUT log goes (default: a new temporary directory). Every other option of ``hilat sim`` by
    its ``hilat.simulator.SETTINGS`` name: ``samples_per_tick``, ``dut_cpu``, ``dut_firmware``,
    ``dut_cpu_clk_hz``, ``edge_clock_high_ps``, ``async_source_cycles``, ``ethernet``, ``trace``,
    ``port``, ``dut_log``, ``pps_log``, the calibration sources (``loopback``, ``pps_period``, ...).
    Refused settings raise ``SettingsError``; no simulated rig here, ``SimulatorUnavailable``."""

    def __init__(self, *, dut: dict | None = None, on_rig: bool = False, dut_model: str | Path | None = None,
                 dut_top: str = "hilat_dut_model", workdir: str | Path | None = None, **settings):
        unknown = set(settings) - set(SETTINGS) - {"run_dir"}   # run_dir: the launcher's name of workdir
        if unknown:
            raise SettingsError(f"simulate(): unknown settings {', '.join(sorted(unknown))}")
        workdir = workdir or settings.pop("run_dir", None)
        self.settings = {**settings, "dut": dict(dut or {}), "on_rig": on_rig, "dut_top": dut_top,
                         "dut_model": str(Path(dut_model).resolve()) if dut_model else None,
                         "run_dir": str(Path(workdir).resolve()) if workdir else None}
        for path in ("dut_log", "pps_log"):
            if self.settings.get(path):
                self.settings[path] = str(Path(self.settings[path]).resolve())
        self._process = None

    def __enter__(self) -> Simulation:
        # While it runs (and builds), SIGTERM and SIGHUP, unless the program handles them itself,
        # raise hilat.shutdown.Terminated, a KeyboardInterrupt, so that leaving the with block stops
        # the simulator; were the program killed outright, the kernel stops it (hilat.shutdown).
        self._signals = shutdown.signals_stop()
        self._signals.__enter__()
        try:
            self._process = SimulatorProcess(self.settings).start()
        except SimulatorSettingsError as e:
            self._process = None
            self._signals.__exit__(None, None, None)
            raise SettingsError(str(e)) from None
        except BaseException:
            self._process = None
            self._signals.__exit__(None, None, None)
            raise
        return Simulation(self._process)

    def __exit__(self, *exc) -> None:
        try:
            if self._process is not None:
                self._process.stop()
                self._process = None
        finally:
            signals, self._signals = getattr(self, "_signals", None), None
            if signals is not None:
                signals.__exit__(None, None, None)
