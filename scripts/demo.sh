#!/usr/bin/env bash
# scripts/demo.sh — the README's "main job" command: pxagent's story in a screen or two.
#
# No Proxmox runs here, so this builds pxagent (release), brings up a gated sandbox host
# (scripts/testbed.sh up --gate: a real sshd on 127.0.0.1, a real key-only account whose key may
# run nothing but `pxagent gate`, real sudo with the rules pxagent renders, the PVE simulator at the
# real PVE paths) and shows, one headed step at a time:
#   1. `sudoers lint` of the widely shared `qm *` rule: what it lets an agent do as root;
#   2. pxagent's own rules beside it, and the linter passing them;
#   3. the gated account, proved by `pxagent preflight`;
#   4. a plain `ssh host id` refused while a typed operation works;
#   5. a destroy looked at before it is asked for, and refused without its phrase (nothing sent);
#   6. an approval round trip: the host asks for a signed statement, a human signs, the op runs once;
#   7. one MCP tool call.
# Nothing it does changes a guest, so it can run again and again (and beside other beds).
#
# Usage (root: the bed creates an account, a sudoers file and an sshd):
#   scripts/demo.sh            # options after the name go to `testbed.sh up`, e.g. --port 2225
#   PXAGENT_BIN=… PVE_SIM_BIN=… scripts/demo.sh   # use prebuilt binaries, skip the build
# The demo's bed is `--gate --port 2224 --user zen-demo` unless options say otherwise; it is left
# up at the end, and `scripts/testbed.sh down --port 2224 --user zen-demo` removes it.
# It first installs what is missing (scripts/lib/deps.sh): Rust through rustup when cargo is
# missing or older than the MSRV, the Debian packages gcc libc6-dev ca-certificates (build) and
# openssh-server openssh-client sudo procps util-linux iproute2 (sandbox host); the gate's bed
# adds python3 (its syslog listener).
# Exit status: 0 when every step behaved as expected, 1 otherwise (all steps still run);
# 2 when something it needs could not be installed (it prints what to do).

set -euo pipefail

REPO_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
readonly REPO_DIR
readonly TESTBED="$REPO_DIR/scripts/testbed.sh"
# VMID 102 ("build", stopped, on pve1) is in the simulator's seed state; the demo only reads it.
readonly DEMO_VM=102

if [[ $EUID -ne 0 ]]; then
    echo "demo.sh: run as root (the test bed creates an account, a sudoers file and an sshd): sudo $0" >&2
    exit 1
fi

if [[ -t 1 ]]; then BOLD=$'\e[1m' DIM=$'\e[2m' RESET=$'\e[0m'; else BOLD='' DIM='' RESET=''; fi
FAILED=()

heading() { printf '\n%s== %s%s\n' "$BOLD" "$*" "$RESET"; }

# step WANT_EXIT TITLE [--show TEXT] CMD...: one heading, the command as typed (or TEXT), its
# output, and a note when the exit status is not the expected one (recorded; the demo goes on).
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

# What the demo needs and the machine lacks, before anything else (see the top of this file).
DEPS_WHO=scripts/demo.sh
# shellcheck source=scripts/lib/deps.sh
. "$REPO_DIR/scripts/lib/deps.sh"
if [[ -n "${PXAGENT_BIN:-}" && -n "${PVE_SIM_BIN:-}" ]]; then
    deps_require "${DEPS_BED[@]}"
else
    deps_rust
    deps_require "${DEPS_BUILD[@]}" "${DEPS_BED[@]}"
    heading "Build pxagent and the PVE simulator (release)"
    (cd "$REPO_DIR" && cargo build --locked --release -p pxagent -p pxagent-helper -p pve-sim)
    TARGET_DIR="${CARGO_TARGET_DIR:-$REPO_DIR/target}"
    PXAGENT_BIN="$TARGET_DIR/release/pxagent"
    PVE_SIM_BIN="$TARGET_DIR/release/pve-sim"
fi
# A directory holding `pxagent` first on PATH, so every step reads as a user would type it.
PXAGENT_BIN="$(realpath "$PXAGENT_BIN")"
PVE_SIM_BIN="$(realpath "$PVE_SIM_BIN")"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"; [[ -z "${POLICY_SAVED:-}" ]] || cat "$POLICY_SAVED.demo-orig" >"$POLICY_SAVED"' EXIT
ln -s "$PXAGENT_BIN" "$WORK/pxagent"
export PATH="$WORK:$PATH"
cd "$WORK"

# 1-2. The rules, before any host: a rule people paste, then pxagent's own.
printf 'zen-agent ALL=(ALL) NOPASSWD: /usr/sbin/qm *\n' >qm-star.sudoers
lint_head() { local rc=0 out; out="$(pxagent sudoers lint qm-star.sudoers 2>/dev/null)" || rc=$?; head -n 3 <<<"$out"; tail -n 1 <<<"$out"; return $rc; }
step 1 "The widely shared rule 'zen-agent ALL=(ALL) NOPASSWD: /usr/sbin/qm *': root in a few words" \
    --show "pxagent sudoers lint qm-star.sudoers   # the first finding of 4" lint_head
pxagent sudoers render --profile operator >operator.sudoers
render_qm() { grep -m 3 -E 'qemu/\[1-9\]\[0-9\]\{2,8\}/status/(start|shutdown)' operator.sudoers; pxagent sudoers lint operator.sudoers; }
step 0 "pxagent's own rules beside it: one anchored regex per operation, and the linter agrees" \
    --show "pxagent sudoers render --profile operator | grep -E 'qemu/.*/status/(start|shutdown)'; pxagent sudoers lint operator.sudoers" render_qm

# 3. A gated account (on a real host: `pxagent setup render`, see docs/host-setup.md).
BED=(--gate --port 2224 --user zen-demo "$@")
heading "A gated account: scripts/testbed.sh up ${BED[*]}"
PXAGENT_BIN="$PXAGENT_BIN" PVE_SIM_BIN="$PVE_SIM_BIN" "$TESTBED" up "${BED[@]}" >"$WORK/up.log" 2>&1 ||
    { cat "$WORK/up.log"; exit 1; }
eval "$("$TESTBED" env "${BED[@]}")"
echo "up: $PXAGENT_USER@$PXAGENT_HOST:$PXAGENT_PORT, key $PXAGENT_IDENTITY (log: scripts/testbed.sh status ${BED[*]})"
step 0 "Preflight: key-only SSH, the gate in front, unprivileged account, sudo rules, audit" pxagent preflight

# 4. The key runs only the gate.
plain_ssh() { ssh -p "$PXAGENT_PORT" -i "$PXAGENT_IDENTITY" -o UserKnownHostsFile="$PXAGENT_KNOWN_HOSTS" \
    -o BatchMode=yes "$PXAGENT_USER@$PXAGENT_HOST" id 2>&1; }
step 125 "A plain ssh with the agent's own key is refused: not a catalog line" \
    --show "ssh -p $PXAGENT_PORT $PXAGENT_USER@$PXAGENT_HOST id" plain_ssh
status_head() { local rc=0 out; out="$(pxagent vm status "$DEMO_VM")" || rc=$?; head -n 3 <<<"$out"; return $rc; }
step 0 "A typed operation works" --show "pxagent vm status $DEMO_VM | head -3" status_head

# 5. The soft blacklist.
step 1 "A running VM is not asked about: Proxmox would refuse its destroy (only reads are sent)" pxagent vm destroy 100 </dev/null
step 4 "A destroy without its phrase is refused, naming what goes and what stays; nothing is sent" pxagent vm destroy 103 </dev/null

# 6. An approval round trip: the host policy (root's) says reading VM configs needs a human's
# signature; the gate issues a statement, the approver signs it, the same call runs once.
POLICY_SAVED="$PXAGENT_TESTBED_STATE/gate/policy.yaml"
cp "$POLICY_SAVED" "$POLICY_SAVED.demo-orig"
printf 'ops:\n  vm.config: approve\n' >"$POLICY_SAVED"
ask() { local rc=0; pxagent -o json vm config "$DEMO_VM" >refused.json || rc=$?
    # The answer's message, and the statement it carries; a step that went otherwise says why
    # in one line (never a traceback).
    python3 - refused.json <<'PY' || rc=1
import json, sys
try:
    e = json.load(open(sys.argv[1])).get("error") or {}
except (OSError, ValueError) as x:
    sys.exit(f"(the answer is not pxagent's JSON: {x})")
print(e.get("message", "(no message)"))
req = e.get("approval_request")
if not req:
    sys.exit(f"(no approval request in the answer: kind {e.get('kind')})")
open("statement.txt", "w").write(req["statement"])
PY
    return $rc; }
step 4 "The host policy says 'vm.config: approve': the gate answers with a statement to sign" \
    --show "pxagent vm config $DEMO_VM" ask
sign() { pxagent approve --key "$PXAGENT_TESTBED_STATE/approver_ed25519" statement.txt >approval.sig; }
step 0 "The approver reads and signs it (their own key, listed in the host's approvers file)" \
    --show "pxagent approve --key approver_ed25519 statement.txt > approval.sig" sign
config_head() { local rc=0 out; out="$(pxagent vm config "$DEMO_VM" --approval approval.sig)" || rc=$?; head -n 4 <<<"$out"; return $rc; }
step 0 "The same call with the signature runs, once" \
    --show "pxagent vm config $DEMO_VM --approval approval.sig | head -4" config_head
replay() { pxagent vm config "$DEMO_VM" --approval approval.sig 2>&1 | head -n 1; return "${PIPESTATUS[0]}"; }
step 4 "The signature used again is refused (replayed)" \
    --show "pxagent vm config $DEMO_VM --approval approval.sig" replay
cat "$POLICY_SAVED.demo-orig" >"$POLICY_SAVED"
rm -f "$POLICY_SAVED.demo-orig"
POLICY_SAVED=

# 7. The same catalog as MCP tools, over stdio.
mcp_call() {
    printf '%s\n' \
        '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"demo","version":"1"}}}' \
        '{"jsonrpc":"2.0","method":"notifications/initialized"}' \
        "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"vm_status\",\"arguments\":{\"vmid\":$DEMO_VM}}}" |
        pxagent mcp --profile readonly >mcp.out
    python3 -c 'import json,sys
for line in open(sys.argv[1]):
    m = json.loads(line)
    if m.get("id") == 2:
        r = m["result"]; print("isError:", r.get("isError", False)); print("\n".join(r["content"][-1]["text"].splitlines()[:3]))' mcp.out
}
step 0 "One MCP tool call: vm_status, as an AI client sends it" \
    --show "printf '%s\\n' INITIALIZE INITIALIZED '{…\"tools/call\",\"params\":{\"name\":\"vm_status\",\"arguments\":{\"vmid\":$DEMO_VM}}}' | pxagent mcp --profile readonly" \
    mcp_call

heading "Done"
BED_ARGS="$(printf ' %q' "${BED[@]}")"
echo "The gated sandbox host is still up. Use it from this shell with:"
echo "  eval \"\$($TESTBED env$BED_ARGS)\""
echo "Tear it down with:"
echo "  $TESTBED down$BED_ARGS"
echo "More: README.md, then docs/README.md."
if [[ ${#FAILED[@]} -gt 0 ]]; then
    printf '\n%s%s step(s) did not behave as expected:%s\n' "$BOLD" "${#FAILED[@]}" "$RESET"
    printf '  - %s\n' "${FAILED[@]}"
    exit 1
fi
