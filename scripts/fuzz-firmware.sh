#!/usr/bin/env bash
# Fuzz the rig firmware where it takes bytes from the host, with libFuzzer under AddressSanitizer +
# UndefinedBehaviorSanitizer, seeded from the shared vectors (tests/vectors):
#   parser    tests/firmware/fuzz_command_parser.c: firmware/protocol.c (framing, COBS, CRC, parser)
#   commands  tests/firmware/fuzz_firmware_commands.c: firmware/main.c's whole command path on a fake
#             CSR bus, against the simulated SoC's generated headers (builds the simulator if needed)
#   ethernet  the same harness against the headers of a SoC with the engine and the Ethernet link
#             (tests/firmware/eth_headers.py: commands over the UART and UDP, the stream's registers)
#
#   scripts/fuzz-firmware.sh [EXECUTIONS [COMMAND_EXECUTIONS]]
#       default 10000000 for the parser (about 3 minutes) and 2000000 for the commands and for
#       ethernet (about 2 and 4)
#
# Corpora grow in build/fuzz/<target>/corpus across runs. A crash, a sanitizer report or a failed
# oracle (the harness says which) stops the run, leaves the input in build/fuzz/<target>/findings/
# and exits non-zero: turn it into a vector, fix, run again. Each target ends with its executions,
# libFuzzer's counters and line/branch coverage from llvm-cov of the code it aims at.
# Needs clang, libclang-rt-14-dev and llvm (installed by `make setup`).
set -euo pipefail
cd "$(dirname "$0")/.."

PARSER_RUNS=${1:-10000000}
COMMAND_RUNS=${2:-2000000}
PY=.venv/bin/python
[ -x "$PY" ] || { echo "fuzz-firmware: run make setup first" >&2; exit 2; }
for tool in clang llvm-profdata llvm-cov; do
  command -v "$tool" >/dev/null || { echo "fuzz-firmware: $tool not found: run make setup" >&2; exit 2; }
done
CFLAGS=(-g -O1 -std=gnu99 -Wall -Wextra -Werror -Wno-unused-function)

# fuzz NAME RUNS SEED_OPTION FUNCTIONS_REGEX FILE INCLUDES...
fuzz() {
  local name=$1 runs=$2 seed_option=$3 functions=$4 file=$5
  shift 5
  local out=build/fuzz/$name harness=tests/firmware/fuzz_$name.c
  [ "$name" = parser ] && harness=tests/firmware/fuzz_command_parser.c
  [ "$name" = commands ] || [ "$name" = ethernet ] && harness=tests/firmware/fuzz_firmware_commands.c
  mkdir -p "$out/corpus" "$out/findings" "$out/profiles"
  rm -rf "$out/seeds"
  clang "${CFLAGS[@]}" "$@" -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all "$harness" \
    firmware/protocol.c -o "$out/fuzz"
  "$PY" tests/firmware/fuzz_seeds.py $seed_option "$out/seeds" >/dev/null
  echo "fuzz-firmware: $name, $runs executions (ASan + UBSan)" >&2
  local start status
  start=$(date +%s)
  set +e
  "$out/fuzz" -runs="$runs" -max_len=1100 -print_final_stats=1 -artifact_prefix="$out/findings/" \
    "$out/corpus" "$out/seeds" >"$out/fuzz.log" 2>&1
  status=$?
  set -e
  local seconds=$(( $(date +%s) - start ))
  local executions counters
  executions=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out/fuzz.log")
  counters=$(grep -E '^#[0-9]+' "$out/fuzz.log" | tail -1 | grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+/[^ ]+' || true)
  if [ "$status" -ne 0 ]; then
    grep -E 'ERROR|runtime error|SUMMARY|Test unit written' "$out/fuzz.log" >&2 || true
    echo "fuzz-firmware: $name FAILED after ${executions:-?} executions (log $out/fuzz.log, input in $out/findings/)" >&2
    exit 1
  fi
  # Coverage: replay the corpus through an instrumented build (no fuzzing, no inlining).
  clang "${CFLAGS[@]}" "$@" -O0 -fsanitize=fuzzer -fprofile-instr-generate -fcoverage-mapping "$harness" \
    firmware/protocol.c -o "$out/cover"
  rm -f "$out"/profiles/*
  LLVM_PROFILE_FILE="$out/profiles/%p.profraw" "$out/cover" -runs=0 "$out/corpus" "$out/seeds" >/dev/null 2>&1
  llvm-profdata merge -sparse "$out"/profiles/*.profraw -o "$out/cover.profdata"
  llvm-cov report "$out/cover" -instr-profile="$out/cover.profdata" "$file" -show-functions >"$out/coverage.txt"
  grep -E "^(Name|-+$|([a-z_]+\\.c:)?($functions) )" "$out/coverage.txt" >&2
  local covered
  covered=$(awk -v re="^([a-z_]+\\\\.c:)?($functions)\$" '$1 ~ re {l += $5; lm += $6; b += $8; bm += $9}
    END {printf "lines %d/%d (%.1f %%), branches %d/%d (%.1f %%)", l - lm, l, 100 * (l - lm) / l, b - bm, b, 100 * (b - bm) / b}' \
    "$out/coverage.txt")
  echo "  corpus: $(ls "$out/corpus" | wc -l) inputs; libFuzzer: ${counters:-?}" >&2
  SUMMARY+=("fuzz-firmware: $name: ${executions} executions in ${seconds} s, 0 crashes, 0 sanitizer reports, 0 oracle failures; $file (${functions//|/, }): ${covered}")
}

SUMMARY=()
# The receive path of protocol.c (the rest of it builds rig->host frames).
fuzz parser "$PARSER_RUNS" "" \
  'hilat_parse_command|parse_body|get_le16|get_le32|get_le64|hilat_cobs_decode|hilat_rx_feed|hilat_rx_init|hilat_crc32_update|hilat_crc32' \
  firmware/protocol.c -Ifirmware
generated=$("$PY" -c 'from targets import sim; print(sim.build() / "software" / "include")')
# main.c's command path (drain_events needs a capture FIFO with records: the simulator tests it).
fuzz commands "$COMMAND_RUNS" --commands \
  'handle_frame|on_hello|check_stim_config|on_stim_config|on_capture_config|on_start|on_stop|on_status|on_time|poll_rx|service|ack|send_frame|send_reply|transmit|send_control|flush_events' \
  firmware/main.c -Itests/firmware/host_include -I"$generated" -Ifirmware
ethernet=$("$PY" tests/firmware/eth_headers.py build/fuzz/ethernet/soc --engine | tail -1)
fuzz ethernet "$COMMAND_RUNS" --commands \
  'handle_frame|on_hello|on_start|ack|send_reply|transmit|poll_udp|udp_send|udp_tx_ready|stream_reset|on_stream_config|on_stream_status|on_net_config|csr_read_u64_live|sys_cycles' \
  firmware/main.c -Itests/firmware/host_include -I"$ethernet" -Ifirmware
printf '%s\n' "${SUMMARY[@]}"
