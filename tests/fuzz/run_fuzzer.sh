#!/usr/bin/env bash
# Runs one fuzz harness for a while, as the ctest label `fuzz` does (docs/FUZZING.md):
#   run_fuzzer.sh FUZZER SEED_DIR WORK_DIR SECONDS [libFuzzer flags...]
#   run_fuzzer.sh --skip REASON          (no fuzzer could be built: ctest reports SKIPPED)
# The committed seeds (SEED_DIR) are read, never written: inputs the run finds go to
# WORK_DIR/corpus, which later runs start from too; a crashing input goes to WORK_DIR/artifacts/.
# Exit: 0 no finding; 77 skipped; anything else a finding (or a broken setup).
set -uo pipefail
if [ "${1:-}" = "--skip" ]; then
  echo "SKIPPED: ${2:-no fuzzer}" >&2
  exit 77
fi
if [ $# -lt 4 ]; then
  echo "usage: $0 FUZZER SEED_DIR WORK_DIR SECONDS [libFuzzer flags...]" >&2
  exit 2
fi
fuzzer=$1 seeds=$2 work=$3 seconds=$4
shift 4
if [ ! -x "$fuzzer" ]; then
  echo "SKIPPED: $fuzzer was not built (clang with libFuzzer missing? see docs/FUZZING.md)" >&2
  exit 77
fi
if [ ! -d "$seeds" ]; then
  echo "$0: no seed corpus at $seeds" >&2
  exit 2
fi
mkdir -p "$work/corpus" "$work/artifacts" || exit 2
# -timeout: one input taking 10 s is a hang (a finding); -rss_limit_mb: far above what any reader
# may use for inputs of -max_len bytes. The final stats give the exec count for the record.
# libFuzzer's own exit code for a finding is 77, ctest's code for SKIPPED here: findings exit 1.
"$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -error_exitcode=1 -timeout_exitcode=1 -artifact_prefix="$work/artifacts/" "$@" "$work/corpus" "$seeds"
status=$?
[ $status -eq 77 ] && status=1
if [ $status -ne 0 ]; then
  echo "FINDING: $(basename "$fuzzer") exited $status; the input is in $work/artifacts/." >&2
  echo "Reproduce: $fuzzer $work/artifacts/<file>" >&2
fi
exit $status
