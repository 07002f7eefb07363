#!/usr/bin/env bash
# scripts/bench/gate.sh — the host gate's added latency per operation, called by scripts/bench.sh
# (section 5) or alone: sudo scripts/bench/gate.sh [RUNS].
#
# Side by side on the two beds scripts/test.sh uses (plain: zen-agent@2222; gated: zen-gate@2223,
# `pxagent gate` as the key's forced command), each op's exact command line is sent RUNS times
# over a warm OpenSSH ControlMaster connection per bed (so no handshake is in the numbers), and the
# median of the paired differences (one call per bed back to back) is the gate's cost: reading the line back into a
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

once_ms() { # once_ms NAME LINE → wall time of one call in ms
    local ref="ARGS_$1[@]" t0 t1
    t0=$EPOCHREALTIME
    ssh "${!ref}" "$2" >/dev/null
    t1=$EPOCHREALTIME
    awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", (b - a) * 1000 }'
}
median() { sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
paired_ms() { # paired_ms LINE → "ungated gated added": medians of RUNS interleaved pairs (one
    # call on each bed, back to back, so drift of the machine falls on both), and the median
    # of the pairs' differences
    local line="$1" i a b
    local -a as=() bs=() ds=()
    for name in plain gated; do
        local ref="ARGS_$name[@]"
        ssh "${!ref}" "$line" >/dev/null || { echo "bench-gate: '$line' failed on the $name bed" >&2; exit 2; }
    done
    for ((i = 0; i < RUNS; i++)); do
        a="$(once_ms plain "$line")"
        b="$(once_ms gated "$line")"
        as+=("$a") bs+=("$b")
        ds+=("$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.3f", b - a }')")
    done
    echo "$(printf '%s\n' "${as[@]}" | median) $(printf '%s\n' "${bs[@]}" | median) $(printf '%s\n' "${ds[@]}" | median)"
}

echo "  5. the host gate's added latency: medians of $RUNS interleaved runs over a warm ControlMaster, ms"
printf '  %-44s %9s %9s %9s  %s\n' "op (command line)" "ungated" "gated" "added" "goal < 5 ms"
for pair in \
    "pve.version|sudo -n /usr/bin/pvesh get /version --output-format json" \
    "vm.status|sudo -n /usr/bin/pvesh get /nodes/pve1/qemu/100/status/current --output-format json" \
    "vm.list|sudo -n /usr/bin/pvesh get /cluster/resources --type vm --output-format json" \
    "node.list|sudo -n /usr/bin/pvesh get /nodes --output-format json"; do
    op="${pair%%|*}" line="${pair#*|}"
    read -r a b d <<<"$(paired_ms "$line")"
    awk -v op="$op" -v a="$a" -v b="$b" -v d="$d" 'BEGIN { printf "  %-44s %9.2f %9.2f %9.2f  %s\n", op, a, b, d, (d < 5) ? "met" : "missed" }'
done
echo "  (added = the median of $RUNS paired differences, each pair one call per bed back to back)"
echo "  (the gated bed's host policy as the tests left it; the gate rereads it and the approvers on every request)"
