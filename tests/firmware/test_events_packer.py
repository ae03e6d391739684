"""The firmware's EVENTS packer (firmware/main.c's drain_events) on a fake CSR bus
(tests/firmware/events_packer.c), against the Ethernet SoC's generated headers (eth_headers.py:
seconds, no gateware build) as they are, and with the TDC's constants and record as the contract
of docs/tdc.md gives them: HILAT_TDC_INPUTS, HILAT_TDC_TAPS, HILAT_FRACTION_BITS = 8 x the TDC
inputs, and, as the fraction no longer fits capture_ev_info, a capture_ev_fraction CSR (32 or 64
bits) read before the pop. The rig's bytes are decoded by the host (hilat.link.protocol): every
record's timestamp, masks and fraction as the capture gave them, IDENTIFY's TDC fields as soc.h's.
"""

import random
import re
import shutil
import subprocess
from pathlib import Path

import eth_headers
import pytest
from hilat.link import protocol as p

HERE = Path(__file__).resolve().parent
FIRMWARE = HERE.parents[1] / "firmware"

# Past every CSR of the capture's bank in the generated csr.h (its last is far below).
FRACTION_ADDR = 0x7F0


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    return eth_headers.build(tmp_path_factory.mktemp("eth_headers"))


def tdc_headers(generated, out, tdc_inputs, fraction_words):
    """``generated`` with a TDC on ``tdc_inputs`` inputs: the fraction leaves ev_info for a
    capture_ev_fraction CSR of ``fraction_words`` 32-bit words (as LiteX generates a CSRStatus)."""
    shutil.copytree(generated, out)
    csr, soc = out / "generated" / "csr.h", out / "generated" / "soc.h"
    text = re.sub(r"#define CSR_CAPTURE_EV_INFO_FRACTION_(OFFSET|SIZE) \d+\n", "", csr.read_text())
    words = [f"csr_read_simple((CSR_BASE + {FRACTION_ADDR + 4 * w:#x}L))" for w in range(fraction_words)]
    if fraction_words == 1:
        reader = f"static inline uint32_t capture_ev_fraction_read(void) {{\n\treturn {words[0]};\n}}\n"
    else:
        reader = (f"static inline uint64_t capture_ev_fraction_read(void) {{\n\tuint64_t r = {words[0]};\n"
                  f"\tr <<= 32;\n\tr |= {words[1]};\n\treturn r;\n}}\n")
    text = text.replace("#define CSR_CAPTURE_EV_POP_SIZE 1\n",
                        f"#define CSR_CAPTURE_EV_POP_SIZE 1\n#define CSR_CAPTURE_EV_FRACTION_ADDR (CSR_BASE + "
                        f"{FRACTION_ADDR:#x}L)\n#define CSR_CAPTURE_EV_FRACTION_SIZE {fraction_words}\n", 1)
    text = text.replace("#endif /* LITEX_CSR_ACCESS_FUNCTIONS */", reader + "#endif /* LITEX_CSR_ACCESS_FUNCTIONS */")
    assert "CSR_CAPTURE_EV_FRACTION_ADDR" in text and "INFO_FRACTION" not in text
    csr.write_text(text)
    text = re.sub(r"#define HILAT_TDC_(INPUTS|TAPS) 0\n", "", soc.read_text()).replace(
        "#define HILAT_FRACTION_BITS 0\n",
        f"#define HILAT_FRACTION_BITS {8 * tdc_inputs}\n#define HILAT_TDC_INPUTS {tdc_inputs}\n"
        "#define HILAT_TDC_TAPS 256\n")
    assert f"HILAT_TDC_INPUTS {tdc_inputs}" in text
    soc.write_text(text)
    return out


def run_packer(include, tmp, records):
    """The rig's UART bytes for a HELLO, then ``records`` (timestamp, info word, fraction) served by
    the fake capture FIFO."""
    exe = tmp / "events_packer"
    built = subprocess.run(["cc", "-std=gnu99", "-O1", "-Wall", "-Wextra", "-Werror", "-Wno-unused-function",
                            f"-I{HERE / 'host_include'}", f"-I{include}", f"-I{FIRMWARE}",
                            str(HERE / "events_packer.c"), str(FIRMWARE / "protocol.c"), "-o", str(exe)],
                           capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    lines = "".join(f"{t} {info} {fraction}\n" for t, info, fraction in records)
    out = subprocess.run([str(exe), p.Hello(p.PROTOCOL_VERSION).encode(0).hex()], input=lines, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    decoder = p.FrameDecoder(expected_seq=0)
    frames = decoder.feed(bytes.fromhex(out.stdout.strip()))
    assert decoder.corrupt == decoder.malformed == decoder.lost == 0
    return frames


def capture_records(n_channels, fraction_bits, count, seed):
    """Random records of a 10-channel rig (2 stimulus + 8 inputs): (timestamp, channels, levels,
    fraction) and the ev_info word of each (channels, levels, kind 0, and the fraction when it fits)."""
    rng = random.Random(seed)
    t, out = rng.getrandbits(63), []
    for _ in range(count):
        t += rng.choice([0, 1, 3, 200, 20_000, 1 << 33])
        channels, levels = rng.getrandbits(n_channels) or 4, rng.getrandbits(n_channels)
        fraction = rng.choice([0, (1 << fraction_bits) - 1, rng.getrandbits(fraction_bits)]) if fraction_bits else 0
        out.append((t, channels, levels, fraction))
    return out


@pytest.mark.parametrize("tdc_inputs,fraction_words", [(0, 0), (8, 2), (4, 1)])
def test_the_packer_sends_every_record_with_its_fraction(generated, tmp_path, tdc_inputs, fraction_words):
    include = tdc_headers(generated, tmp_path / "include", tdc_inputs, fraction_words) if tdc_inputs else generated
    n = 10   # eth_headers' SoC: 2 stimulus outputs, 8 inputs
    fraction_bits = 8 * tdc_inputs
    records = capture_records(n, fraction_bits, 300, seed=tdc_inputs)
    # ev_info: channels, levels, kind (0); without a TDC the build's 8-bit FRACTION field holds junk
    # the firmware must not send (HILAT_FRACTION_BITS 0).
    served = [(t, ch | lv << n | (0 if tdc_inputs else 0xA5) << (2 * n + 1), f) for t, ch, lv, f in records]
    frames = run_packer(include, tmp_path, served)
    ident = frames[0].msg
    assert isinstance(ident, p.Identify)
    assert (ident.tdc_inputs, ident.tdc_taps) == (tdc_inputs, 256 if tdc_inputs else 0)
    events = [f.msg for f in frames[1:]]
    assert events and all(isinstance(e, p.Events) and e.fraction_bytes == ident.fraction_bytes
                          for e in events)
    got = [r if len(r) == 4 else (*r, 0) for e in events for r in e.records]
    assert got == records
    assert len(events) > 1   # records across frames
