"""A short run of the firmware fuzzer (the long one: scripts/fuzz-firmware.sh, >= 10^7 executions):
firmware/protocol.c's command parser under libFuzzer + ASan + UBSan, with the oracles of
fuzz_command_parser.c; and proof that those oracles fail on a parser that misreads a field."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import fuzz_seeds

ROOT = Path(__file__).resolve().parents[2]
HARNESS = Path(__file__).parent / "fuzz_command_parser.c"
PROTOCOL = ROOT / "firmware" / "protocol.c"
SECONDS = int(os.environ.get("HILAT_FUZZ_SECONDS", "45"))


def build(tmp, protocol_c):
    clang = shutil.which("clang")
    assert clang, "clang not found: run make setup (Debian packages clang, libclang-rt-14-dev)"
    exe = tmp / "fuzz"
    subprocess.run([clang, "-g", "-O1", "-std=c99", "-Wall", "-Wextra", "-Werror", f"-I{ROOT / 'firmware'}",
                    "-fsanitize=fuzzer,address,undefined", "-fno-sanitize-recover=all", str(HARNESS),
                    str(protocol_c), "-o", str(exe)], check=True, capture_output=True, text=True)
    return exe


def fuzz(exe, tmp, *limits):
    corpus = tmp / "corpus"
    corpus.mkdir(exist_ok=True)
    assert fuzz_seeds.main(tmp / "seeds") > 50
    return subprocess.run([str(exe), *limits, "-max_len=1100", "-print_final_stats=1", f"-artifact_prefix={tmp}/",
                           str(corpus), str(tmp / "seeds")], capture_output=True, text=True, timeout=SECONDS + 120)


def test_parser_survives_a_fuzzing_run(tmp_path):
    result = fuzz(build(tmp_path, PROTOCOL), tmp_path, f"-max_total_time={SECONDS}")
    log = result.stderr
    assert result.returncode == 0, "\n".join(line for line in log.splitlines()
                                             if re.search(r"ERROR|runtime error|SUMMARY|Test unit", line))
    executions = int(re.search(r"stat::number_of_executed_units: *(\d+)", log).group(1))
    assert executions > 10_000 * SECONDS // 10, f"only {executions} executions in {SECONDS} s"
    assert not list(tmp_path.glob("crash-*")) and not list(tmp_path.glob("leak-*"))


def test_oracle_catches_a_misread_field(tmp_path):
    # The parser with one field read wrongly (burst_spacing loses its top byte): no crash, no
    # sanitizer report, only the oracle (the payload rebuilt from the fields) can tell.
    source = PROTOCOL.read_text()
    correct = "s->burst_spacing = get_le32(b + 21);"
    assert correct in source
    mutant = tmp_path / "protocol.c"
    mutant.write_text(source.replace(correct, "s->burst_spacing = get_le32(b + 21) & 0xFFFFFFu;"))
    shutil.copy(ROOT / "firmware" / "protocol.h", tmp_path)
    result = fuzz(build(tmp_path, mutant), tmp_path, "-runs=2000000")
    assert result.returncode != 0 and "deadly signal" in result.stderr
    assert list(tmp_path.glob("crash-*"))
