"""The one launcher of the simulated rig: every option (the engine on the rig, sub-tick sampling, CPU
DUTs and their firmware images, the calibration sources, Ethernet) checked, built and started here.

hilat reaches it only as a subprocess (host/hilat/simulator.py has the interface):

    python -m targets.simrig '{"samples_per_tick": 4, "dut": {"isr_base": 80}}'

prints one JSON line when the rig listens (url, udp_url, dut_log, run_dir, console, pid, sim_dir), or
``{"error": ..., "usage": true}`` and exits 2 for settings it refuses; then it runs until its stdin
closes or it is signalled, and stops the simulator. Code of the checkout (tests, experiments,
benchmarks) calls ``check``, ``start`` or ``running`` in its own process.
"""

import contextlib
import json
import select
import sys
import tempfile
from pathlib import Path

from hilat import shutdown
from hilat.simulator import SETTINGS


class SettingsError(ValueError):
    """Settings the simulated rig cannot take: refused before a build that may take minutes."""


def _sim():
    from targets import sim  # LiteX, Migen: the gateware extra
    return sim


def calibration_sources(settings):
    """The DUT model's settings of the calibration sources on SPARE (``sim.calibration_plusargs``), from
    the settings named as hilat sim's options; ``pps_period`` is a time ("1ms") or whole ticks."""
    from hilat.values import TICKS, DurationError, parse_duration

    sim = _sim()
    s = {**SETTINGS, **settings}
    period = s["pps_period"]
    if period is not None and not isinstance(period, int):
        try:
            period = parse_duration(str(period), default_unit=TICKS).ticks(sim.TS_CLK_FREQ)
        except DurationError as e:
            raise SettingsError(f"--pps-period: {e}") from None
    try:
        return sim.calibration_plusargs(s["loopback"], s["loopback_jitter"], period, s["pps_ppm"], s["pps_jitter"],
                                        s["pps_missing_every"], s["pps_missing_run"], s["pps_extra_every"])
    except ValueError as e:
        raise SettingsError(str(e)) from None


def check(settings):
    """The settings completed with their defaults, or SettingsError naming what is wrong (as hilat sim's
    options)."""
    sim = _sim()
    unknown = set(settings) - set(SETTINGS)
    if unknown:
        raise SettingsError(f"unknown simulated-rig settings: {', '.join(sorted(unknown))}")
    s = {**SETTINGS, **settings}
    cpu = s["dut_cpu"]
    if cpu is not None:
        from targets.dut.cpu_soc import CPUS

        if cpu not in CPUS:
            raise SettingsError(f"--dut-cpu {cpu}: one of model, {', '.join(CPUS)}")
    if s["dut_firmware"] is not None:
        from targets.dut.cpu_soc import FIRMWARE_IMAGES

        if s["dut_firmware"] not in FIRMWARE_IMAGES:
            raise SettingsError(f"--dut-firmware {s['dut_firmware']}: one of {', '.join(FIRMWARE_IMAGES)}")
    try:
        sim.check_clock_settings(s["samples_per_tick"], s["edge_clock_high_ps"], s["async_source_cycles"],
                                 bool(cpu), s["dut_cpu_clk_hz"])
    except ValueError as e:
        raise SettingsError(str(e)) from None
    if cpu and s["samples_per_tick"] != 1:
        raise SettingsError("--dut-cpu goes with a rig sampling once a tick (--samples-per-tick 1)")
    if s["tdc"] and (cpu or s["samples_per_tick"] != 1):
        raise SettingsError("--tdc goes with the Verilog DUT model and one sample a tick (--samples-per-tick 1)")
    if not s["tdc"] and any(s[k] is not None for k in ("tdc_source_ticks", "edge_phase_seed", "edge_phase_log")):
        raise SettingsError("--tdc-source, --edge-phase-seed and --edge-phase-log go with --tdc")
    if s["tdc_source_ticks"] is not None and s["tdc_source_ticks"] < 3:
        raise SettingsError(f"--tdc-source {s['tdc_source_ticks']}: at least 3 ticks (the line settles between "
                            "changes)")
    if cpu and s["dut_model"]:
        raise SettingsError("--dut-cpu and --dut-model both choose the DUT: give one")
    if s["dut_firmware"] and not cpu:
        raise SettingsError("--dut-firmware goes with --dut-cpu (the DUT model runs no firmware)")
    if s["ethernet"]:
        from targets import netns

        reason = None if netns.isolated() else netns.unavailable_reason()
        if reason:
            raise SettingsError(f"--ethernet runs the simulated rig in a network namespace of its own: {reason}")
    s["dut"] = {**{k: str(v) for k, v in dict(s["dut"] or {}).items()}, **calibration_sources(s)}
    return s


def start(settings):
    """Build (cached) and start the simulated rig of ``settings`` (SETTINGS' names); returns the running
    ``sim.SimulatedRig`` (stop it, or use it as a context manager) with ``dut_log`` and ``console`` set.
    ``--ethernet`` moves this process into a network namespace of its own first (targets/netns.py)."""
    s = check(settings)
    sim = _sim()
    sim_dir = sim.build(dut_model=s["dut_model"] or sim.DEFAULT_DUT, dut_top=s["dut_top"], with_engine=s["on_rig"],
                        samples_per_tick=s["samples_per_tick"], dut_cpu=s["dut_cpu"], trace=s["trace"],
                        ethernet=s["ethernet"], tdc=s["tdc"])
    if s["ethernet"]:
        from targets import netns

        if not netns.isolated():
            netns.enter()
    run_dir = Path(s["run_dir"]) if s["run_dir"] else Path(tempfile.mkdtemp(prefix="hilat-sim-"))
    dut_log = Path(s["dut_log"]) if s["dut_log"] else run_dir / "dut_injected.csv"
    dut_args = dict(s["dut"])
    console = None
    if s["dut_cpu"]:   # the CPU DUT's firmware lines (docs/dut-cpus-design.md)
        console = run_dir / "dut_console.txt"
        dut_args["console"] = str(console)
    try:
        rig = sim.SimulatedRig(sim_dir, run_dir, port=s["port"], dut_args=dut_args, dut_log=dut_log,
                               pps_log=s["pps_log"], edge_clock_high_ps=s["edge_clock_high_ps"],
                               async_source_cycles=s["async_source_cycles"], dut_cpu_clk_hz=s["dut_cpu_clk_hz"],
                               dut_firmware=s["dut_firmware"], edge_phase_seed=s["edge_phase_seed"],
                               edge_phase_log=s["edge_phase_log"], tdc_source_ticks=s["tdc_source_ticks"])
    except ValueError as e:
        raise SettingsError(str(e)) from None
    rig.console = console
    rig.start()
    return rig


@contextlib.contextmanager
def running(settings):
    """``with running(settings) as rig:``: ``start``, stopped when the block ends (the benchmarks')."""
    rig = start(settings)
    try:
        yield rig
    finally:
        rig.stop()


def describe(rig):
    """The launcher's line: what a client needs of the running rig."""
    return {"url": rig.url, "udp_url": rig.udp_url if rig.ethernet else None, "dut_log": str(rig.dut_log),
            "run_dir": str(rig.run_dir), "console": str(rig.console) if rig.console else None,
            "pid": rig.process.pid, "sim_dir": str(rig.sim_dir)}


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m targets.simrig SETTINGS_JSON (host/hilat/simulator.py)", file=sys.stderr)
        return 2
    try:
        settings = json.loads(argv[0])
        if not isinstance(settings, dict):
            raise ValueError("not a JSON object")
    except ValueError as e:
        print(json.dumps({"error": f"the launcher's settings: {e}", "usage": True}), flush=True)
        return 2
    try:
        # SIGTERM and SIGHUP as Ctrl-C: leaving `with` stops the simulator (hilat.shutdown).
        with shutdown.signals_stop():
            try:
                rig = start(settings)
            except SettingsError as e:
                print(json.dumps({"error": str(e), "usage": True}), flush=True)
                return 2
            except ImportError as e:
                from hilat.extras import missing_text

                print(json.dumps({"error": missing_text("the simulated rig", e.name or str(e), "gateware")}),
                      flush=True)
                return 1
            except RuntimeError as e:
                print(json.dumps({"error": str(e)}), flush=True)
                return 1
            try:
                print(json.dumps(describe(rig)), flush=True)
                # Until the client closes stdin (or exits), or the simulator ends by itself.
                while rig.process.poll() is None:
                    if select.select([sys.stdin], [], [], 0.5)[0] and not sys.stdin.read(1):
                        break
            finally:
                rig.stop()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
