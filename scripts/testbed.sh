#!/usr/bin/env bash
# scripts/testbed.sh — bring a local sandbox "Proxmox host" up and down.
#
# Why this exists: no Proxmox VE can run on a developer or CI machine, yet every pxagent feature
# crosses SSH and sudo. This script builds a host that is real everywhere except Proxmox itself:
#   * a real OpenSSH sshd on 127.0.0.1 (own config, own host key, own pid file, own log) with a
#     hardened `Match User` block: public key only, no forwarding, no tty;
#   * a real dedicated account (default `zen-agent`): unusable password, key login only, no groups;
#   * real sudo with the sudoers file that **pxagent itself rendered** (`pxagent sudoers render`),
#     installed the safe way (dotted temp name → `visudo -cf` → 0440 → mv) and checked with
#     `visudo -c`;
#   * the PVE simulator (`pve-sim`, a multi-call binary) linked at the real PVE 9 paths.
# Tests, benchmarks and scripts/demo.sh run against it. Two beds can run side by side when they
# differ in port and account.
#
# Usage: scripts/testbed.sh COMMAND [options]                         (root only)
#   up        install what is missing, converge to a healthy bed, prove it end to end
#             (ssh + sudo -n pvesh get /version must print JSON); a healthy bed is left as is.
#             On failure the bed is torn down again: never a half-up bed.
#   down      remove everything this bed installed (see ownership rules); twice is a no-op
#   status    print each check; exit 0 if up and healthy, 1 otherwise
#   env       print `export PXAGENT_…=…` lines for `eval "$(scripts/testbed.sh env)"`
#   selftest  the bed's acceptance checks against the live bed, then up (no-op) / down / down /
#             up again, leaving the bed up; --quick skips that cycle. The down runs beside an
#             sshd with this bed's config in another network namespace and a process named like
#             it under another root (both must survive), and a stray named like it here (must
#             not). Exit 1 on any failure.
# Options (the same ones name the same bed in every command):
#   --port N          sshd port on 127.0.0.1            (env TESTBED_PORT, default 2222)
#   --user NAME       the agent account                 (env TESTBED_USER, default zen-agent)
#   --profile P       readonly|operator|full            (env TESTBED_PROFILE, default full)
#   --vmids R         passed to `pxagent sudoers render` (env TESTBED_VMIDS, default unset)
#   --ctids R         passed to `pxagent sudoers render` (env TESTBED_CTIDS, default unset)
#   --ct-exec R       passed to `pxagent sudoers render` (env TESTBED_CT_EXEC, default unset)
#   --gate            put `pxagent gate` in front of the account: the key's forced
#                     command (authorized_keys `restrict,command=…` and sshd ForceCommand), with
#                     this bed's own host policy and approvers files (root-owned, in the state dir;
#                     a test may rewrite them: the gate rereads them on every request), its own
#                     gate state dir, its kill switch (the freeze file PXAGENT_TESTBED_FREEZE, absent
#                     unless a test freezes, and a control dir for approvers' signed freezes),
#                     and a syslog socket whose records land in gate-audit.log
#                     (a small python3 listener stands in for journald). (env TESTBED_GATE=1)
#   --state-dir DIR   (env TESTBED_STATE_DIR, default /var/lib/pxagent-testbed/<user>-<port>)
#   --offer-password  sshd OFFERS password/keyboard-interactive to the account (the password
#                     itself stays unusable); for tests proving the client never sends one.
#                     (env TESTBED_OFFER_PASSWORD=1, default off)
#   PXAGENT_BIN / PVE_SIM_BIN  prebuilt binaries; otherwise `cargo build --locked --release` in the
#                     repo (installing Rust and the build packages first when missing).
# Packages: `up` installs what is missing of openssh-server openssh-client sudo procps util-linux iproute2
# (scripts/lib/deps.sh, the one place that installs anything for the scripts).
# Side by side: beds need different --port AND --user. They share one simulator (its binary is
# whatever the latest `up` installed; its state in /var/lib/pve-sim is reset only by an `up` that
# finds no other bed registered).
#
# State dir: bed.conf (who/what this bed is), id_ed25519{,.pub} (client key), known_hosts,
# ssh_host_ed25519_key{,.pub}, sshd_config, sshd.pid, sshd.log, sudoers (copy of what we installed).
#
# Ownership rules (what `down` and a re-`up` may touch; nothing else is ever touched):
#   * sshd: only the pid in our pid file, and only if its /proc cmdline names our config file
#     and it has our root directory and network namespace (also a listener like that whose pid
#     file was lost; one in a container with the same paths is another bed's, left alone);
#   * account: only if its GECOS field is exactly "$ACCOUNT_MARK" (set by our useradd) and no
#     other registered bed uses it;
#   * /etc/sudoers.d/<user>: only if it is byte-identical to our copy in the state dir, or the
#     account is ours (then a file named after it is ours too);
#   * simulator: /usr/local/lib/pve-sim/ and symlinks at the PVE paths that point into it; a
#     PVE path holding anything else (a real Proxmox tool) makes `up` fail without touching it;
#   * shared simulator state (/var/lib/pve-sim) and the links go only when no other bed is
#     registered in /var/lib/pxagent-testbed/.beds/.
# Beds serialise their up/down on /var/lib/pxagent-testbed/.lock (flock). Sudo's own logs
# (/var/log/sudo-<user>.log, /var/log/sudo-io/<user>) are kept after `down`, as evidence.

set -euo pipefail

SCRIPT_PATH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")"
REPO_DIR="$(cd "$(dirname "$SCRIPT_PATH")/.." && pwd)"
readonly SCRIPT_PATH REPO_DIR
readonly TESTBED_ROOT=/var/lib/pxagent-testbed
readonly REGISTRY_DIR="$TESTBED_ROOT/.beds"
readonly LOCK_FILE="$TESTBED_ROOT/.lock"
readonly ACCOUNT_MARK="pxagent testbed account"
readonly SIM_DIR=/usr/local/lib/pve-sim
readonly SIM_BIN="$SIM_DIR/pve-sim"
# pxagent's root-side helper (iso upload), where `setup render` wants it; installed with the
# simulator and removed with it.
readonly HELPER_DIR=/usr/local/lib/pxagent
readonly HELPER_BIN="$HELPER_DIR/pxagent-helper"
# The simulator's `local` storage is a directory storage at /var/lib/vz (as on PVE): the helper
# writes ISO images into its template/iso. Created when missing (and then removed at the end).
readonly ISO_DIR=/var/lib/vz/template/iso
# The local node's network is the machine's /etc/network when the bed creates it (a machine
# without ifupdown: a container, CI): pxagent's helper applies and reverts the very files the
# simulator reads. The marker tells the simulator the directory is its to use; a machine's own
# /etc/network is never touched (then the network tests fail, saying why).
readonly NET_DIR=/etc/network
readonly NET_MARKER="$NET_DIR/.pve-sim"
# Where the helper keeps an armed network change (its copy, token hash, history).
readonly HELPER_STATE=/var/lib/pxagent-helper
# The host audit chain the gated bed's gate appends to (helper/src/chain.rs). Its MAC key lives
# in $HELPER_STATE: removed together, or the chain could never verify again.
readonly HOST_CHAIN_DIR=/var/log/pxagent
readonly SIM_STATE_DIR=/var/lib/pve-sim
# The real PVE 9 paths; a wrong path would silently turn into "a password is required".
readonly SIM_PATHS=(/usr/sbin/qm /usr/sbin/pct /usr/bin/pvesh /usr/sbin/pvesm /usr/bin/vzdump
    /usr/sbin/qmrestore /usr/bin/pveam /usr/sbin/ha-manager /usr/bin/pvecm /usr/sbin/ifreload)
readonly SSHD=/usr/sbin/sshd # sshd must be started by absolute path (it re-execs itself)
# What the bed needs from the machine (DEPS_BED) and how it is installed: one place for all scripts.
DEPS_WHO=testbed
# shellcheck source=scripts/lib/deps.sh
. "$REPO_DIR/scripts/lib/deps.sh"

# ---------------------------------------------------------------------------------------------
# Options

CMD="${1:-}"
[[ $# -gt 0 ]] && shift
PORT="${TESTBED_PORT:-2222}"
USER_NAME="${TESTBED_USER:-zen-agent}"
PROFILE="${TESTBED_PROFILE:-full}"
VMIDS="${TESTBED_VMIDS:-}"
CTIDS="${TESTBED_CTIDS:-}"
CT_EXEC="${TESTBED_CT_EXEC:-}"
GATE="${TESTBED_GATE:-0}"
STATE_DIR="${TESTBED_STATE_DIR:-}"
OFFER_PASSWORD="${TESTBED_OFFER_PASSWORD:-0}"
SELFTEST_QUICK=0

usage() {
    sed -n '2,/^set -euo/p' "$SCRIPT_PATH" | sed '$d' | sed 's/^# \{0,1\}//'
}

die() {
    printf 'testbed: error: %s\n' "$*" >&2
    exit 1
}
say() { printf 'testbed: %s\n' "$*" >&2; }

while [[ $# -gt 0 ]]; do
    case "$1" in
    --port) PORT="${2:?--port needs a value}"; shift 2 ;;
    --port=*) PORT="${1#*=}"; shift ;;
    --user) USER_NAME="${2:?--user needs a value}"; shift 2 ;;
    --user=*) USER_NAME="${1#*=}"; shift ;;
    --profile) PROFILE="${2:?--profile needs a value}"; shift 2 ;;
    --profile=*) PROFILE="${1#*=}"; shift ;;
    --vmids) VMIDS="${2:?--vmids needs a value}"; shift 2 ;;
    --vmids=*) VMIDS="${1#*=}"; shift ;;
    --ctids) CTIDS="${2:?--ctids needs a value}"; shift 2 ;;
    --ctids=*) CTIDS="${1#*=}"; shift ;;
    --ct-exec) CT_EXEC="${2:?--ct-exec needs a value}"; shift 2 ;;
    --ct-exec=*) CT_EXEC="${1#*=}"; shift ;;
    --gate) GATE=1; shift ;;
    --state-dir) STATE_DIR="${2:?--state-dir needs a value}"; shift 2 ;;
    --state-dir=*) STATE_DIR="${1#*=}"; shift ;;
    --offer-password) OFFER_PASSWORD=1; shift ;;
    --quick) SELFTEST_QUICK=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
    esac
done

case "$CMD" in
up | down | status | env | selftest) ;;
-h | --help | help) usage; exit 0 ;;
"") usage >&2; exit 2 ;;
*) die "unknown command '$CMD': use up|down|status|env|selftest" ;;
esac

if ! [[ "$PORT" =~ ^[0-9]{1,5}$ ]] || ((PORT < 1 || PORT > 65535)); then die "invalid port '$PORT'"; fi
# Conservative POSIX-ish account name; '-' is fine for sudoers.d file names (a '.' is not).
[[ "$USER_NAME" =~ ^[a-z_][a-z0-9_-]{0,30}$ ]] || die "invalid account name '$USER_NAME'"
[[ "$USER_NAME" != root ]] || die "the agent account must not be root"
case "$PROFILE" in readonly | operator | full) ;; *) die "invalid profile '$PROFILE'" ;; esac
case "$OFFER_PASSWORD" in 1 | yes | true) OFFER_PASSWORD=1 ;; *) OFFER_PASSWORD=0 ;; esac
case "$GATE" in 1 | yes | true) GATE=1 ;; *) GATE=0 ;; esac
STATE_DIR="${STATE_DIR:-$TESTBED_ROOT/$USER_NAME-$PORT}"
[[ "$STATE_DIR" == /* && "$STATE_DIR" != / && "$STATE_DIR" != *..* ]] ||
    die "state dir must be an absolute path below / without '..': '$STATE_DIR'"
STATE_DIR="${STATE_DIR%/}"

# State-dir layout (everything this bed owns that is not at a fixed system path).
readonly BED_CONF="$STATE_DIR/bed.conf"              # key=value: who/what this bed is
readonly CLIENT_KEY="$STATE_DIR/id_ed25519"          # the agent's private key (0600)
readonly HOST_KEY="$STATE_DIR/ssh_host_ed25519_key"  # the sandbox sshd's host key
readonly KNOWN_HOSTS="$STATE_DIR/known_hosts"        # [127.0.0.1]:PORT <host key>
readonly SSHD_CONFIG="$STATE_DIR/sshd_config"
readonly SSHD_PIDFILE="$STATE_DIR/sshd.pid"
readonly SSHD_LOG="$STATE_DIR/sshd.log"
readonly SUDOERS_COPY="$STATE_DIR/sudoers"           # exactly what we installed
readonly SUDOERS_FILE="/etc/sudoers.d/$USER_NAME"
readonly BED_ID="$USER_NAME-$PORT"
readonly REGISTRY_ENTRY="$REGISTRY_DIR/$BED_ID"
# The gate (with --gate): everything in the state dir, so `down` removes it with the bed.
readonly GATE_BIN="$STATE_DIR/bin/pxagent"           # a root-owned copy the account can run
readonly GATE_DIR="$STATE_DIR/gate"                  # root 0755: the host policy and approvers
readonly GATE_POLICY="$GATE_DIR/policy.yaml"
readonly GATE_APPROVERS="$GATE_DIR/approvers"
readonly GATE_FREEZE="$GATE_DIR/freeze"              # the kill switch: absent unless a test freezes
readonly GATE_CONTROL="$STATE_DIR/gate-control"      # root 1777: approvers' signed freezes and thaws
readonly GATE_STATE="$STATE_DIR/gate-state"          # the account's, 0700: limits, statements
# The host's used approvals, shared by every gated bed as a host's are by every account:
# root's, sticky (1777), like the /var/lib/pxagent/.nonces `setup render` makes. Kept on `down`.
readonly GATE_NONCES="$TESTBED_ROOT/nonces"
readonly GATE_SOCKET="$STATE_DIR/gate-log.sock"      # stands in for /dev/log
readonly GATE_LOG="$STATE_DIR/gate-audit.log"        # what the listener received
readonly GATE_LOG_PID="$STATE_DIR/gate-log.pid"
readonly APPROVER_KEY="$STATE_DIR/approver_ed25519"  # a human approver's key, for tests
# The host's machine id, which every approval names. A machine without one (a container, a
# debootstrap root: no systemd) gets one for its beds here, never in /etc/machine-id: the bed must
# not change the machine's identity. The gate reads it with --machine-id (a root-owned file named
# by the forced command). Kept on `down`, like the nonces: it is the "host's".
readonly BED_MACHINE_ID="$TESTBED_ROOT/machine-id"
# The NFS servers every bed's admin names (`sudoers render --nfs-servers`, host policy
# `nfs_servers`): documentation addresses and a name, nothing that exists.
readonly BED_NFS_SERVERS="192.0.2.10,192.0.2.30,nas"
machine_id_of() { grep -sxE '[0-9a-f]{32}' "$1" | head -n 1; }
GATE_ID_OPT=""
if [[ -z "$(machine_id_of /etc/machine-id)" && -z "$(machine_id_of /var/lib/dbus/machine-id)" ]]; then
    GATE_ID_OPT=" --machine-id $BED_MACHINE_ID"
fi
readonly GATE_ID_OPT
GATE_CMD="$GATE_BIN gate --host-chain --policy $GATE_POLICY --approvers $GATE_APPROVERS --state-dir $GATE_STATE --nonce-dir $GATE_NONCES --freeze $GATE_FREEZE --control-dir $GATE_CONTROL --log-socket $GATE_SOCKET$GATE_ID_OPT"
readonly GATE_CMD
# The machine id the gate reads, whichever file holds it (empty when none does yet).
gate_machine_id() {
    local f
    [[ -z "$GATE_ID_OPT" ]] || { machine_id_of "$BED_MACHINE_ID" || true; return 0; }
    for f in /etc/machine-id /var/lib/dbus/machine-id; do
        [[ -z "$(machine_id_of "$f")" ]] || { machine_id_of "$f"; return 0; }
    done
}

need_root() { [[ $EUID -eq 0 ]] || die "'$CMD' must run as root (it manages an account, sudoers and sshd)"; }

# ---------------------------------------------------------------------------------------------
# Small helpers

# ssh as the agent with exactly the client settings pxagent uses: our key only, our known_hosts
# only, strict host key checking, never a prompt. -F /dev/null keeps root's ~/.ssh/config out.
agent_ssh() {
    timeout 30 ssh -F /dev/null -i "$CLIENT_KEY" -p "$PORT" \
        -o UserKnownHostsFile="$KNOWN_HOSTS" -o GlobalKnownHostsFile=/dev/null \
        -o StrictHostKeyChecking=yes -o BatchMode=yes -o IdentitiesOnly=yes \
        -o IdentityAgent=none -o ConnectTimeout=5 -o LogLevel=ERROR \
        "$USER_NAME@127.0.0.1" "$@"
}

# Does anything accept TCP connections on 127.0.0.1:PORT? (bash /dev/tcp: no ss/netcat needed)
port_answers() { timeout 2 bash -c ": </dev/tcp/127.0.0.1/$1" 2>/dev/null; }

# The cmdline of a pid with NULs as spaces (a daemonised sshd rewrites it to
# "sshd: /usr/sbin/sshd -f CONFIG -E LOG [listener] …", which still names our config).
pid_cmdline() { tr '\0' ' ' 2>/dev/null <"/proc/$1/cmdline" || true; }

# Does PID run on this machine as we see it: the same root directory and the same network
# namespace as this script? A container on this machine can hold another bed whose paths are
# the same as ours (its pid file, config and socket names match ours word for word) and whose
# processes are in our /proc; only these two tell its processes from ours.
OUR_ROOT="$(stat -L -c %d:%i /)"
OUR_NETNS="$(readlink /proc/self/ns/net)"
readonly OUR_ROOT OUR_NETNS
pid_is_here() {
    local root net
    root="$(stat -L -c %d:%i "/proc/$1/root" 2>/dev/null)" || return 1
    net="$(readlink "/proc/$1/ns/net" 2>/dev/null)" || return 1
    [[ "$root" == "$OUR_ROOT" && -n "$net" && "$net" == "$OUR_NETNS" ]]
}

# Is PID an sshd started with our config file, here (not in a container with the same path)?
pid_is_our_sshd() {
    local pid="$1" cmd
    [[ "$pid" =~ ^[0-9]+$ ]] || return 1
    cmd="$(pid_cmdline "$pid")"
    [[ "$cmd" == *sshd* && "$cmd " == *"-f $SSHD_CONFIG "* ]] && pid_is_here "$pid"
}

# The pid of our running sshd (from our pid file), or nothing.
our_sshd_pid() {
    local pid
    [[ -f "$SSHD_PIDFILE" ]] || return 0
    pid="$(tr -dc '0-9' <"$SSHD_PIDFILE")"
    if pid_is_our_sshd "$pid"; then echo "$pid"; fi
}

# Every process here whose cmdline names our sshd config (a listener whose pid file was lost).
stray_sshd_pids() {
    local d pid
    for d in /proc/[0-9]*; do
        pid="${d#/proc/}"
        if pid_is_our_sshd "$pid"; then echo "$pid"; fi
    done
}

# Stop one of OUR sshd processes: re-verify the cmdline right before each signal.
stop_sshd_pid() {
    local pid="$1" i
    pid_is_our_sshd "$pid" || return 0
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do
        pid_is_our_sshd "$pid" || return 0
        sleep 0.1
    done
    if pid_is_our_sshd "$pid"; then kill -KILL "$pid" 2>/dev/null || true; fi
    sleep 0.1
}

# Stop our sshd (pid file + strays naming our config); remove the pid file.
stop_our_sshd() {
    local pid stopped=1
    pid="$(our_sshd_pid)"
    if [[ -n "$pid" ]]; then
        stop_sshd_pid "$pid"
        say "stopped sshd pid $pid"
        stopped=0
    fi
    for pid in $(stray_sshd_pids); do
        stop_sshd_pid "$pid"
        say "stopped leftover sshd pid $pid (it named $SSHD_CONFIG)"
        stopped=0
    done
    if [[ -f "$SSHD_PIDFILE" ]]; then
        rm -f "$SSHD_PIDFILE"
        [[ $stopped -eq 0 ]] || say "removed stale pid file $SSHD_PIDFILE (its process is gone)"
    fi
    return $stopped
}

account_exists() { getent passwd "$USER_NAME" >/dev/null; }
account_is_ours() { [[ "$(getent passwd "$USER_NAME" | cut -d: -f5)" == "$ACCOUNT_MARK" ]]; }
# The processes of our account on this machine as we see it (a container's account of the
# same name or uid is another's).
account_pids_here() {
    local pid
    for pid in $(pgrep -u "$USER_NAME" 2>/dev/null); do
        if pid_is_here "$pid"; then echo "$pid"; fi
    done
}
account_home() { getent passwd "$USER_NAME" | cut -d: -f6; }

# `passwd -S` field 2: L = locked, NP = no password, P = usable password.
password_status() { passwd -S "$USER_NAME" 2>/dev/null | awk '{print $2}'; }

sim_link_is_ours() { [[ -L "$1" && "$(readlink "$1")" == "$SIM_BIN" ]]; }

sudoers_is_ours() {
    [[ -f "$SUDOERS_FILE" ]] || return 1
    if [[ -f "$SUDOERS_COPY" ]] && cmp -s "$SUDOERS_FILE" "$SUDOERS_COPY"; then return 0; fi
    account_exists && account_is_ours
}

# Registered beds other than this one whose state dir still exists (prunes stale entries).
other_beds() {
    local f dir
    [[ -d "$REGISTRY_DIR" ]] || return 0
    for f in "$REGISTRY_DIR"/*; do
        [[ -f "$f" ]] || continue
        [[ "$(basename "$f")" == "$BED_ID" ]] && continue
        dir="$(head -n1 "$f")"
        if [[ -f "$dir/bed.conf" ]]; then
            basename "$f"
        else
            rm -f "$f" # its state dir is gone: nothing of it can still be up
        fi
    done
}

# The other registered bed (if any) whose account is ours too: two beds must not share one.
bed_sharing_account() {
    local id dir
    for id in $(other_beds); do
        dir="$(head -n1 "$REGISTRY_DIR/$id")"
        if [[ "$(sed -n 's/^user=//p' "$dir/bed.conf" | head -n1)" == "$USER_NAME" ]]; then
            echo "$id"
            return 0
        fi
    done
}

conf_get() { if [[ -f "$BED_CONF" ]]; then sed -n "s/^$1=//p" "$BED_CONF" | head -n1; fi; }

# Looks like JSON from pvesh: one line, an object or an array (jq/python3 parse it when present).
is_json() {
    local s="$1" want="${2:-}"
    if command -v jq >/dev/null; then
        jq -e "${want:-.}" >/dev/null 2>&1 <<<"$s"
    elif command -v python3 >/dev/null; then
        python3 -c 'import json,sys; json.loads(sys.stdin.read())' <<<"$s" 2>/dev/null
    else
        [[ "$s" =~ ^[[:space:]]*[\{\[].*[\}\]][[:space:]]*$ ]]
    fi
}

take_lock() {
    mkdir -p "$TESTBED_ROOT"
    chmod 0755 "$TESTBED_ROOT"
    exec 9>"$LOCK_FILE"
    flock -w 120 9 || die "another testbed.sh up/down holds $LOCK_FILE for over 120 s"
}

# ---------------------------------------------------------------------------------------------
# Checks shared by `status`, `up` (is there anything to do?) and `selftest`

# Prints one line per check when $1 = verbose; returns 0 only if every check passes.
bed_checks() {
    local verbose="${1:-}" failed=0 pid out n path
    check() { # check OK|FAIL text
        [[ "$1" == OK ]] || failed=1
        if [[ -n "$verbose" ]]; then printf '  %-4s %s\n' "$([[ $1 == OK ]] && echo ok || echo FAIL)" "$2"; fi
    }
    if [[ -f "$BED_CONF" ]]; then check OK "state dir $STATE_DIR"; else check FAIL "state dir $STATE_DIR (no bed.conf)"; fi
    if account_exists && account_is_ours; then
        case "$(password_status)" in
        L) check OK "account $USER_NAME (created by testbed, password locked)" ;;
        *) check FAIL "account $USER_NAME: password is not locked (passwd -S: $(password_status))" ;;
        esac
    elif account_exists; then
        check FAIL "account $USER_NAME exists but was not created by testbed"
    else
        check FAIL "account $USER_NAME does not exist"
    fi
    if [[ -f "$SUDOERS_FILE" && -f "$SUDOERS_COPY" ]] && cmp -s "$SUDOERS_FILE" "$SUDOERS_COPY"; then
        if visudo -c >/dev/null 2>&1; then
            check OK "sudoers $SUDOERS_FILE (as rendered by pxagent, visudo -c OK)"
        else
            check FAIL "sudoers: visudo -c fails for the whole configuration"
        fi
    else
        check FAIL "sudoers $SUDOERS_FILE missing or not the file this bed installed"
    fi
    n=0
    for path in "${SIM_PATHS[@]}"; do sim_link_is_ours "$path" && n=$((n + 1)); done
    if [[ $n -eq ${#SIM_PATHS[@]} && -x "$SIM_BIN" ]]; then
        check OK "simulator at ${#SIM_PATHS[@]} PVE paths -> $SIM_BIN"
    else
        check FAIL "simulator: $n of ${#SIM_PATHS[@]} PVE paths link to $SIM_BIN"
    fi
    pid="$(our_sshd_pid)"
    if [[ -n "$pid" ]]; then check OK "sshd pid $pid on 127.0.0.1:$PORT ($SSHD_CONFIG)"; else check FAIL "sshd not running (pid file $SSHD_PIDFILE)"; fi
    if [[ -n "$pid" && -f "$CLIENT_KEY" ]] &&
        out="$(agent_ssh 'sudo -n /usr/bin/pvesh get /version --output-format json' 2>/dev/null)" &&
        is_json "$out"; then
        check OK "end to end: ssh + sudo -n /usr/bin/pvesh get /version -> $out"
    else
        check FAIL "end to end: ssh $USER_NAME@127.0.0.1 -p $PORT 'sudo -n /usr/bin/pvesh get /version --output-format json' gave no JSON"
    fi
    return $failed
}

# ---------------------------------------------------------------------------------------------
# up

# Packages: only from Debian's repositories, only when missing. A policy-rc.d that exits 101 keeps
# the package's own sshd from being started on port 22 (no init system here anyway).
ensure_packages() {
    # Nothing to do when every tool is there (also on a machine without dpkg).
    if [[ -x "$SSHD" ]] && command -v ssh >/dev/null && command -v ssh-keygen >/dev/null &&
        command -v sudo >/dev/null && command -v visudo >/dev/null && command -v pkill >/dev/null &&
        command -v flock >/dev/null; then
        return 0
    fi
    deps_apt "${DEPS_BED[@]}" || die "could not install ${DEPS_BED[*]} (see above)"
    if [[ ! -x "$SSHD" ]] || ! command -v sudo >/dev/null || ! command -v visudo >/dev/null; then
        die "packages installed but sshd/sudo/visudo still missing"
    fi
}

# PXAGENT_BIN / PVE_SIM_BIN, or a release build of both in this repository.
resolve_binaries() {
    if [[ -z "${PXAGENT_BIN:-}" || -z "${PVE_SIM_BIN:-}" ]]; then
        deps_rust
        deps_apt "${DEPS_BUILD[@]}" || die "could not install ${DEPS_BUILD[*]} (see above)"
        say "building pxagent, its helper and pve-sim (cargo build --locked --release)"
        (cd "$REPO_DIR" && cargo build --locked --release -p pxagent -p pxagent-helper -p pve-sim) ||
            die "cargo build --locked --release -p pxagent -p pxagent-helper -p pve-sim failed"
        local target="${CARGO_TARGET_DIR:-$REPO_DIR/target}"
        PXAGENT_BIN="${PXAGENT_BIN:-$target/release/pxagent}"
        PVE_SIM_BIN="${PVE_SIM_BIN:-$target/release/pve-sim}"
    fi
    PXAGENT_BIN="$(realpath "$PXAGENT_BIN" 2>/dev/null || echo "$PXAGENT_BIN")"
    PVE_SIM_BIN="$(realpath "$PVE_SIM_BIN" 2>/dev/null || echo "$PVE_SIM_BIN")"
    [[ -x "$PXAGENT_BIN" ]] || die "pxagent binary not found or not executable: $PXAGENT_BIN"
    [[ -x "$PVE_SIM_BIN" ]] || die "pve-sim binary not found or not executable: $PVE_SIM_BIN"
    # The helper is built beside pxagent (cargo build -p pxagent-helper).
    PXAGENT_HELPER_BIN="${PXAGENT_HELPER_BIN:-$(dirname "$PXAGENT_BIN")/pxagent-helper}"
    [[ -x "$PXAGENT_HELPER_BIN" ]] ||
        die "pxagent-helper not found beside pxagent: $PXAGENT_HELPER_BIN (cargo build --release -p pxagent-helper)"
}

# Everything that could make `up` fail for reasons outside this bed, checked before any change.
precheck() {
    local path
    if account_exists && ! account_is_ours; then
        die "account '$USER_NAME' already exists and was not created by testbed.sh; pick another --user"
    fi
    local sharer
    sharer="$(bed_sharing_account)"
    [[ -z "$sharer" ]] || die "account '$USER_NAME' belongs to bed $sharer; beds side by side need different --user and --port"
    for path in "${SIM_PATHS[@]}"; do
        if [[ -e "$path" || -L "$path" ]] && ! sim_link_is_ours "$path"; then
            die "$path exists and is not the pve-sim link (a real Proxmox tool?): refusing to touch it"
        fi
    done
    if [[ -e "$STATE_DIR" && ! -f "$BED_CONF" ]] && [[ -n "$(ls -A "$STATE_DIR" 2>/dev/null)" ]]; then
        die "state dir $STATE_DIR exists, is not empty and is not a test bed's: refusing to use it"
    fi
    if [[ -f "$BED_CONF" && "$(conf_get user)" != "$USER_NAME" ]]; then
        die "state dir $STATE_DIR belongs to the bed of account '$(conf_get user)'"
    fi
    if [[ -f "$SUDOERS_FILE" ]] && ! sudoers_is_ours; then
        die "$SUDOERS_FILE exists and was not installed by testbed.sh: refusing to replace it"
    fi
    if [[ -z "$(our_sshd_pid)" && -z "$(stray_sshd_pids)" ]] && port_answers "$PORT"; then
        die "port $PORT on 127.0.0.1 is already in use by another process (not this bed's sshd); choose another --port"
    fi
}

CHANGED=0
changed() { CHANGED=1; say "$*"; }

write_bed_conf() {
    local tmp="$BED_CONF.tmp"
    {
        echo "# pxagent test bed (scripts/testbed.sh) — do not edit; 'testbed.sh down' removes it"
        echo "user=$USER_NAME"
        echo "port=$PORT"
        echo "profile=$PROFILE"
        echo "vmids=$VMIDS"
        echo "ctids=$CTIDS"
        echo "ct_exec=$CT_EXEC"
        echo "gate=$GATE"
        echo "offer_password=$OFFER_PASSWORD"
        echo "pxagent_bin=$PXAGENT_BIN"
        echo "pve_sim_bin=$PVE_SIM_BIN"
    } >"$tmp"
    if [[ -f "$BED_CONF" ]] && cmp -s "$tmp" "$BED_CONF"; then rm -f "$tmp"; else mv -f "$tmp" "$BED_CONF"; fi
}

ensure_state_dir() {
    [[ -d "$STATE_DIR" ]] || changed "created state dir $STATE_DIR"
    mkdir -p "$STATE_DIR" "$REGISTRY_DIR"
    chmod 0755 "$STATE_DIR"
    write_bed_conf
    echo "$STATE_DIR" >"$REGISTRY_ENTRY"
}

ensure_account() {
    if ! account_exists; then
        # Own user group, no supplementary groups; the GECOS marker is how `down` knows it is ours.
        useradd --create-home --shell /bin/bash --comment "$ACCOUNT_MARK" "$USER_NAME"
        changed "created account $USER_NAME"
    fi
    [[ "$(getent passwd "$USER_NAME" | cut -d: -f7)" == /bin/bash ]] || usermod -s /bin/bash "$USER_NAME"
    # '!*': locked, and even `usermod -U` would only yield '*', which matches no password. Key login
    # still works: with UsePAM yes sshd leaves the account check to PAM, which only looks at expiry
    # (a locked password stops neither key login nor NOPASSWD sudo).
    if [[ "$(getent shadow "$USER_NAME" | cut -d: -f2)" != '!*' ]]; then
        usermod -p '!*' "$USER_NAME"
    fi
    [[ "$(password_status)" == L ]] || die "passwd -S does not show $USER_NAME as locked"
    local extra
    extra="$(id -Gn "$USER_NAME" | tr ' ' '\n' | grep -vx "$(id -gn "$USER_NAME")" || true)"
    [[ -z "$extra" ]] || die "account $USER_NAME is in supplementary groups: $extra"
}

ensure_keys() {
    if [[ ! -f "$CLIENT_KEY" || ! -f "$CLIENT_KEY.pub" ]]; then
        rm -f "$CLIENT_KEY" "$CLIENT_KEY.pub"
        ssh-keygen -q -t ed25519 -N '' -C "pxagent-testbed $BED_ID" -f "$CLIENT_KEY"
        changed "generated client key $CLIENT_KEY"
    fi
    chmod 0600 "$CLIENT_KEY"
    if [[ ! -f "$HOST_KEY" || ! -f "$HOST_KEY.pub" ]]; then
        rm -f "$HOST_KEY" "$HOST_KEY.pub"
        ssh-keygen -q -t ed25519 -N '' -C "pxagent-testbed-host $BED_ID" -f "$HOST_KEY"
        changed "generated sshd host key $HOST_KEY"
    fi
    chmod 0600 "$HOST_KEY"
    # known_hosts straight from the host public key: no ssh-keyscan, nothing learnt over the wire.
    local kh
    kh="[127.0.0.1]:$PORT $(awk '{print $1, $2}' "$HOST_KEY.pub")"
    [[ -f "$KNOWN_HOSTS" && "$(cat "$KNOWN_HOSTS")" == "$kh" ]] || { echo "$kh" >"$KNOWN_HOSTS"; changed "wrote $KNOWN_HOSTS"; }
    chmod 0644 "$KNOWN_HOSTS"

    local home ssh_dir ak
    home="$(account_home)"
    ssh_dir="$home/.ssh"
    ak="$ssh_dir/authorized_keys"
    mkdir -p "$ssh_dir"
    local want
    want="$(cat "$CLIENT_KEY.pub")"
    # Gated: the key may only ever run the gate (sshd's ForceCommand says the same).
    [[ $GATE -eq 0 ]] || want="restrict,command=\"$GATE_CMD\" $want"
    if [[ ! -f "$ak" || "$(cat "$ak")" != "$want" ]]; then
        printf '%s\n' "$want" >"$ak"
        changed "authorized the client key in $ak$([[ $GATE -eq 0 ]] || echo ' (forced command: the gate)')"
    fi
    # sshd's StrictModes refuses keys in group/world-writable places.
    chown -R "$USER_NAME:" "$ssh_dir"
    chmod 0700 "$ssh_dir"
    chmod 0600 "$ak"
    chmod go-w "$home"
}

ensure_sudoers() {
    local rendered args=(sudoers render --user "$USER_NAME" --profile "$PROFILE")
    [[ -z "$VMIDS" ]] || args+=(--vmids "$VMIDS")
    [[ -z "$CTIDS" ]] || args+=(--ctids "$CTIDS")
    [[ -z "$CT_EXEC" ]] || args+=(--ct-exec "$CT_EXEC")
    # The NFS servers a bed's admin names (the simulator's shares; the tests add storages there).
    args+=(--nfs-servers "$BED_NFS_SERVERS")
    rendered="$(mktemp "$STATE_DIR/sudoers.rendered.XXXXXX")"
    if ! "$PXAGENT_BIN" "${args[@]}" >"$rendered"; then
        rm -f "$rendered"
        die "'pxagent ${args[*]}' failed"
    fi
    [[ -s "$rendered" ]] || { rm -f "$rendered"; die "'pxagent ${args[*]}' printed nothing"; }
    chmod 0644 "$rendered"
    if [[ -f "$SUDOERS_FILE" ]] && cmp -s "$rendered" "$SUDOERS_FILE"; then
        mv -f "$rendered" "$SUDOERS_COPY"
        return 0
    fi
    # The safe install: sudo ignores names containing a dot, so a half-written or invalid temp file
    # is never live; validate it alone, then the whole configuration.
    local tmp
    tmp="$(mktemp "/etc/sudoers.d/$USER_NAME.new.XXXXXX")"
    cat "$rendered" >"$tmp"
    local check
    if ! check="$(visudo -cf "$tmp" 2>&1)"; then
        rm -f "$tmp" "$rendered"
        die "the sudoers file rendered by pxagent does not pass visudo -cf:
$check"
    fi
    chown root:root "$tmp"
    chmod 0440 "$tmp"
    mv -f "$tmp" "$SUDOERS_FILE"
    mv -f "$rendered" "$SUDOERS_COPY"
    if ! check="$(visudo -c 2>&1)"; then
        rm -f "$SUDOERS_FILE"
        die "visudo -c fails for the whole configuration with $SUDOERS_FILE installed (removed it again):
$check"
    fi
    changed "installed $SUDOERS_FILE (pxagent sudoers render --profile $PROFILE; visudo -c OK)"
    # Where sudo writes I/O logs: create the fixed part of iolog_dir (sudo makes the rest).
    local iodir
    iodir="$(grep -o 'iolog_dir=[^ ,]*' "$SUDOERS_FILE" | head -n1 | cut -d= -f2 | tr -d '"')"
    iodir="${iodir%%%*}"
    iodir="${iodir:-/var/log/sudo-io/}"
    if [[ "$iodir" == /* && ! -d "$iodir" ]]; then
        mkdir -p "$iodir"
        chmod 0700 "$iodir"
    fi
}

SIM_INSTALLED=0
ensure_sim() {
    local path
    mkdir -p "$SIM_DIR"
    if [[ ! -x "$SIM_BIN" ]] || ! cmp -s "$PVE_SIM_BIN" "$SIM_BIN"; then
        # Copy then rename: a running pve-sim of another bed never sees a half-written binary.
        install -m 0755 "$PVE_SIM_BIN" "$SIM_BIN.new"
        mv -f "$SIM_BIN.new" "$SIM_BIN"
        SIM_INSTALLED=1
        changed "installed the simulator at $SIM_BIN"
    fi
    if [[ ! -x "$HELPER_BIN" ]] || ! cmp -s "$PXAGENT_HELPER_BIN" "$HELPER_BIN"; then
        [[ -d "$HELPER_DIR" ]] || touch "$SIM_DIR/created-helper-dir"
        install -d -o root -g root -m 0755 "$HELPER_DIR"
        install -o root -g root -m 0755 "$PXAGENT_HELPER_BIN" "$HELPER_BIN.new"
        mv -f "$HELPER_BIN.new" "$HELPER_BIN"
        changed "installed pxagent's helper at $HELPER_BIN"
    fi
    if [[ ! -d "$ISO_DIR" ]]; then
        [[ -e /var/lib/vz ]] || touch "$SIM_DIR/created-var-lib-vz"
        install -d -o root -g root -m 0755 /var/lib/vz /var/lib/vz/template "$ISO_DIR"
        changed "created $ISO_DIR (the simulator's local storage)"
    fi
    # Only a machine without a network configuration of its own: no /etc/network/interfaces
    # (a directory left by other packages is fine; it stays).
    if [[ ! -e "$NET_DIR/interfaces" && ! -e "$NET_DIR/interfaces.new" && ! -e "$NET_MARKER" ]]; then
        [[ -e "$NET_DIR" ]] || touch "$SIM_DIR/created-etc-network-dir"
        touch "$SIM_DIR/created-etc-network"
        install -d -o root -g root -m 0755 "$NET_DIR"
        touch "$NET_MARKER"
        SIM_INSTALLED=1
        changed "gave $NET_DIR/interfaces to the simulator's local node"
    fi
    for path in "${SIM_PATHS[@]}"; do
        if ! sim_link_is_ours "$path"; then
            # precheck() made sure nothing foreign is at $path; the binary decides its behaviour
            # from argv[0]'s basename, which for a symlink is the link's name.
            ln -s "$SIM_BIN" "$path"
            SIM_INSTALLED=1
            changed "linked $path -> $SIM_BIN"
        fi
    done
}

write_sshd_config() {
    local pw=no auth=publickey
    if [[ $OFFER_PASSWORD -eq 1 ]]; then
        # Offer password/keyboard-interactive (the password itself stays unusable) so a test can
        # prove that the client never answers such an offer.
        pw=yes
        auth="publickey password keyboard-interactive"
    fi
    cat <<EOF
# sshd config of the pxagent test bed $BED_ID — written by scripts/testbed.sh; do not edit.
# Standalone (no Include of /etc/ssh/sshd_config.d): nothing from the system sshd leaks in.
ListenAddress 127.0.0.1
Port $PORT
HostKey $HOST_KEY
PidFile $SSHD_PIDFILE
AuthorizedKeysFile .ssh/authorized_keys
StrictModes yes
UsePAM yes
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin no
PermitEmptyPasswords no
AllowUsers $USER_NAME
LogLevel VERBOSE
PrintMotd no
# OpenSSH's default; pxagent stays at or below 8 channels per connection.
MaxSessions 10
# Tests open a dozen connections at once (host rate limits); OpenSSH's default 10:30:100 would
# drop some of them before they authenticate.
MaxStartups 100:30:200

Match User $USER_NAME
    AuthenticationMethods $auth
    PasswordAuthentication $pw
    KbdInteractiveAuthentication $pw
    AllowTcpForwarding no
    AllowStreamLocalForwarding no
    AllowAgentForwarding no
    X11Forwarding no
    PermitTunnel no
    PermitTTY no
    PermitUserRC no
    GatewayPorts no
EOF
    [[ $GATE -eq 0 ]] || printf '    ForceCommand %s\n' "$GATE_CMD"
}

# The syslog stand-in: a datagram socket anyone may write to (like /dev/log), each record one
# line of gate-audit.log. Identified by its cmdline naming our socket.
readonly LISTENER_PY='import os, socket, sys
path, out = sys.argv[1], sys.argv[2]
if os.path.exists(path):
    os.unlink(path)
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(path)
os.chmod(path, 0o666)
with open(out, "ab", buffering=0) as f:
    while True:
        f.write(s.recv(65536).rstrip(b"\n") + b"\n")'
listener_pid() {
    local pid
    [[ -f "$GATE_LOG_PID" ]] || return 0
    pid="$(tr -dc '0-9' <"$GATE_LOG_PID")"
    [[ -n "$pid" && "$(pid_cmdline "$pid") " == *" $GATE_SOCKET "* ]] && pid_is_here "$pid" && echo "$pid"
    return 0
}
stop_listener() {
    local pid
    pid="$(listener_pid)"
    [[ -z "$pid" ]] || { kill -TERM "$pid" 2>/dev/null || true; say "stopped the gate's syslog listener pid $pid"; }
    rm -f "$GATE_LOG_PID" "$GATE_SOCKET"
}

ensure_gate() {
    if [[ $GATE -eq 0 ]]; then
        if [[ -d "$GATE_DIR" ]]; then
            stop_listener
            rm -rf "$GATE_DIR" "$GATE_STATE" "$STATE_DIR/bin"
            changed "removed the gate (the bed is ungated now)"
        fi
        return 0
    fi
    command -v python3 >/dev/null || deps_apt python3 || die "could not install python3 (the gate's syslog listener)"
    mkdir -p "$STATE_DIR/bin" "$GATE_DIR"
    chmod 0755 "$STATE_DIR/bin" "$GATE_DIR"
    if [[ ! -x "$GATE_BIN" ]] || ! cmp -s "$PXAGENT_BIN" "$GATE_BIN"; then
        install -m 0755 -o root -g root "$PXAGENT_BIN" "$GATE_BIN.new"
        mv -f "$GATE_BIN.new" "$GATE_BIN"
        changed "installed the gate binary $GATE_BIN"
    fi
    if [[ ! -f "$GATE_POLICY" ]]; then
        printf '%s\n' "# Host policy of test bed $BED_ID (tests rewrite it; the gate rereads it per request)." \
            "nfs_servers: [${BED_NFS_SERVERS//,/, }]" "ops: {}" >"$GATE_POLICY"
        changed "wrote the host policy $GATE_POLICY (allows what sudoers allows)"
    fi
    if [[ ! -f "$APPROVER_KEY" ]]; then
        ssh-keygen -q -t ed25519 -N '' -C "pxagent-testbed approver $BED_ID" -f "$APPROVER_KEY"
        changed "generated the approver key $APPROVER_KEY"
    fi
    [[ -f "$GATE_APPROVERS" ]] || { cp "$APPROVER_KEY.pub" "$GATE_APPROVERS"; changed "wrote $GATE_APPROVERS"; }
    chown root:root "$GATE_POLICY" "$GATE_APPROVERS"
    chmod 0644 "$GATE_POLICY" "$GATE_APPROVERS"
    mkdir -p "$GATE_STATE"
    chown "$USER_NAME:" "$GATE_STATE"
    chmod 0700 "$GATE_STATE"
    install -d -o root -g root -m 1777 "$GATE_NONCES"
    chmod 1777 "$GATE_NONCES"
    install -d -o root -g root -m 1777 "$GATE_CONTROL"
    chmod 1777 "$GATE_CONTROL"
    if [[ -n "$GATE_ID_OPT" && -z "$(machine_id_of "$BED_MACHINE_ID")" ]]; then
        od -An -tx1 -N16 /dev/urandom | tr -d ' \n' >"$BED_MACHINE_ID.new"
        echo >>"$BED_MACHINE_ID.new"
        chown root:root "$BED_MACHINE_ID.new"
        chmod 0444 "$BED_MACHINE_ID.new"
        mv -f "$BED_MACHINE_ID.new" "$BED_MACHINE_ID"
        changed "this machine has no /etc/machine-id: the beds' gate reads $BED_MACHINE_ID ($(machine_id_of "$BED_MACHINE_ID")) instead; the machine's own identity is unchanged"
    fi
    if [[ -z "$(listener_pid)" ]]; then
        rm -f "$GATE_SOCKET"
        touch "$GATE_LOG"
        # 9>&-: the listener must not hold the beds' lock (fd 9) for its whole life.
        setsid python3 -c "$LISTENER_PY" "$GATE_SOCKET" "$GATE_LOG" </dev/null >/dev/null 2>&1 9>&- &
        echo $! >"$GATE_LOG_PID"
        local i
        for ((i = 0; i < 50; i++)); do [[ -S "$GATE_SOCKET" ]] && break; sleep 0.1; done
        [[ -S "$GATE_SOCKET" ]] || die "the gate's syslog listener did not create $GATE_SOCKET"
        changed "started the gate's syslog listener ($GATE_SOCKET -> $GATE_LOG)"
    fi
}

start_sshd() {
    rm -f "$SSHD_PIDFILE"
    # sshd binds before it daemonises, so a taken port fails right here.
    if ! "$SSHD" -f "$SSHD_CONFIG" -E "$SSHD_LOG"; then
        die "sshd failed to start; last lines of $SSHD_LOG:
$(tail -n 5 "$SSHD_LOG" 2>/dev/null)"
    fi
    local i
    for ((i = 0; i < 100; i++)); do
        [[ -n "$(our_sshd_pid)" ]] && port_answers "$PORT" && break
        sleep 0.1
    done
    [[ -n "$(our_sshd_pid)" ]] || die "sshd did not write its pid file $SSHD_PIDFILE within 10 s"
    port_answers "$PORT" || die "sshd is running but 127.0.0.1:$PORT does not answer within 10 s"
    changed "started sshd pid $(our_sshd_pid) on 127.0.0.1:$PORT"
}

e2e_probe() {
    local out err
    err="$(mktemp)"
    if ! out="$(agent_ssh 'sudo -n /usr/bin/pvesh get /version --output-format json' 2>"$err")" ||
        ! is_json "$out"; then
        local msg
        msg="$(tr '\n' ' ' <"$err")"
        rm -f "$err"
        echo "stdout: ${out:-<empty>}; stderr: ${msg:-<empty>}"
        return 1
    fi
    rm -f "$err"
    echo "$out"
}

ensure_sshd() {
    local desired pid
    desired="$(write_sshd_config)"
    pid="$(our_sshd_pid)"
    if [[ -n "$pid" && -f "$SSHD_CONFIG" && "$(cat "$SSHD_CONFIG")" == "$desired" ]] && e2e_probe >/dev/null; then
        return 0 # running with this exact config and healthy: keep it
    fi
    if stop_our_sshd; then CHANGED=1; fi
    if port_answers "$PORT"; then
        die "port $PORT on 127.0.0.1 is already in use by another process (not this bed's sshd); choose another --port"
    fi
    printf '%s\n' "$desired" >"$SSHD_CONFIG"
    chmod 0644 "$SSHD_CONFIG"
    # Privilege separation directory, normally made by the init system (none runs here).
    mkdir -p /run/sshd
    chmod 0755 /run/sshd
    local check
    check="$("$SSHD" -t -f "$SSHD_CONFIG" 2>&1)" || die "sshd -t rejects $SSHD_CONFIG: $check"
    start_sshd
}

UP_TOUCHED=0
on_up_exit() {
    local rc=$?
    if [[ $rc -ne 0 && $UP_TOUCHED -eq 1 ]]; then
        say "up failed (exit $rc): tearing this bed down so that no half-up bed remains"
        do_down quiet || say "teardown after the failed up also failed: run 'scripts/testbed.sh down' (same options)"
    fi
    exit $rc
}

do_up() {
    need_root
    take_lock
    ensure_packages
    resolve_binaries
    precheck
    UP_TOUCHED=1
    trap on_up_exit EXIT
    # A signal must also end in the teardown (bash skips the EXIT trap when a signal kills it).
    trap 'exit 129' HUP
    trap 'exit 130' INT
    trap 'exit 143' TERM
    local others
    others="$(other_beds)"
    ensure_state_dir
    ensure_account
    ensure_keys
    ensure_sudoers
    ensure_gate
    ensure_sim
    local sshd_before
    sshd_before="$(our_sshd_pid)"
    ensure_sshd
    # Fresh simulator state when the simulator was (re)installed or this bed's sshd was (re)started,
    # unless another bed shares the simulator right now (its tests must not see a reset).
    if [[ ! -f "$SIM_STATE_DIR/state.json" ]] ||
        { [[ -z "$others" ]] && { [[ $SIM_INSTALLED -eq 1 ]] || [[ "$sshd_before" != "$(our_sshd_pid)" ]]; }; }; then
        "$SIM_BIN" reset >/dev/null || die "'$SIM_BIN reset' failed"
        changed "reset the simulator state in $SIM_STATE_DIR"
    fi
    local out
    out="$(e2e_probe)" || die "end-to-end check failed: ssh $USER_NAME@127.0.0.1 -p $PORT 'sudo -n /usr/bin/pvesh get /version --output-format json' did not print JSON ($out). Last lines of $SSHD_LOG (removed with the bed):
$(tail -n 8 "$SSHD_LOG" 2>/dev/null)"
    trap - EXIT HUP INT TERM
    if [[ $CHANGED -eq 0 ]]; then
        say "bed $BED_ID already up and healthy; nothing to do"
    else
        say "bed $BED_ID is up: ssh -i $CLIENT_KEY -p $PORT -o UserKnownHostsFile=$KNOWN_HOSTS $USER_NAME@127.0.0.1"
    fi
    say "end to end: sudo -n /usr/bin/pvesh get /version -> $out"
    say "env for pxagent: eval \"\$($SCRIPT_PATH env$(env_opts))\""
}

# The options that name this bed, for messages the user may copy.
env_opts() {
    [[ "$PORT" == 2222 ]] || printf ' --port %s' "$PORT"
    [[ "$USER_NAME" == zen-agent ]] || printf ' --user %s' "$USER_NAME"
    [[ "$STATE_DIR" == "$TESTBED_ROOT/$USER_NAME-$PORT" ]] || printf ' --state-dir %q' "$STATE_DIR"
}

# ---------------------------------------------------------------------------------------------
# down

do_down() {
    local quiet="${1:-}" did=0 path sudoers_ours=0 sharer
    sharer="$(bed_sharing_account)"
    # Decide before the account goes: a sudoers file named after our account is ours.
    if [[ -z "$sharer" ]] && sudoers_is_ours; then sudoers_ours=1; fi
    # sshd first, so no new session can start while the rest goes away.
    if stop_our_sshd; then did=1; fi
    if [[ -n "$(listener_pid)" ]]; then stop_listener; did=1; fi
    if [[ -n "$sharer" ]]; then
        say "account $USER_NAME and $SUDOERS_FILE belong to bed $sharer: left alone"
    elif account_exists; then
        if account_is_ours; then
            # Only processes owned by this account (its sessions), here; never by program name.
            local i pids=()
            mapfile -t pids < <(account_pids_here)
            ((${#pids[@]} == 0)) || kill -TERM "${pids[@]}" 2>/dev/null || true
            for ((i = 0; i < 30; i++)); do
                [[ -n "$(account_pids_here)" ]] || break
                sleep 0.1
            done
            mapfile -t pids < <(account_pids_here)
            ((${#pids[@]} == 0)) || kill -KILL "${pids[@]}" 2>/dev/null || true
            sleep 0.1
            userdel -r "$USER_NAME" 2>/dev/null || userdel -f -r "$USER_NAME" ||
                die "userdel -r $USER_NAME failed"
            say "removed account $USER_NAME and its home"
            did=1
        else
            say "account $USER_NAME exists but was not created by testbed.sh: left alone"
        fi
    fi
    if [[ -f "$SUDOERS_FILE" && -z "$sharer" ]]; then
        if [[ $sudoers_ours -eq 1 ]]; then
            rm -f "$SUDOERS_FILE"
            say "removed $SUDOERS_FILE"
            did=1
        else
            say "$SUDOERS_FILE was not installed by testbed.sh: left alone"
        fi
    fi
    # Leftover temp files of an interrupted install (inert: sudo skips dotted names).
    rm -f "/etc/sudoers.d/$USER_NAME.new."*
    rm -f "$REGISTRY_ENTRY"
    if [[ -z "$(other_beds)" ]]; then
        for path in "${SIM_PATHS[@]}"; do
            if sim_link_is_ours "$path"; then rm -f "$path"; did=1; fi
        done
        if [[ -f "$SIM_DIR/created-var-lib-vz" ]]; then rm -rf /var/lib/vz; did=1; say "removed /var/lib/vz (created for the simulator)"; fi
        if [[ -f "$SIM_DIR/created-etc-network" && -f "$NET_MARKER" ]]; then
            rm -f "$NET_DIR/interfaces" "$NET_DIR/interfaces.new" "$NET_DIR/interfaces.pxagent-tmp" "$NET_MARKER"
            if [[ -f "$SIM_DIR/created-etc-network-dir" ]]; then rmdir "$NET_DIR" 2>/dev/null || true; fi
            rm -rf "$HELPER_STATE"; did=1; say "removed the simulator's $NET_DIR/interfaces and $HELPER_STATE"
            if [[ -f $HOST_CHAIN_DIR/gate.jsonl ]]; then
                rm -f "$HOST_CHAIN_DIR/gate.jsonl"; rmdir "$HOST_CHAIN_DIR" 2>/dev/null || true
                say "removed the beds' host audit chain $HOST_CHAIN_DIR/gate.jsonl (its key was in $HELPER_STATE)"
            fi
        fi
        if [[ -f "$SIM_DIR/created-helper-dir" ]]; then rm -rf "$HELPER_DIR"; did=1; say "removed pxagent's helper ($HELPER_DIR)"; fi
        if [[ -d "$SIM_DIR" ]]; then rm -rf "$SIM_DIR"; did=1; say "removed the simulator ($SIM_DIR and its links)"; fi
        if [[ -d "$SIM_STATE_DIR" ]]; then rm -rf "$SIM_STATE_DIR"; did=1; say "removed simulator state $SIM_STATE_DIR"; fi
    elif [[ -z "$quiet" ]]; then
        say "simulator kept: still used by bed(s) $(other_beds | tr '\n' ' ')"
    fi
    if [[ -d "$STATE_DIR" ]]; then
        if [[ -f "$BED_CONF" || -z "$(ls -A "$STATE_DIR")" || "$STATE_DIR" == "$TESTBED_ROOT/$BED_ID" ]]; then
            rm -rf "$STATE_DIR"
            say "removed state dir $STATE_DIR"
            did=1
        else
            say "state dir $STATE_DIR is not a test bed's: left alone"
        fi
    fi
    if [[ -f /etc/sudoers ]] && ! visudo -c >/dev/null 2>&1; then
        say "warning: visudo -c fails for the remaining sudo configuration (not caused by this bed's file, which is gone)"
    fi
    if [[ $did -eq 0 ]]; then say "bed $BED_ID already down; nothing to do"; else say "bed $BED_ID is down"; fi
}

# ---------------------------------------------------------------------------------------------
# status / env

do_status() {
    need_root
    local profile=""
    [[ ! -f "$BED_CONF" ]] || profile=", profile $(conf_get profile)"
    echo "bed $BED_ID: $USER_NAME@127.0.0.1:$PORT (state $STATE_DIR$profile)"
    if bed_checks verbose; then
        echo "status: up"
        return 0
    fi
    echo "status: down or unhealthy"
    return 1
}

do_env() {
    [[ -f "$BED_CONF" ]] || say "warning: bed $BED_ID is not up (no $BED_CONF); run: $SCRIPT_PATH up$(env_opts)"
    printf 'export PXAGENT_HOST=127.0.0.1\n'
    printf 'export PXAGENT_PORT=%q\n' "$PORT"
    printf 'export PXAGENT_USER=%q\n' "$USER_NAME"
    printf 'export PXAGENT_IDENTITY=%q\n' "$CLIENT_KEY"
    printf 'export PXAGENT_KNOWN_HOSTS=%q\n' "$KNOWN_HOSTS"
    printf 'export PXAGENT_TESTBED_STATE=%q\n' "$STATE_DIR"
    printf 'export PXAGENT_TESTBED_SSHD_LOG=%q\n' "$SSHD_LOG"
    printf 'export PXAGENT_TESTBED_SSHD_PIDFILE=%q\n' "$SSHD_PIDFILE"
    printf 'export PXAGENT_TESTBED_SSHD_CONFIG=%q\n' "$SSHD_CONFIG"
    printf 'export PXAGENT_TESTBED_SUDOERS=%q\n' "$SUDOERS_FILE"
    printf 'export PXAGENT_TESTBED_SIM_DIR=%q\n' "$SIM_STATE_DIR"
    if [[ "$(conf_get gate)" == 1 || $GATE -eq 1 ]]; then
        printf 'export PXAGENT_TESTBED_GATE_POLICY=%q\n' "$GATE_POLICY"
        printf 'export PXAGENT_TESTBED_APPROVERS=%q\n' "$GATE_APPROVERS"
        printf 'export PXAGENT_TESTBED_APPROVER_KEY=%q\n' "$APPROVER_KEY"
        printf 'export PXAGENT_TESTBED_GATE_LOG=%q\n' "$GATE_LOG"
        printf 'export PXAGENT_TESTBED_GATE_STATE=%q\n' "$GATE_STATE"
        printf 'export PXAGENT_TESTBED_GATE_NONCES=%q\n' "$GATE_NONCES"
        printf 'export PXAGENT_TESTBED_FREEZE=%q\n' "$GATE_FREEZE"
        printf 'export PXAGENT_TESTBED_GATE_CONTROL=%q\n' "$GATE_CONTROL"
        printf 'export PXAGENT_TESTBED_MACHINE_ID=%q\n' "$(gate_machine_id)"
    fi
}

# ---------------------------------------------------------------------------------------------
# selftest: the bed's acceptance checks, against the live bed

# A root directory for a process of "another machine": bash and sleep with their libraries.
make_decoy_root() {
    local r="$1" f lib
    for f in /bin/bash /bin/sleep; do
        install -D "$(readlink -f "$f")" "$r$f"
        for lib in $(ldd "$f" | grep -o '/[^ ]*'); do
            [[ -e "$r$lib" ]] || install -D "$lib" "$r$lib"
        done
    done
}

# Does PID run (a zombie, ended but not yet reaped by us, does not)?
pid_alive() {
    local stat
    read -r stat 2>/dev/null <"/proc/$1/stat" || return 1
    [[ "${stat##*) }" != [ZX]* ]]
}

# Wait (up to 10 s) until PID's cmdline names our sshd config: the process is set up.
wait_named() {
    local i
    for ((i = 0; i < 100; i++)); do
        [[ "$(pid_cmdline "$1") " == *"-f $SSHD_CONFIG "* ]] && return 0
        sleep 0.1
    done
    return 1
}

do_selftest() {
    need_root
    local failures=0 out err rc
    pass() { printf 'selftest: ok   %s\n' "$*"; }
    fail() { printf 'selftest: FAIL %s\n' "$*"; failures=$((failures + 1)); }
    err="$(mktemp)"

    if bed_checks >/dev/null; then pass "bed $BED_ID is up and healthy"; else
        fail "bed $BED_ID is not up and healthy (run: $SCRIPT_PATH status$(env_opts))"
        rm -f "$err"
        return 1
    fi

    # 1. With sudo: the simulated cluster as JSON.
    rc=0
    out="$(agent_ssh 'sudo -n /usr/bin/pvesh get /cluster/resources --output-format json' 2>"$err")" || rc=$?
    if [[ $rc -eq 0 ]] && is_json "$out" 'type == "array" and length > 0' && [[ "$out" == *'"node"'* ]]; then
        pass "sudo -n pvesh get /cluster/resources --output-format json -> JSON array of $(jq length <<<"$out" 2>/dev/null || echo some) resources"
    else
        fail "sudo -n pvesh get /cluster/resources: rc=$rc stdout=${out:0:200} stderr=$(tr '\n' ' ' <"$err")"
    fi

    # 2. Without sudo: PVE's non-root refusal (ipcc_send_rec … Unable to load access control list, 255).
    rc=0
    out="$(agent_ssh '/usr/bin/pvesh get /cluster/resources --output-format json' 2>"$err")" || rc=$?
    if [[ $rc -eq 255 ]] && grep -q 'ipcc_send_rec' "$err" && grep -q 'Unable to load access control list' "$err"; then
        pass "without sudo: exit 255, $(head -n1 "$err")"
    else
        fail "without sudo: want exit 255 + ipcc_send_rec error; got rc=$rc stderr=$(tr '\n' ' ' <"$err")"
    fi

    # 3. An argument outside the catalog (a hookscript is a root shell) is refused by sudo itself.
    rc=0
    out="$(agent_ssh 'sudo -n /usr/sbin/qm set 100 --hookscript x' 2>"$err")" || rc=$?
    if [[ $rc -eq 1 ]] && grep -q 'a password is required' "$err"; then
        pass "sudo -n qm set 100 --hookscript x refused: $(head -n1 "$err")"
    else
        fail "qm set --hookscript: want sudo's 'a password is required' (exit 1); got rc=$rc stdout=$out stderr=$(tr '\n' ' ' <"$err")"
    fi

    # 4. Password login is refused by sshd. The client really tries a password (SSH_ASKPASS forced)
    #    with public key auth off; sshd must not let it in.
    local askpass
    askpass="$(mktemp)"
    printf '#!/bin/sh\necho not-the-password\n' >"$askpass"
    chmod 0700 "$askpass"
    rc=0
    out="$(SSH_ASKPASS="$askpass" SSH_ASKPASS_REQUIRE=force timeout 20 \
        ssh -F /dev/null -p "$PORT" -o UserKnownHostsFile="$KNOWN_HOSTS" -o GlobalKnownHostsFile=/dev/null \
        -o StrictHostKeyChecking=yes -o PubkeyAuthentication=no -o IdentityAgent=none \
        -o PreferredAuthentications=password,keyboard-interactive -o NumberOfPasswordPrompts=1 \
        -o ConnectTimeout=5 "$USER_NAME@127.0.0.1" true </dev/null 2>"$err")" || rc=$?
    rm -f "$askpass"
    if [[ $rc -eq 255 ]] && grep -q 'Permission denied' "$err"; then
        pass "password login refused by sshd: $(grep 'Permission denied' "$err" | head -n1)"
    else
        fail "password login: want 'Permission denied' (exit 255); got rc=$rc stderr=$(tr '\n' ' ' <"$err")"
    fi
    if [[ "$(conf_get offer_password)" != 1 ]]; then
        if grep -q 'Permission denied (publickey)' "$err"; then pass "sshd offers only publickey to $USER_NAME"; else fail "sshd offers more than publickey: $(tr '\n' ' ' <"$err")"; fi
    fi
    if [[ "$(password_status)" == L ]]; then pass "passwd -S: $(passwd -S "$USER_NAME")"; else fail "passwd -S: $(passwd -S "$USER_NAME")"; fi
    rm -f "$err"

    # 5. up again is a no-op; down leaves no sshd, account or sudoers file behind; down twice is a
    #    no-op; then the bed comes back up so callers find it as they left it.
    if [[ $SELFTEST_QUICK -eq 0 ]]; then
        local opts=(--port "$PORT" --user "$USER_NAME" --state-dir "$STATE_DIR" --profile "$(conf_get profile)")
        [[ "$(conf_get offer_password)" != 1 ]] || opts+=(--offer-password)
        [[ -z "$(conf_get vmids)" ]] || opts+=(--vmids "$(conf_get vmids)")
        [[ -z "$(conf_get ctids)" ]] || opts+=(--ctids "$(conf_get ctids)")
        local pxbin simbin sshd_pid
        pxbin="$(conf_get pxagent_bin)"
        simbin="$(conf_get pve_sim_bin)"
        sshd_pid="$(our_sshd_pid)"
        out="$(PXAGENT_BIN="$pxbin" PVE_SIM_BIN="$simbin" "$SCRIPT_PATH" up "${opts[@]}" 2>&1)" || rc=$?
        if [[ "$out" == *"already up and healthy"* && "$(our_sshd_pid)" == "$sshd_pid" ]]; then
            pass "up on a healthy bed is a no-op (sshd pid $sshd_pid kept)"
        else
            fail "up on a healthy bed was not a no-op: $out"
        fi

        # Beds of other machines with our paths, as in containers on this one: a real sshd with
        # our config in its own network namespace (its own 127.0.0.1:PORT), and a process under
        # another root named like our listener. Neither is ours: down must leave them running.
        # A third one here, named like our listener but missing from the pid file (a stray), is
        # ours: down must end it. Each is ended by its own pid below.
        local decoy_dir net_pid root_pid stray_pid
        decoy_dir="$(mktemp -d)"
        make_decoy_root "$decoy_dir/root"
        # shellcheck disable=SC2016 # expanded by the inner bash, from its arguments
        unshare -n bash -c 'ip link set lo up && exec "$0" -D -f "$1" -o PidFile=none -E "$2"' \
            "$SSHD" "$SSHD_CONFIG" "$decoy_dir/sshd.log" </dev/null >/dev/null 2>&1 9>&- &
        net_pid=$!
        # shellcheck disable=SC2016
        unshare --root="$decoy_dir/root" /bin/bash -c 'exec -a "$0" /bin/sleep 600' \
            "sshd: $SSHD -f $SSHD_CONFIG -E $SSHD_LOG [listener] 0 of 10-100 startups" </dev/null >/dev/null 2>&1 9>&- &
        root_pid=$!
        bash -c 'exec -a "$0" sleep 600' \
            "sshd: $SSHD -f $SSHD_CONFIG -E $SSHD_LOG [listener] 0 of 10-100 startups" </dev/null >/dev/null 2>&1 9>&- &
        stray_pid=$!
        # An interrupted selftest must not leave them behind either.
        # shellcheck disable=SC2064 # the pids are known now
        trap "kill -KILL $net_pid $root_pid $stray_pid 2>/dev/null; rm -rf '$decoy_dir'" EXIT
        trap 'exit 129' HUP
        trap 'exit 130' INT
        trap 'exit 143' TERM
        if ! wait_named "$root_pid" || ! wait_named "$stray_pid"; then fail "the decoys did not start"; fi
        local i
        for ((i = 0; i < 100; i++)); do
            nsenter -t "$net_pid" -n bash -c ": </dev/tcp/127.0.0.1/$PORT" 2>/dev/null && break
            sleep 0.1
        done
        if nsenter -t "$net_pid" -n bash -c ": </dev/tcp/127.0.0.1/$PORT" 2>/dev/null; then
            pass "another bed's sshd (pid $net_pid) listens on 127.0.0.1:$PORT in its own network namespace, with $SSHD_CONFIG"
        else
            fail "the sshd in another network namespace did not start: $(cat "$decoy_dir/sshd.log" 2>/dev/null)"
        fi

        if "$SCRIPT_PATH" down "${opts[@]}" 2>/dev/null; then pass "down exits 0"; else fail "down failed"; fi
        if [[ -n "$sshd_pid" ]] && pid_is_our_sshd "$sshd_pid"; then fail "sshd pid $sshd_pid still running after down"; else pass "down: no sshd (pid $sshd_pid gone)"; fi
        if pid_alive "$net_pid"; then pass "down left the sshd in another network namespace running (pid $net_pid)"; else fail "down ended pid $net_pid, an sshd with our config in another network namespace"; fi
        if pid_alive "$root_pid"; then pass "down left the process under another root running (pid $root_pid)"; else fail "down ended pid $root_pid, a process named like our sshd under another root"; fi
        if pid_alive "$stray_pid"; then fail "down left pid $stray_pid running, a stray named like our sshd here"; else pass "down ended the stray named like our sshd here (pid $stray_pid)"; fi
        kill -KILL "$net_pid" "$root_pid" "$stray_pid" 2>/dev/null || true
        wait "$net_pid" "$root_pid" "$stray_pid" 2>/dev/null || true
        rm -rf "$decoy_dir"
        trap - EXIT HUP INT TERM
        if [[ -n "$(stray_sshd_pids)" ]]; then fail "down: an sshd naming $SSHD_CONFIG still runs"; fi
        if port_answers "$PORT"; then fail "down: 127.0.0.1:$PORT still answers"; else pass "down: 127.0.0.1:$PORT closed"; fi
        if account_exists; then fail "down: account $USER_NAME still exists"; else pass "down: no account $USER_NAME"; fi
        if [[ -e "$SUDOERS_FILE" ]]; then fail "down: $SUDOERS_FILE still exists"; else pass "down: no $SUDOERS_FILE"; fi
        if [[ -e "$STATE_DIR" ]]; then fail "down: $STATE_DIR still exists"; else pass "down: no $STATE_DIR"; fi
        rc=0
        out="$("$SCRIPT_PATH" down "${opts[@]}" 2>&1)" || rc=$?
        if [[ $rc -eq 0 && "$out" == *"already down"* ]]; then pass "down twice is a no-op"; else fail "second down (rc=$rc): $out"; fi

        if PXAGENT_BIN="$pxbin" PVE_SIM_BIN="$simbin" "$SCRIPT_PATH" up "${opts[@]}" >/dev/null 2>&1 &&
            bed_checks >/dev/null; then
            pass "bed $BED_ID back up (fresh simulator state unless another bed shares it)"
        else
            fail "could not bring bed $BED_ID back up"
        fi
    fi

    if [[ $failures -gt 0 ]]; then
        echo "selftest: $failures check(s) FAILED"
        return 1
    fi
    echo "selftest: all checks passed"
}

# ---------------------------------------------------------------------------------------------

case "$CMD" in
up) do_up ;;
down)
    need_root
    take_lock
    do_down
    ;;
status) do_status ;;
env) do_env ;;
selftest) do_selftest ;;
esac
