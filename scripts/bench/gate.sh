#!/usr/bin/env bash
# scripts/bench/gate.sh — the host gate's added latency per operation, called by scripts/bench.sh
# (section 5) or alone: sudo scripts/bench/gate.sh [RUNS].
#
# Side by side on the two beds scripts/test.sh uses (plain: zen-agent@2222; gated: zen-gate@2223,
# `pxagent gate` as the key's forced command), each op's exact command line is sent RUNS times
# over a warm OpenSSH ControlMaster connection per bed (so no handshake is in the numbers), and the
# median of gated minus the median of ungated is the gate's cost: reading the line back into a
# catalog op, loading the host policy, writing the syslog record, exec'ing sudo. Information only:
# a missed goal (< 5 ms) is printed as "missed", never a failure. Exit 2 when a bed is down.
set -euo pipefail
REPO_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
RUNS="${1:-${BENCH_RUNS:-30}}"
WORK="$(mktemp -d)"
PIDS=()
cleanup() {
    for s in "$WORK"/ctl-*; do [[ -S "$s" ]] && ssh -S "$s" -O exit x 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT

envof() { "$REPO_DIR/scripts/testbed.sh" env "$@" 2>/dev/null; }
declare -A BED_ENV
BED_ENV[plain]="$(envof)"
BED_ENV[gated]="$(envof --gate --port 2223 --user zen-gate)"

master() { # master NAME: start a ControlMaster for the bed
    local name="$1" HOST PORT USER IDENTITY KNOWN
    eval "$(sed -n 's/^export PXAGENT_\(HOST\|PORT\|USER\|IDENTITY\|KNOWN_HOSTS\)=/\1=/p' <<<"${BED_ENV[$name]}")"
    KNOWN="$KNOWN_HOSTS"
    SSH_ARGS=(-F /dev/null -S "$WORK/ctl-$name" -i "$IDENTITY" -p "$PORT" -o UserKnownHostsFile="$KNOWN"
        -o BatchMode=yes -o IdentitiesOnly=yes "$USER@$HOST")
    ssh -fNM "${SSH_ARGS[@]}" -o ControlPersist=60 2>/dev/null || { echo "bench-gate: the $name bed does not answer (scripts/testbed.sh up ${name/gated/--gate --port 2223 --user zen-gate})" >&2; exit 2; }
    eval "ARGS_$name=(\"\${SSH_ARGS[@]}\")"
}
master plain
master gated

median_ms() { # median_ms NAME LINE → median wall time in ms over RUNS runs
    local name="$1" line="$2" i t0 t1 ref="ARGS_$1[@]"
    local -a times=()
    ssh "${!ref}" "$line" >/dev/null || { echo "bench-gate: '$line' failed on the $name bed" >&2; exit 2; }
    for ((i = 0; i < RUNS; i++)); do
        t0=$EPOCHREALTIME
        ssh "${!ref}" "$line" >/dev/null
        t1=$EPOCHREALTIME
        times+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", (b - a) * 1000 }')")
    done
    printf '%s\n' "${times[@]}" | sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
}

echo "  5. the host gate's added latency: median of $RUNS runs over a warm ControlMaster, ms"
printf '  %-44s %9s %9s %9s  %s\n' "op (command line)" "ungated" "gated" "added" "goal < 5 ms"
for pair in \
    "pve.version|sudo -n /usr/bin/pvesh get /version --output-format json" \
    "vm.status|sudo -n /usr/bin/pvesh get /nodes/pve1/qemu/100/status/current --output-format json" \
    "vm.list|sudo -n /usr/bin/pvesh get /cluster/resources --type vm --output-format json" \
    "node.list|sudo -n /usr/bin/pvesh get /nodes --output-format json"; do
    op="${pair%%|*}" line="${pair#*|}"
    a="$(median_ms plain "$line")"
    b="$(median_ms gated "$line")"
    awk -v op="$op" -v a="$a" -v b="$b" 'BEGIN { d = b - a; printf "  %-44s %9.2f %9.2f %9.2f  %s\n", op, a, b, d, (d < 5) ? "met" : "missed" }'
done
echo "  (the gated bed's host policy as the tests left it; the gate rereads it and the approvers on every request)"
