#!/usr/bin/env bash
# scripts/demo.sh — the README's "main job" command: see pxagent work on a fresh machine.
#
# Why this exists: pxagent manages Proxmox VE hosts over SSH + sudo, and no Proxmox runs here. This
# one command builds pxagent (release), brings up the local sandbox host (scripts/testbed.sh: a
# real sshd on 127.0.0.1, a real key-only account, real sudo with the sudoers file pxagent
# renders, the PVE simulator at the real PVE paths) and then shows what works so far, one
# headed step at a time. Steps for subcommands that have not landed yet are detected from
# `pxagent --help` and skipped with a note, so the demo keeps working as features land.
#
# Usage (root: the bed creates an account, a sudoers file and an sshd):
#   scripts/demo.sh            # options after the name go to `testbed.sh up`, e.g. --port 2223
#   PXAGENT_BIN=… PVE_SIM_BIN=… scripts/demo.sh   # use prebuilt binaries, skip the build
# The bed is left up at the end; `scripts/testbed.sh down` removes it.
# It first installs what is missing (scripts/lib/deps.sh): Rust through rustup when cargo is
# missing or older than the MSRV, and the Debian packages gcc libc6-dev ca-certificates (build)
# and openssh-server openssh-client sudo procps util-linux iproute2 (sandbox host).
# Exit status: 0 when every shown step behaved as expected, 1 otherwise (all steps still run);
# 2 when something it needs could not be installed (it prints what to do).

set -euo pipefail

REPO_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
readonly REPO_DIR
readonly TESTBED="$REPO_DIR/scripts/testbed.sh"
# The demo's lifecycle VM: VMID 102 ("build") is stopped on the local node pve1 in the simulator's
# seed state, and the lifecycle below leaves it stopped again, so the demo can run repeatedly.
readonly DEMO_VM=102

if [[ $EUID -ne 0 ]]; then
    echo "demo.sh: run as root (the test bed creates an account, a sudoers file and an sshd): sudo $0" >&2
    exit 1
fi

if [[ -t 1 ]]; then BOLD=$'\e[1m' DIM=$'\e[2m' RESET=$'\e[0m'; else BOLD='' DIM='' RESET=''; fi
FAILED=()

heading() { printf '\n%s== %s%s\n' "$BOLD" "$*" "$RESET"; }

# step WANT_EXIT TITLE [--show TEXT] CMD...: one heading, the command as typed (or TEXT), its
# output, and a note when the exit status is not the expected one (recorded; the demo goes on so
# every step is shown).
step() {
    local want="$1" title="$2" rc=0 shown
    shift 2
    shown="$*"
    if [[ "$1" == --show ]]; then
        shown="$2"
        shift 2
    fi
    heading "$title"
    printf '%s$ %s%s\n' "$DIM" "$shown" "$RESET"
    "$@" || rc=$?
    if [[ $rc -ne $want ]]; then
        printf '%s(exit %s, expected %s)%s\n' "$BOLD" "$rc" "$want" "$RESET"
        FAILED+=("$title: exit $rc, expected $want")
    elif [[ $want -ne 0 ]]; then
        printf '%s(exit %s, as expected)%s\n' "$DIM" "$rc" "$RESET"
    fi
}

# has_cmd WORD... : does `pxagent [WORDS-but-last] --help` list the last word as a subcommand?
has_cmd() {
    local parent=("${@:1:$#-1}") name="${!#}" help
    help="$(pxagent "${parent[@]}" --help 2>/dev/null)" || return 1
    awk '/^Commands:/ { f = 1; next } f && /^[^ ]/ { f = 0 } f && NF { print $1 }' <<<"$help" |
        grep -qxF -- "$name"
}

# optional_step WANT TITLE pxagent WORDS...: run it only if the subcommand exists yet.
# The subcommand path is the leading words that are not options or numbers.
optional_step() {
    local want="$1" title="$2" words=() w
    shift 2
    for w in "${@:2}"; do
        [[ "$w" == -* || "$w" =~ ^[0-9]+$ ]] && break
        words+=("$w")
    done
    if has_cmd "${words[@]}"; then
        step "$want" "$title" "$@"
    else
        heading "$title"
        printf '%s(skipped: "pxagent %s" is not implemented yet)%s\n' "$DIM" "${words[*]}" "$RESET"
    fi
}

render_head() {
    local out
    out="$(pxagent sudoers render)" || return $?
    head -n 40 <<<"$out"
}

# What the demo needs and the machine lacks, before anything else (see the top of this file).
DEPS_WHO=scripts/demo.sh
# shellcheck source=scripts/lib/deps.sh
. "$REPO_DIR/scripts/lib/deps.sh"
if [[ -n "${PXAGENT_BIN:-}" && -n "${PVE_SIM_BIN:-}" ]]; then
    deps_require "${DEPS_BED[@]}"
    heading "Using prebuilt binaries: $PXAGENT_BIN, $PVE_SIM_BIN"
else
    deps_rust
    deps_require "${DEPS_BUILD[@]}" "${DEPS_BED[@]}"
    heading "Build pxagent and the PVE simulator (release)"
    (cd "$REPO_DIR" && cargo build --locked --release -p pxagent -p pve-sim)
    TARGET_DIR="${CARGO_TARGET_DIR:-$REPO_DIR/target}"
    PXAGENT_BIN="$TARGET_DIR/release/pxagent"
    PVE_SIM_BIN="$TARGET_DIR/release/pve-sim"
fi
# A directory holding `pxagent` first on PATH, so every step reads as a user would type it.
PXAGENT_BIN="$(realpath "$PXAGENT_BIN")"
PVE_SIM_BIN="$(realpath "$PVE_SIM_BIN")"
BIN_DIR="$(mktemp -d)"
trap 'rm -rf "$BIN_DIR"' EXIT
ln -s "$PXAGENT_BIN" "$BIN_DIR/pxagent"
export PATH="$BIN_DIR:$PATH"

heading "Bring the sandbox host up: scripts/testbed.sh up${*:+ $*}"
PXAGENT_BIN="$PXAGENT_BIN" PVE_SIM_BIN="$PVE_SIM_BIN" "$TESTBED" up "$@"
eval "$("$TESTBED" env "$@")"
printf 'pxagent talks to %s@%s:%s with key %s (known_hosts %s)\n' \
    "$PXAGENT_USER" "$PXAGENT_HOST" "$PXAGENT_PORT" "$PXAGENT_IDENTITY" "$PXAGENT_KNOWN_HOSTS"

step 0 "The operation catalog: everything pxagent can do, and nothing else" pxagent catalog
step 0 "The sudoers file pxagent renders from that catalog (first 40 lines)" \
    --show "pxagent sudoers render | head -40" render_head
step 0 "Dry run: what would be sent for a VM destroy (nothing is sent)" \
    pxagent vm destroy 100 --dry-run

optional_step 0 "Preflight: is the host set up the way pxagent needs?" pxagent preflight
if has_cmd status || ! has_cmd cluster status; then
    optional_step 0 "Cluster status through the agent account" pxagent status
else
    optional_step 0 "Cluster status through the agent account" pxagent cluster status
fi
optional_step 0 "The guests" pxagent vm list
optional_step 0 "VM lifecycle: status of VM $DEMO_VM" pxagent vm status "$DEMO_VM"
optional_step 0 "VM lifecycle: start VM $DEMO_VM" pxagent vm start "$DEMO_VM"
optional_step 0 "VM lifecycle: status of VM $DEMO_VM" pxagent vm status "$DEMO_VM"
optional_step 0 "VM lifecycle: shut VM $DEMO_VM down" pxagent vm shutdown "$DEMO_VM"
optional_step 0 "VM lifecycle: status of VM $DEMO_VM" pxagent vm status "$DEMO_VM"
# Exit 4 = confirmation required, nothing sent (design §4): the refusal is the expected outcome.
optional_step 4 "A destroy without --confirm is refused (exit 4, nothing sent)" pxagent vm destroy 100

heading "Done"
BED_ARGS="$(printf ' %q' "$@")"
[[ $# -gt 0 ]] || BED_ARGS=""
echo "The sandbox host is still up. Use it from this shell with:"
echo "  eval \"\$($TESTBED env$BED_ARGS)\""
echo "Tear it down with:"
echo "  $TESTBED down$BED_ARGS"
if [[ ${#FAILED[@]} -gt 0 ]]; then
    printf '\n%s%s step(s) did not behave as expected:%s\n' "$BOLD" "${#FAILED[@]}" "$RESET"
    printf '  - %s\n' "${FAILED[@]}"
    exit 1
fi
