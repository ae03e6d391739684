"""LiteEth alone in the simulator: the simulated Ethernet link proved without the rig.

A SoC with no CPU: LiteEth's UDP/IP stack (ARP, ICMP: it answers ping) at ETH_RIG_IP behind the same
GMII PHY model and LiteX ``gmii_ethernet`` module as the simulated rig with Ethernet (targets/sim.py),
echoing every datagram sent to ECHO_PORT back to its sender. Run it inside a network namespace
(targets/netns.py): the module makes the TAP interface there.

    python -m targets.sim_liteeth --build
"""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from hilat import shutdown
from litex.build.io import CRG
from litex.soc.integration.builder import Builder
from litex.soc.integration.soc_core import SoCMini
from litex.soc.interconnect import stream
from migen import *

from targets import compiler_cache, netns, sim

ETH_RIG_IP  = "192.168.1.50"
ETH_RIG_MAC = 0x10E2D5000050
ECHO_PORT   = 5800
# Bytes the echo buffers: one whole datagram of the largest payload (1,472) with room.
ECHO_FIFO_DEPTH = 2048


def ip_value(dotted):
    a, b, c, d = (int(x) for x in dotted.split("."))
    return (a << 24) | (b << 16) | (c << 8) | d


class EchoSoC(SoCMini):
    def __init__(self, platform):
        from liteeth.common import eth_udp_user_description
        from liteeth.core import LiteEthUDPIPCore
        from liteeth.phy.gmii import LiteEthPHYGMII

        self.crg = CRG(platform.request("sys_clk"))
        SoCMini.__init__(self, platform, sim.SYS_CLK_FREQ, ident="hilat LiteEth echo")
        self.ethphy = LiteEthPHYGMII(None, platform.request("gmii_eth"), model=True)
        self.ethcore = LiteEthUDPIPCore(self.ethphy, ETH_RIG_MAC, ip_value(ETH_RIG_IP), sim.SYS_CLK_FREQ,
                                        dw=8, with_icmp=True)
        port = self.ethcore.udp.crossbar.get_port(ECHO_PORT, dw=8)
        # A whole datagram is buffered (its parameters with every byte) while its reply waits for ARP.
        self.fifo = fifo = stream.SyncFIFO(eth_udp_user_description(8), ECHO_FIFO_DEPTH, buffered=True)

        # # #

        self.comb += [
            port.source.connect(fifo.sink),
            port.sink.valid.eq(fifo.source.valid),
            fifo.source.ready.eq(port.sink.ready),
            port.sink.last.eq(fifo.source.last),
            port.sink.data.eq(fifo.source.data),
            port.sink.last_be.eq(fifo.source.last),   # one byte a beat: the last beat's byte is valid
            port.sink.src_port.eq(ECHO_PORT),
            port.sink.dst_port.eq(fifo.source.src_port),
            port.sink.ip_address.eq(fifo.source.ip_address),
            port.sink.length.eq(fifo.source.length),
        ]


def build_key():
    h = hashlib.sha256()
    for f in (Path(__file__), Path(sim.__file__)):
        h.update(f.read_bytes())
    import litex
    h.update(str(getattr(litex, "__version__", "")).encode())
    return "liteeth-" + h.hexdigest()[:16]


def _sim_config():
    from litex.build.sim.config import SimConfig

    cfg = SimConfig()
    cfg.add_clocker("sys_clk", freq_hz=sim.SYS_CLK_FREQ)
    cfg.add_module(sim.ETH_MODULE, "gmii_eth", args={"interface": sim.ETH_TAP, "ip": sim.ETH_HOST_IP})
    return cfg


def build(build_root=None, force=False):
    """Build (or reuse) the echo simulator; return its directory."""
    import fcntl

    build_root = Path(build_root or sim.ROOT / "build" / "sim")
    out = build_root / build_key()
    done = out / "done"
    if done.exists() and not force:
        return out
    build_root.mkdir(parents=True, exist_ok=True)
    with open(build_root / f"{out.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done.exists() and not force:
            return out
        sim._log(f"building LiteEth's echo in {out}")
        shutil.rmtree(out, ignore_errors=True)
        os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
        compiler_cache.enable(sim.ROOT)
        soc = EchoSoC(sim.Platform())
        builder = Builder(soc, output_dir=str(out), compile_gateware=False, compile_software=False)
        with sim._quiet():
            builder.build(sim_config=_sim_config(), run=False, interactive=False, opt_level="O3")
        result = sim._run_build(["bash", "build_sim.sh"], out / "gateware")
        if result.returncode != 0:
            (out / "build.log").write_text(result.stdout + result.stderr)
            raise RuntimeError(f"echo simulator build failed, see {out / 'build.log'}")
        done.write_text("")
    return out


class EchoSim:
    """The echo simulator running in this process's network namespace (``netns.enter`` first): on
    ``start`` its TAP interface is up with the host's address."""

    def __init__(self, sim_dir, run_dir):
        self.sim_dir, self.run_dir = Path(sim_dir), Path(run_dir)
        self.process = None

    def start(self, timeout=60):
        self.run_dir.mkdir(parents=True, exist_ok=True)
        link = self.run_dir / "modules"
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(self.sim_dir / "gateware" / "modules")
        (self.run_dir / "sim_config.js").write_text(_sim_config().get_json())
        self.log = open(self.run_dir / "sim.log", "w")
        self.process = subprocess.Popen([str(self.sim_dir / "gateware" / "obj_dir" / "Vsim")], cwd=self.run_dir,
                                        stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT,
                                        **shutdown.child_options())
        try:
            netns.wait_for_interface(sim.ETH_TAP, timeout, self.process)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self):
        if self.process:
            shutdown.stop_child(self.process, timeout=5)
        if getattr(self, "log", None):
            self.log.close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def main(argv=None):
    import argparse

    parser = argparse.ArgumentParser(description="LiteEth's UDP echo in the simulator")
    parser.add_argument("--build", action="store_true")
    args = parser.parse_args(argv)
    if args.build:
        print(json.dumps({"sim_dir": str(build())}))


if __name__ == "__main__":
    t0 = time.monotonic()
    main()
    sim._log(f"{time.monotonic() - t0:.0f} s")
