#!/usr/bin/env bash
# scripts/bench/actions.sh — host commands per action (scripts/bench.sh section 8).
#
# Why this exists: on a real Proxmox host every `pvesh`/`qm` is a Perl process that loads much of
# the PVE API, so the number of host commands one action costs is what users feel most. This counts
# them in sudo's own log (every command pxagent sends is one sudo line), for one CLI call (a fresh
# process: it reads the guest map first) and for a call whose connection's guest map is already warm
# (a batch, an MCP session, or --persist: here a persistent connection warmed by `vm list`), and
# prints the command lines.
#
# It CHANGES THE BED: starts and stops VM 103, makes and deletes a snapshot of VM 100, makes
# and removes a backup of VM 100, runs `uname -a` in VM 100 — and it counts every sudo line of
# the account, so run it on a bed nobody else uses. Information only; it never asserts.
#
# With TOOL_MS=N (scripts/bench.sh --tool-ms N) every PVE tool run on the simulated host first
# spends N ms, as a real host's Perl start-up does (`pve-sim tool-ms`, put back to 0 at the end),
# and each action's wall time is printed beside what `ssh` and proxmoxer take for the same action:
# one `ssh` process running the action's own command (a script that already knows the node), and
# a proxmoxer script making the one API call (read and start; proxmoxer passes options as
# `-name value`, which the bed's sudoers, fixed to pxagent's `--name value` lines, refuses, so
# the other actions read n/a). Also 50 status reads of VM 100: one `pxagent batch`, 50 `ssh`
# processes, and 50 proxmoxer calls over one connection.
#
# Usage (from scripts/bench.sh --actions, or by hand with the bed's env):
#   PX=target/release/pxagent [TOOL_MS=300 SSH='ssh -i KEY …' VENV=…] scripts/bench/actions.sh
set -euo pipefail
: "${PX:?PX must name the pxagent binary}"
: "${PXAGENT_USER:?run with the bed env: eval \"\$(scripts/testbed.sh env)\"}"
LOG="/var/log/sudo-$PXAGENT_USER.log"
[[ -r "$LOG" ]] || { echo "  8. host commands per action: no sudo log $LOG"; exit 1; }
: "${XDG_RUNTIME_DIR:=$(mktemp -d)}"
export XDG_RUNTIME_DIR
WARM=(--persist 120s)
TOOL_MS="${TOOL_MS:-0}"
SIM=/usr/local/lib/pve-sim/pve-sim
REPO_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
if [[ "$TOOL_MS" -gt 0 ]]; then
    "$SIM" tool-ms "$TOOL_MS"
    trap '"$SIM" tool-ms 0' EXIT
fi
ms_since() { # ms_since T0 — milliseconds since $EPOCHREALTIME was T0
    echo "$1 $EPOCHREALTIME" | awk '{printf "%.0f", ($2 - $1) * 1000}'
}

commands_since() { # commands_since OFFSET — the commands sudo logged since OFFSET
    tail -c +"$(($1 + 1))" "$LOG" | grep -o '"SUDO_COMMAND=[^"]*' | sed 's/^"SUDO_COMMAND=//'
}
phrase_of() { # phrase_of ARGS… — the confirmation phrase a dry run names
    "$PX" "$@" --dry-run -o json | sed -n 's/.*"phrase":"\([^"]*\)".*/\1/p'
}
declare -A ONE WARMED LINES WALL SSHMS PYMS
count() { # count KEY ARGS… — run one pxagent call, counting what it sent and timing it
    local key="$1" off out t0
    shift
    off="$(stat -c %s "$LOG")"
    # A state directory of its own: no guest map kept by an earlier call (src/remote/memo.rs).
    t0="$EPOCHREALTIME"
    out="$(XDG_STATE_HOME="$(mktemp -d)" "$PX" -o json "$@" 2>&1)" || { echo "  $key failed: $out" >&2; return 1; }
    WALL[$key]="$(ms_since "$t0")"
    sleep 0.2
    ONE[$key]="$(commands_since "$off" | wc -l)"
    LINES[$key]="$(commands_since "$off")"
}
count_warm() { # count_warm KEY ARGS… — the same after `vm list` warmed the persistent connection
    local key="$1" off out
    shift
    "$PX" "${WARM[@]}" vm list -o json >/dev/null
    off="$(stat -c %s "$LOG")"
    out="$("$PX" -o json "${WARM[@]}" "$@" 2>&1)" || { echo "  $key (warm) failed: $out" >&2; return 1; }
    sleep 0.2
    WARMED[$key]="$(commands_since "$off" | wc -l)"
}
quiet() { "$PX" -o json "$@" >/dev/null; }
main_line() { # main_line KEY — the action's own command among what pxagent sent: the first that
    # is not a read, else the last read that is not the guest map
    local lines="${LINES[$1]}" l
    l="$(grep -v '^/usr/bin/pvesh get ' <<<"$lines" | head -1)"
    [[ -n "$l" ]] || l="$(grep -v '/cluster/resources' <<<"$lines" | tail -1)"
    echo "$l"
}
peers() { # peers KEY — time one ssh process running the action's own command, and proxmoxer
    local key="$1" line t0 path
    [[ "$TOOL_MS" -gt 0 && -n "${SSH:-}" ]] || return 0
    line="$(main_line "$key")"
    t0="$EPOCHREALTIME"
    if $SSH "$PXAGENT_USER@$PXAGENT_HOST" "sudo -n $line" >/dev/null 2>&1; then
        SSHMS[$key]="$(ms_since "$t0")"
    else
        SSHMS[$key]="failed"
    fi
    PYMS[$key]="n/a"
    if [[ -x "${VENV:-}/bin/python" && "$line" =~ ^/usr/bin/pvesh\ (get|create)\ (/[^ ]+)\ --output-format\ json$ ]]; then
        local verb="${BASH_REMATCH[1]}"
        path="${BASH_REMATCH[2]}"
        [[ "$verb" == create ]] && verb=post
        [[ "$key" == start ]] && stop103
        t0="$EPOCHREALTIME"
        if "$VENV/bin/python" "$REPO_DIR/scripts/bench/proxmoxer_call.py" --host "$PXAGENT_HOST" \
            --port "$PXAGENT_PORT" --user "$PXAGENT_USER" --key "$PXAGENT_IDENTITY" "$verb" "$path" >/dev/null; then
            PYMS[$key]="$(ms_since "$t0")"
        else
            PYMS[$key]="failed"
        fi
    fi
}

stop103() { quiet vm stop 103 --confirm "$(phrase_of vm stop 103)"; }
[[ "$("$PX" vm status 103 -o json)" == *'"status":"stopped"'* ]] || stop103

count read vm status 100
peers read
count_warm read vm status 100
count start vm start 103
stop103
peers start
stop103
count_warm start vm start 103
stop103
count snapshot vm snapshot 100 pxbench1
quiet vm delsnapshot 100 pxbench1 --confirm "$(phrase_of vm delsnapshot 100 pxbench1)"
peers snapshot
quiet vm delsnapshot 100 pxbench1 --confirm "$(phrase_of vm delsnapshot 100 pxbench1)" || true
count_warm snapshot vm snapshot 100 pxbench2
quiet vm delsnapshot 100 pxbench2 --confirm "$(phrase_of vm delsnapshot 100 pxbench2)"
remove_backups() { # the backups of VM 100 this script made
    local v
    for v in $("$PX" backup list --vmid 100 -o json | grep -o '"volid":"[^"]*"' | cut -d'"' -f4); do
        if ! grep -qxF "$v" "$BEFORE"; then
            quiet backup remove "$v" --confirm "$(phrase_of backup remove "$v")"
        fi
    done
}
BEFORE="$(mktemp)"
"$PX" backup list --vmid 100 -o json | grep -o '"volid":"[^"]*"' | cut -d'"' -f4 >"$BEFORE" || true
count backup backup create 100
peers backup
count_warm backup backup create 100
remove_backups
rm -f "$BEFORE"
count exec vm exec 100 -- uname -a
peers exec
count_warm exec vm exec 100 -- uname -a
"$PX" persist stop >/dev/null 2>&1 || true

# 50 status reads of VM 100: one batch, 50 ssh processes, 50 proxmoxer calls on one connection.
N50=50
for ((i = 0; i < N50; i++)); do printf '{"id": %d, "op": "vm.status", "args": {"vmid": 100}}\n' "$i"; done >"$XDG_RUNTIME_DIR/status50.jsonl"
off="$(stat -c %s "$LOG")"
t0="$EPOCHREALTIME"
"$PX" batch <"$XDG_RUNTIME_DIR/status50.jsonl" >/dev/null
B50_MS="$(ms_since "$t0")"
sleep 0.2
B50_RUNS="$(commands_since "$off" | wc -l)"
# The same 50 with --brief (vm.status-brief): answered from one /cluster/resources read.
for ((i = 0; i < N50; i++)); do printf '{"id": %d, "op": "vm.status-brief", "args": {"vmid": 100, "brief": true}}\n' "$i"; done >"$XDG_RUNTIME_DIR/brief50.jsonl"
off="$(stat -c %s "$LOG")"
t0="$EPOCHREALTIME"
XDG_STATE_HOME="$(mktemp -d)" "$PX" batch <"$XDG_RUNTIME_DIR/brief50.jsonl" >/dev/null
BR50_MS="$(ms_since "$t0")"
sleep 0.2
BR50_RUNS="$(commands_since "$off" | wc -l)"
S50_MS="n/a" P50_MS="n/a"
if [[ "$TOOL_MS" -gt 0 && -n "${SSH:-}" ]]; then
    line="$(main_line read)"
    t0="$EPOCHREALTIME"
    for ((i = 0; i < N50; i++)); do $SSH "$PXAGENT_USER@$PXAGENT_HOST" "sudo -n $line" >/dev/null || break; done
    S50_MS="$(ms_since "$t0")"
    if [[ -x "${VENV:-}/bin/python" && "$line" =~ ^/usr/bin/pvesh\ get\ (/[^ ]+)\ --output-format\ json$ ]]; then
        t0="$EPOCHREALTIME"
        if "$VENV/bin/python" "$REPO_DIR/scripts/bench/proxmoxer_call.py" --host "$PXAGENT_HOST" \
            --port "$PXAGENT_PORT" --user "$PXAGENT_USER" --key "$PXAGENT_IDENTITY" --times "$N50" get "${BASH_REMATCH[1]}" >/dev/null; then
            P50_MS="$(ms_since "$t0")"
        else
            P50_MS="failed"
        fi
    fi
fi

echo "  8. host commands per action (sudo's log of the account); each PVE tool run costs ${TOOL_MS} ms"
echo "     (pve-sim tool-ms; a real host's pvesh/qm start-up is a few hundred ms)"
printf '  %-10s %9s %15s %13s %15s %15s\n' "action" "one call" "guest map warm" "pxagent ms" "ssh ms (1 cmd)" "proxmoxer ms"
for k in read start snapshot backup exec; do
    printf '  %-10s %9s %15s %13s %15s %15s\n' "$k" "${ONE[$k]}" "${WARMED[$k]}" "${WALL[$k]}" \
        "${SSHMS[$k]:-n/a}" "${PYMS[$k]:-n/a}"
done
printf '  %-10s %9s %15s %13s %15s %15s\n' "50 status" "$B50_RUNS" "(one batch)" "$B50_MS" "$S50_MS" "$P50_MS"
printf '  %-10s %9s %15s %13s %15s %15s\n' "50 brief" "$BR50_RUNS" "(one batch)" "$BR50_MS" "" ""
echo "  ssh = one ssh process running the action's own command (50 of them for the reads), as a"
echo "  script that already knows the guest's node would; proxmoxer = a Python script making the"
echo "  one API call (50 over one connection); n/a: proxmoxer's -name options are refused by the bed's"
echo "  sudoers, or --tool-ms is 0 (no peers timed). 50 brief = the same reads with vm status --brief"
echo "  (state, node, CPU, memory, uptime from one /cluster/resources read for all 50)."

echo "  one call = a fresh pxagent process with no map kept; warm = the guest map already read (a"
echo "  batch, an MCP session, --persist, or a CLI call < 10 s after another to the same host, which"
echo "  reuses the map that call kept). The commands of one call:"
for k in read start snapshot backup exec; do
    echo "    $k:"
    while IFS= read -r line; do echo "      $line"; done <<<"${LINES[$k]}"
done
