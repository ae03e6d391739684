#!/usr/bin/env bash
# Fuzz the rig firmware's command parser (firmware/protocol.c: the bytes the host sends to the rig)
# with libFuzzer under AddressSanitizer + UndefinedBehaviorSanitizer, seeded from the shared vectors.
#
#   scripts/fuzz-firmware.sh [EXECUTIONS]          default 10000000 (about 8 minutes on 2 cores)
#
# The corpus grows in build/fuzz/corpus across runs; a crash, a sanitizer report or a failed oracle
# (tests/firmware/fuzz_command_parser.c says which) stops the run, leaves the input in
# build/fuzz/findings/ and exits non-zero: turn it into a vector, fix, run again. At the end: the
# executions, libFuzzer's coverage counters, and line/branch coverage of protocol.c from llvm-cov.
# Needs clang, libclang-rt-14-dev and llvm (installed by `make setup`).
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=${1:-10000000}
OUT=build/fuzz
SRC=(tests/firmware/fuzz_command_parser.c firmware/protocol.c)
CFLAGS=(-g -O1 -std=c99 -Wall -Wextra -Werror -Ifirmware)
PY=.venv/bin/python
[ -x "$PY" ] || PY=python3

for tool in clang llvm-profdata llvm-cov; do
  command -v "$tool" >/dev/null || { echo "fuzz-firmware: $tool not found: run make setup" >&2; exit 2; }
done
mkdir -p "$OUT/corpus" "$OUT/seeds" "$OUT/findings" "$OUT/profiles"

clang "${CFLAGS[@]}" -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all "${SRC[@]}" \
  -o "$OUT/fuzz_command_parser"
"$PY" tests/firmware/fuzz_seeds.py "$OUT/seeds" >/dev/null

echo "fuzz-firmware: $RUNS executions (ASan + UBSan), corpus $OUT/corpus, seeds from tests/vectors" >&2
start=$(date +%s)
set +e
"$OUT/fuzz_command_parser" -runs="$RUNS" -max_len=1100 -print_final_stats=1 \
  -artifact_prefix="$OUT/findings/" "$OUT/corpus" "$OUT/seeds" >"$OUT/fuzz.log" 2>&1
status=$?
set -e
seconds=$(( $(date +%s) - start ))
executions=$(sed -n 's/^stat::number_of_executed_units: *//p' "$OUT/fuzz.log")
counters=$(grep -E '^#[0-9]+' "$OUT/fuzz.log" | tail -1 | grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+/[^ ]+' || true)
if [ "$status" -ne 0 ]; then
  grep -E 'ERROR|runtime error|SUMMARY|Test unit written' "$OUT/fuzz.log" >&2 || true
  echo "fuzz-firmware: FAILED after ${executions:-?} executions (log $OUT/fuzz.log, input in $OUT/findings/)" >&2
  exit 1
fi

# Coverage: replay the corpus through an instrumented build (no fuzzing, no inlining) and ask llvm-cov.
clang "${CFLAGS[@]}" -O0 -fsanitize=fuzzer -fprofile-instr-generate -fcoverage-mapping "${SRC[@]}" \
  -o "$OUT/cover_command_parser"
rm -f "$OUT"/profiles/*
LLVM_PROFILE_FILE="$OUT/profiles/%p.profraw" "$OUT/cover_command_parser" -runs=0 "$OUT/corpus" "$OUT/seeds" \
  >/dev/null 2>&1
llvm-profdata merge -sparse "$OUT"/profiles/*.profraw -o "$OUT/cover.profdata"
# The receive path: what parses bytes from the host (the rest of protocol.c builds rig->host frames).
PARSER='hilat_parse_command|parse_body|get_le16|get_le32|get_le64|hilat_cobs_decode|hilat_rx_feed|hilat_rx_init|hilat_crc32_update|hilat_crc32'
llvm-cov report "$OUT/cover_command_parser" -instr-profile="$OUT/cover.profdata" firmware/protocol.c \
  -show-functions >"$OUT/coverage.txt"
grep -E "^(Name|-+$|(protocol.c:)?($PARSER) )" "$OUT/coverage.txt" >&2
receive=$(awk -v re="^(protocol.c:)?($PARSER)\$" '$1 ~ re {l += $5; lm += $6; b += $8; bm += $9}
  END {printf "lines %d/%d (%.1f %%), branches %d/%d (%.1f %%)", l - lm, l, 100 * (l - lm) / l, b - bm, b, 100 * (b - bm) / b}' \
  "$OUT/coverage.txt")
echo "corpus: $(ls "$OUT/corpus" | wc -l) inputs; libFuzzer: ${counters:-?}" >&2
echo "fuzz-firmware: ${executions} executions in ${seconds} s, 0 crashes, 0 sanitizer reports, 0 oracle failures; receive path of protocol.c: ${receive}"
