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
# Usage (from scripts/bench.sh --actions, or by hand with the bed's env):
#   PX=target/release/pxagent scripts/bench/actions.sh
set -euo pipefail
: "${PX:?PX must name the pxagent binary}"
: "${PXAGENT_USER:?run with the bed env: eval \"\$(scripts/testbed.sh env)\"}"
LOG="/var/log/sudo-$PXAGENT_USER.log"
[[ -r "$LOG" ]] || { echo "  8. host commands per action: no sudo log $LOG"; exit 1; }
: "${XDG_RUNTIME_DIR:=$(mktemp -d)}"
export XDG_RUNTIME_DIR
WARM=(--persist 120s)

commands_since() { # commands_since OFFSET — the commands sudo logged since OFFSET
    tail -c +"$(($1 + 1))" "$LOG" | grep -o '"SUDO_COMMAND=[^"]*' | sed 's/^"SUDO_COMMAND=//'
}
phrase_of() { # phrase_of ARGS… — the confirmation phrase a dry run names
    "$PX" "$@" --dry-run -o json | sed -n 's/.*"phrase":"\([^"]*\)".*/\1/p'
}
declare -A ONE WARMED LINES
count() { # count KEY ARGS… — run one pxagent call, counting what it sent
    local key="$1" off out
    shift
    off="$(stat -c %s "$LOG")"
    out="$("$PX" -o json "$@" 2>&1)" || { echo "  $key failed: $out" >&2; return 1; }
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

stop103() { quiet vm stop 103 --confirm "$(phrase_of vm stop 103)"; }
[[ "$("$PX" vm status 103 -o json)" == *'"status":"stopped"'* ]] || stop103

count read vm status 100
count_warm read vm status 100
count start vm start 103
stop103
count_warm start vm start 103
stop103
count snapshot vm snapshot 100 pxbench1
quiet vm delsnapshot 100 pxbench1 --confirm "$(phrase_of vm delsnapshot 100 pxbench1)"
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
count_warm backup backup create 100
remove_backups
rm -f "$BEFORE"
count exec vm exec 100 -- uname -a
count_warm exec vm exec 100 -- uname -a
"$PX" persist stop >/dev/null 2>&1 || true

echo "  8. host commands per action (sudo's log of the account)"
printf '  %-10s %9s %22s\n' "action" "one call" "guest map warm"
for k in read start snapshot backup exec; do
    printf '  %-10s %9s %22s\n' "$k" "${ONE[$k]}" "${WARMED[$k]}"
done
echo "  one call = a fresh pxagent process; warm = its connection's guest map already read (a"
echo "  batch, an MCP session, --persist). The commands of one call:"
for k in read start snapshot backup exec; do
    echo "    $k:"
    while IFS= read -r line; do echo "      $line"; done <<<"${LINES[$k]}"
done
