#!/usr/bin/env bash
# The README's test command: everything the tests need, on a fresh Debian machine, as root.
#
# 1. checks formatting and lints (cargo fmt, clippy with -D warnings);
# 2. builds pxagent and the PVE simulator;
# 3. brings the sandbox host up (installing sudo and OpenSSH from Debian's packages when
#    missing): real sshd on 127.0.0.1, real account, real sudo with the sudoers file pxagent
#    rendered, the simulator at the PVE paths; and proves it works;
# 4. runs every test of the workspace against it;
# 5. takes the sandbox down again, also when a step failed.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
    echo "scripts/test.sh: run as root (it installs packages, an account and a sudoers file)" >&2
    exit 2
fi

# Packages (sudo, openssh-server) are installed by `scripts/testbed.sh up` below, which keeps
# the package's own sshd from starting on port 22.

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy --all-targets -- -D warnings"
cargo clippy --workspace --all-targets --quiet -- -D warnings

echo "== installing the official Python MCP SDK (the real client of tests/mcp.rs)"
python3 -m pip install --quiet 'mcp>=1.0'

echo "== building pxagent and pve-sim (release)"
cargo build --release --quiet -p pxagent -p pve-sim
export PXAGENT_BIN="$PWD/target/release/pxagent" PVE_SIM_BIN="$PWD/target/release/pve-sim"

echo "== bringing the sandbox host up"
trap 'echo "== taking the sandbox host down"; scripts/testbed.sh down || true' EXIT
scripts/testbed.sh up
scripts/testbed.sh selftest
eval "$(scripts/testbed.sh env)"
export PXAGENT_TESTBED_REQUIRED=1

echo "== cargo test"
cargo test --workspace --all-targets -- --test-threads=2
