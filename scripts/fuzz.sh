#!/usr/bin/env bash
# Run every fuzz target of fuzz/ (cargo-fuzz, libFuzzer) for SECONDS each, one after the other:
#
#   scripts/fuzz.sh [SECONDS]      # default 30; `scripts/fuzz.sh 600` is the 10-minute run
#
# The targets are the parsers of untrusted input: the gate's command line and envelope with the
# catalog's inverse parse, approvals (SSHSIG and statements), the sudoers lint, `sudo -l`
# output, the policy and config loaders, batch request lines and the pvesh JSON views.
# Each run starts from the committed corpus fuzz/corpus/<target>/ and writes what it finds to a
# temporary directory, so the committed corpus changes only when someone minimises a run into
# it on purpose (`cargo +nightly fuzz cmin`). A crash, hang or memory use over 2 GiB stops that
# target and leaves its input in fuzz/artifacts/<target>/; the script goes on with the others
# and exits 1 at the end. A hang is one input running over 25 s, or over 300 s for the two
# targets that lint sudoers rules: the lint walks bounded product automata per rule and danger,
# which takes seconds under the fuzzer's instrumentation (AddressSanitizer, coverage).
#
# cargo-fuzz needs the nightly toolchain (`cargo +nightly`) and `cargo fuzz`
# (`cargo install cargo-fuzz`). When either is missing, the script says so on one line,
# `fuzzing skipped: <why>`, and exits 0; with PXAGENT_FUZZ_REQUIRED=1 it exits 2 instead.
set -euo pipefail
cd "$(dirname "$0")/.."

SECS="${1:-30}"
case "$SECS" in
-h | --help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
'' | *[!0-9]*) echo "scripts/fuzz.sh: SECONDS must be a whole number, not '$SECS' (see --help)" >&2; exit 2 ;;
esac

skip() {
    echo "fuzzing skipped: $1"
    if [ "${PXAGENT_FUZZ_REQUIRED:-0}" = 1 ]; then
        exit 2
    fi
    exit 0
}

if ! command -v cargo >/dev/null 2>&1; then
    skip "cargo is not on PATH"
fi
if ! cargo +nightly --version >/dev/null 2>&1; then
    skip "no nightly toolchain (\`cargo +nightly\` fails; rustup toolchain install nightly)"
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    skip "cargo-fuzz is not installed (\`cargo fuzz\` fails; cargo install cargo-fuzz)"
fi

mapfile -t TARGETS < <(cargo +nightly fuzz list)
if [ ${#TARGETS[@]} -eq 0 ]; then
    echo "scripts/fuzz.sh: cargo fuzz lists no targets in fuzz/" >&2
    exit 1
fi

SCRATCH="$(mktemp -d)"
trap 'rm -rf "$SCRATCH"' EXIT

echo "fuzzing ${#TARGETS[@]} targets for ${SECS}s each: ${TARGETS[*]}"
# cargo-fuzz has no --quiet: the build's output goes to a log, shown only when the build fails.
if ! cargo +nightly fuzz build >"$SCRATCH/build.log" 2>&1; then
    tail -n 60 "$SCRATCH/build.log"
    echo "fuzzing failed: cargo fuzz build"
    exit 1
fi
FAILED=()
for t in "${TARGETS[@]}"; do
    mkdir -p "$SCRATCH/$t" "fuzz/corpus/$t"
    case "$t" in
    sudoers_lint | sudo_listing) TIMEOUT=300 ;;
    *) TIMEOUT=25 ;;
    esac
    echo "-- $t"
    # libFuzzer's own statistics are the last lines it prints; its per-input chatter is not.
    if cargo +nightly fuzz run "$t" "$SCRATCH/$t" "fuzz/corpus/$t" -- \
        -max_total_time="$SECS" -timeout="$TIMEOUT" -rss_limit_mb=2048 -print_final_stats=1 \
        >"$SCRATCH/$t.log" 2>&1; then
        grep -E '^(Done|stat::number_of_executed_units|stat::peak_rss_mb)' "$SCRATCH/$t.log" || true
        grep -E '^#[0-9]+.*(cov|ft):' "$SCRATCH/$t.log" | tail -n 1 || true
    else
        tail -n 40 "$SCRATCH/$t.log"
        echo "$t: FAILED (the input is in fuzz/artifacts/$t/)"
        FAILED+=("$t")
    fi
done
if [ ${#FAILED[@]} -gt 0 ]; then
    echo "fuzzing failed: ${FAILED[*]}"
    exit 1
fi
echo "fuzzing: no crash, hang or memory blow-up in ${#TARGETS[@]} targets"
