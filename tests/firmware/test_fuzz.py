"""Short runs of the firmware fuzzers (the long ones: scripts/fuzz-firmware.sh, >= 10^7 executions),
under libFuzzer + ASan + UBSan with the oracles of their harnesses:

- fuzz_command_parser.c: firmware/protocol.c's parser, framing and COBS;
- fuzz_firmware_commands.c: firmware/main.c's whole command path on a fake CSR bus, against the
  simulated SoC's generated csr.h / soc.h, without and with the measurement engine, with its TDCs
  (IDENTIFY's TDC fields, the codes' CSR), and against those of a SoC with the engine and the Ethernet
  link (eth_headers.py: a Colorlight i9's firmware);

and proof that the oracles fail on a firmware that misreads a field, trusts a channel number, runs a
repeated command twice or mistakes the Ethernet commands on a rig without Ethernet."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import fuzz_seeds
import pytest

pytestmark = pytest.mark.slow   # fuzzing runs and fuzzer builds

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).parent
FIRMWARE = ROOT / "firmware"
# Each short run's length. 10 s reach the edges 20 s do (measured: parser 120, commands 289, with the
# engine 359-360; 20 s add only hit-count features); depth is scripts/fuzz-firmware.sh's.
SECONDS = int(os.environ.get("HILAT_FUZZ_SECONDS", "10"))


def build(tmp, harness, firmware_dir=FIRMWARE, generated=None):
    clang = shutil.which("clang")
    assert clang, "clang not found: run make setup (Debian packages clang, libclang-rt-14-dev)"
    exe = tmp / harness.stem
    includes = [f"-I{firmware_dir}"]
    if generated is not None:  # the firmware's own headers and LiteX's generated ones, host stubs first
        includes = [f"-I{HERE / 'host_include'}", f"-I{generated}", *includes]
    subprocess.run([clang, "-g", "-O1", "-std=gnu99", "-Wall", "-Wextra", "-Werror", "-Wno-unused-function",
                    *includes, "-fsanitize=fuzzer,address,undefined", "-fno-sanitize-recover=all", str(harness),
                    str(firmware_dir / "protocol.c"), "-o", str(exe)], check=True, capture_output=True, text=True)
    return exe


def fuzz(exe, tmp, *limits):
    corpus = tmp / "corpus"
    corpus.mkdir(exist_ok=True)
    assert fuzz_seeds.main(tmp / "seeds", commands=exe.name == "fuzz_firmware_commands") > 50
    return subprocess.run([str(exe), *limits, "-max_len=1100", "-print_final_stats=1", f"-artifact_prefix={tmp}/",
                           str(corpus), str(tmp / "seeds")], capture_output=True, text=True, timeout=SECONDS + 120)


def assert_clean(result, tmp, min_executions):
    log = result.stderr
    assert result.returncode == 0, "\n".join(line for line in log.splitlines()
                                             if re.search(r"ERROR|runtime error|SUMMARY|Test unit", line))
    executions = int(re.search(r"stat::number_of_executed_units: *(\d+)", log).group(1))
    assert executions > min_executions, f"only {executions} executions in {SECONDS} s"
    assert not list(tmp.glob("crash-*")) and not list(tmp.glob("leak-*"))


def mutant_firmware(tmp, edits):
    """A copy of firmware/ with each (correct, wrong) text replaced."""
    target = tmp / "firmware"
    shutil.copytree(FIRMWARE, target)
    for name, correct, wrong in edits:
        source = (target / name).read_text()
        assert correct in source, (name, correct)
        (target / name).write_text(source.replace(correct, wrong))
    return target


@pytest.fixture(scope="module")
def generated(sim_dir):
    return sim_dir / "software" / "include"


@pytest.fixture(scope="module")
def generated_with_engine():
    """csr.h / soc.h of the simulated SoC with the measurement engine: main.c's engine commands."""
    from targets import sim

    return sim.build(with_engine=True) / "software" / "include"


@pytest.fixture(scope="module")
def generated_with_ethernet(tmp_path_factory):
    """csr.h / soc.h of a SoC with the engine and Ethernet (headers only: seconds)."""
    import eth_headers

    return eth_headers.build(tmp_path_factory.mktemp("eth_headers"), with_engine=True)


@pytest.fixture(scope="module")
def generated_with_tdc():
    """csr.h / soc.h of the simulated SoC with its TDCs (docs/tdc.md): HILAT_TDC_INPUTS 4, the codes in
    capture_ev_fraction; IDENTIFY's TDC fields."""
    from targets import sim

    return sim.build(tdc=True) / "software" / "include"


def test_parser_survives_a_fuzzing_run(tmp_path):
    result = fuzz(build(tmp_path, HERE / "fuzz_command_parser.c"), tmp_path, f"-max_total_time={SECONDS}")
    assert_clean(result, tmp_path, 10_000 * SECONDS // 10)


def test_parser_oracle_catches_a_misread_field(tmp_path):
    # burst_spacing loses its top byte: no crash, no sanitizer report, only the oracle (the payload
    # rebuilt from the parsed fields) can tell.
    firmware = mutant_firmware(tmp_path, [("protocol.c", "s->burst_spacing = get_le32(b + 21);",
                                           "s->burst_spacing = get_le32(b + 21) & 0xFFFFFFu;")])
    result = fuzz(build(tmp_path, HERE / "fuzz_command_parser.c", firmware), tmp_path, "-runs=2000000")
    assert result.returncode != 0 and "deadly signal" in result.stderr and list(tmp_path.glob("crash-*"))


def test_firmware_commands_survive_a_fuzzing_run(tmp_path, generated):
    result = fuzz(build(tmp_path, HERE / "fuzz_firmware_commands.c", generated=generated), tmp_path,
                  f"-max_total_time={SECONDS}")
    assert_clean(result, tmp_path, 5_000 * SECONDS // 10)


def test_firmware_engine_commands_survive_a_fuzzing_run(tmp_path, generated_with_engine):
    assert "CSR_ENGINE_BASE" in (generated_with_engine / "generated" / "csr.h").read_text()
    result = fuzz(build(tmp_path, HERE / "fuzz_firmware_commands.c", generated=generated_with_engine), tmp_path,
                  f"-max_total_time={SECONDS}")
    assert_clean(result, tmp_path, 5_000 * SECONDS // 10)


def test_firmware_tdc_rig_commands_survive_a_fuzzing_run(tmp_path, generated_with_tdc):
    assert "CSR_CAPTURE_EV_FRACTION_ADDR" in (generated_with_tdc / "generated" / "csr.h").read_text()
    assert "#define HILAT_TDC_INPUTS 4" in (generated_with_tdc / "generated" / "soc.h").read_text()
    # A third of the others' time: the command path is theirs; what differs is IDENTIFY and the packer.
    seconds = max(SECONDS // 3, 1)
    result = fuzz(build(tmp_path, HERE / "fuzz_firmware_commands.c", generated=generated_with_tdc), tmp_path,
                  f"-max_total_time={seconds}")
    assert_clean(result, tmp_path, 5_000 * seconds // 10)


def test_firmware_ethernet_commands_survive_a_fuzzing_run(tmp_path, generated_with_ethernet):
    assert "CSR_ETHSTREAM_BASE" in (generated_with_ethernet / "generated" / "csr.h").read_text()
    result = fuzz(build(tmp_path, HERE / "fuzz_firmware_commands.c", generated=generated_with_ethernet), tmp_path,
                  f"-max_total_time={SECONDS}")
    assert_clean(result, tmp_path, 3_000 * SECONDS // 10)


@pytest.mark.parametrize("correct,wrong", [
    # A reply over the link of the last HELLO instead of its command's.
    ("    transmit(last_reply, last_reply_len, &reply_to);\n    replied = 1;",
     "    transmit(last_reply, last_reply_len, &session_to);\n    replied = 1;"),
    # STREAM_CONFIG's destination 0 not resolved to the command datagram's source.
    ("stream.dst_ip = c->dst_ip ? c->dst_ip : reply_to.ip;", "stream.dst_ip = c->dst_ip;"),
    # NET_CONFIG's new address applied before its ACK has left (the ACK would go from it).
    ("    ack(cmd->seq, HILAT_ACK_OK, 0); /* from the old address */",
     "    ethnet_ip_write(c->ip);\n    ack(cmd->seq, HILAT_ACK_OK, 0); /* from the old address */"),
    # STREAM_STATUS's link bit set whether or not a frame was received.
    ("st.link = st.rx_frames ? HILAT_STREAM_LINK_UP : 0u;", "st.link = HILAT_STREAM_LINK_UP;"),
    # START without restarting the stream.
    ("| FIELD(ETHSTREAM_CONTROL, RESTART, 1));", ");"),
    # A datagram without its 0x00 left open: its frame would run into the next datagram's.
    ("            if (c != 0)\n                n = hilat_rx_feed(&udp_rx, 0);", ""),
])
def test_firmware_oracles_catch_wrong_ethernet_handlers(tmp_path, generated_with_ethernet, correct, wrong):
    firmware = mutant_firmware(tmp_path, [("main.c", correct, wrong)])
    exe = build(tmp_path, HERE / "fuzz_firmware_commands.c", firmware, generated=generated_with_ethernet)
    result = fuzz(exe, tmp_path, "-runs=3000000", "-max_total_time=60")
    assert result.returncode != 0 and "deadly signal" in result.stderr, result.stderr[-2000:]


@pytest.mark.parametrize("name,correct,wrong,symptom", [
    # A stimulus channel number trusted one too far: the CSR table is read past its end.
    ("main.c", "if (c->channel >= HILAT_N_STIMULUS)", "if (c->channel > HILAT_N_STIMULUS)",
     "index 2 out of bounds"),
    # A refused STIM_CONFIG that still writes a register.
    ("main.c", "        ack(cmd->seq, HILAT_ACK_REFUSED, err);\n        return;\n    }\n    unsigned ch = c->channel;",
     "        csr_write_simple(c->width, STIM_REG(c->channel % HILAT_N_STIMULUS, WIDTH));\n"
     "        ack(cmd->seq, HILAT_ACK_REFUSED, err);\n        return;\n    }\n    unsigned ch = c->channel;",
     "deadly signal"),
    # The glitch filter not clamped to the rig's maximum.
    ("main.c", "uint32_t glitch = c->glitch[ch] > HILAT_GLITCH_MAX ? HILAT_GLITCH_MAX : c->glitch[ch];",
     "uint32_t glitch = c->glitch[ch] > HILAT_GLITCH_MAX + 1 ? HILAT_GLITCH_MAX : c->glitch[ch];", "deadly signal"),
    # A command after HELLO answered twice.
    ("main.c", "    case HILAT_MSG_STOP: on_stop(&cmd); break;",
     "    case HILAT_MSG_STOP: on_stop(&cmd); on_stop(&cmd); break;", "deadly signal"),
    # A repeated command (same seq and CRC: its reply was lost) executed again instead of answered
    # with the kept reply.
    ("main.c", "if (last_valid && cmd.seq == last_seq && cmd.crc == last_crc) {", "if (0) {", "deadly signal"),
    # The Ethernet commands taken for unknown ones on a rig without Ethernet (ACK malformed, not refused).
    ("main.c", 'case HILAT_MSG_NET_CONFIG: ack(cmd.seq, HILAT_ACK_REFUSED, "no Ethernet on this rig"); break;',
     "case HILAT_MSG_NET_CONFIG:", "deadly signal"),
    # STATUS's pulse counts read without asking for a snapshot first.
    ("main.c", "csr_write_simple(FIELD(STIMULUS_CH0_FIRED_CONTROL, SNAPSHOT, 1), STIM_REG(ch, FIRED_CONTROL));",
     "(void)0;", "deadly signal"),
])
def test_firmware_oracles_catch_wrong_handlers(tmp_path, generated, name, correct, wrong, symptom):
    firmware = mutant_firmware(tmp_path, [(name, correct, wrong)])
    exe = build(tmp_path, HERE / "fuzz_firmware_commands.c", firmware, generated=generated)
    result = fuzz(exe, tmp_path, "-runs=3000000", "-max_total_time=60")
    assert result.returncode != 0 and symptom in result.stderr, result.stderr[-2000:]


def test_firmware_oracles_catch_a_wrong_engine_reply(tmp_path, generated_with_engine):
    # ENGINE_STATS naming another command than the ENGINE_STATS_REQ it answers.
    firmware = mutant_firmware(tmp_path, [("main.c", "hilat_msg_engine_stats(&out, tx_seq, cmd->seq, &st);",
                                           "hilat_msg_engine_stats(&out, tx_seq, (uint16_t)(cmd->seq + 1), &st);")])
    exe = build(tmp_path, HERE / "fuzz_firmware_commands.c", firmware, generated=generated_with_engine)
    result = fuzz(exe, tmp_path, "-runs=3000000", "-max_total_time=60")
    assert result.returncode != 0 and "deadly signal" in result.stderr, result.stderr[-2000:]
