#!/usr/bin/env bash
# scripts/fresh-debian.sh — run the README's two commands as a new user would: on a fresh Debian
# minbase root (no Rust, no compiler, no pip, no systemd, no /etc/machine-id), as root, with
# nothing but the repository cloned into it.
#
#   scripts/fresh-debian.sh [--suite bookworm|trixie] [--root DIR] [--keep] [--only demo|test]
#
# 1. builds the root with `debootstrap --variant=minbase SUITE` (default bookworm, Debian 12) in
#    DIR (default /var/tmp/pxagent-fresh-SUITE, made anew each run; the downloaded packages are
#    cached in /var/cache/pxagent-fresh) and clones the repository's HEAD into /root/pxagent there
#    (commit first: uncommitted changes are not part of the check);
# 2. `scripts/demo.sh` in it (chroot, the machine's network: it installs Rust with rustup and the
#    Debian packages it needs, builds, brings up its gated bed on 127.0.0.1:2224, and leaves it up;
#    the check takes it down afterwards);
# 3. `scripts/test.sh --deps-only` in it (the network is needed for the installs), then
#    `scripts/test.sh` in a network namespace of its own with only a loopback, so its beds on
#    127.0.0.1:2222 and :2223 never meet this machine's (the tests reach only 127.0.0.1 anyway).
# Everything runs in a private mount namespace (/proc, /sys, /dev, /dev/pts and a tmpfs /run in
# the root are gone when the check ends); the root stays for a look unless it passed without
# --keep. Needs root, debootstrap (installed when missing) and the package registries.
# Exit status: 0 when both commands exited 0; otherwise 1, after both have run (with --only, the
# one named); 2 for a usage or setup problem.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SUITE=bookworm
ROOT=""
KEEP=0
ONLY=""
while [[ $# -gt 0 ]]; do
    case "$1" in
    --suite) SUITE="${2:?--suite needs bookworm or trixie}"; shift 2 ;;
    --root) ROOT="${2:?--root needs a directory}"; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --only) ONLY="${2:?--only needs demo or test}"; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    *) echo "fresh-debian.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
case "$SUITE" in bookworm | trixie) ;; *) echo "fresh-debian.sh: --suite is bookworm or trixie" >&2; exit 2 ;; esac
case "$ONLY" in "" | demo | test) ;; *) echo "fresh-debian.sh: --only is demo or test" >&2; exit 2 ;; esac
ROOT="${ROOT:-/var/tmp/pxagent-fresh-$SUITE}"
[[ $EUID -eq 0 ]] || { echo "fresh-debian.sh: run as root (debootstrap, chroot, mounts)" >&2; exit 2; }

say() { printf '\n== fresh-debian: %s\n' "$*"; }

if [[ -z "${PXAGENT_FRESH_INNER:-}" ]]; then
    # The rest runs in a private mount namespace: its mounts end with it.
    DEPS_WHO=scripts/fresh-debian.sh
    # shellcheck source=scripts/lib/deps.sh
    . "$REPO/scripts/lib/deps.sh"
    deps_require debootstrap util-linux iproute2 git
    exec env PXAGENT_FRESH_INNER=1 unshare --mount --propagation private -- "$0" \
        --suite "$SUITE" --root "$ROOT" ${ONLY:+--only "$ONLY"} $([[ $KEEP -eq 0 ]] || echo --keep)
fi

CACHE=/var/cache/pxagent-fresh
mkdir -p "$CACHE"
if [[ -e "$ROOT" ]]; then
    # Only a root this script made (its mark) is removed.
    [[ -f "$ROOT/.pxagent-fresh" ]] || { echo "fresh-debian.sh: $ROOT exists and is not one of this script's roots; pick another --root" >&2; exit 2; }
    say "removing the previous root $ROOT"
    rm -rf --one-file-system "$ROOT"
fi
say "debootstrap --variant=minbase $SUITE $ROOT"
mkdir -p "$ROOT"
debootstrap --variant=minbase --cache-dir="$CACHE" "$SUITE" "$ROOT" http://deb.debian.org/debian >"$CACHE/debootstrap-$SUITE.log" 2>&1 ||
    { tail -n 20 "$CACHE/debootstrap-$SUITE.log"; echo "fresh-debian.sh: debootstrap failed (log: $CACHE/debootstrap-$SUITE.log)" >&2; exit 2; }
touch "$ROOT/.pxagent-fresh"
for missing in /etc/machine-id /var/lib/dbus/machine-id /usr/bin/systemctl /bin/systemctl /usr/bin/cargo /usr/bin/gcc; do
    [[ ! -e "$ROOT$missing" ]] || { echo "fresh-debian.sh: the fresh root has $missing, so it is not the machine this check is for" >&2; exit 2; }
done
cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
# The machine's own network trust travels into the root, as its administrator set it up: the CA
# certificates it added (a TLS-inspecting egress proxy's, say), which ca-certificates adds to
# the root's bundle when a command installs it, and below the variables that name that bundle.
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
    mkdir -p "$ROOT/usr/local/share/ca-certificates"
    cp /usr/local/share/ca-certificates/*.crt "$ROOT/usr/local/share/ca-certificates/"
fi
PASS_ENV=()
for v in SSL_CERT_FILE SSL_CERT_DIR CURL_CA_BUNDLE PIP_CERT REQUESTS_CA_BUNDLE NODE_EXTRA_CA_CERTS GIT_SSL_CAINFO; do
    [[ -z "${!v:-}" ]] || PASS_ENV+=("$v=${!v}")
done
git clone --quiet --no-hardlinks "$REPO" "$ROOT/root/pxagent"
echo "root: $ROOT ($(. "$ROOT/etc/os-release" && echo "$PRETTY_NAME")), repository at $(git -C "$REPO" rev-parse --short HEAD)"

mount -t proc proc "$ROOT/proc"
mount --rbind /sys "$ROOT/sys"
mount --rbind /dev "$ROOT/dev"
mount -t tmpfs -o mode=0755 tmpfs "$ROOT/run"

# A clean environment, as a fresh login as root would have it.
in_root() {
    chroot "$ROOT" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
        PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "${PASS_ENV[@]}" \
        /bin/bash -c "cd /root/pxagent && $1"
}

RESULTS=()
DEMO_RC=0 TEST_RC=0
if [[ "$ONLY" != test ]]; then
    say "scripts/demo.sh (in the root)"
    in_root 'scripts/demo.sh' || DEMO_RC=$?
    RESULTS+=("scripts/demo.sh: exit $DEMO_RC")
    in_root 'scripts/testbed.sh down --port 2224 --user zen-demo >/dev/null' ||
        echo "fresh-debian.sh: taking the demo's bed down failed" >&2
fi
if [[ "$ONLY" != demo ]]; then
    say "scripts/test.sh --deps-only (in the root, with the network)"
    if in_root 'scripts/test.sh --deps-only'; then
        say "scripts/test.sh (in the root, in a network namespace with only a loopback)"
        # Everything was fetched above: cargo must not look for the network it no longer has.
        unshare --net -- chroot "$ROOT" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
            PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin CARGO_NET_OFFLINE=true "${PASS_ENV[@]}" \
            /bin/bash -c 'ip link set lo up && cd /root/pxagent && scripts/test.sh' || TEST_RC=$?
    else
        TEST_RC=$?
    fi
    RESULTS+=("scripts/test.sh: exit $TEST_RC")
fi

say "results on a fresh Debian $SUITE minbase root"
printf '%s\n' "${RESULTS[@]}"
if [[ $DEMO_RC -eq 0 && $TEST_RC -eq 0 ]]; then
    [[ $KEEP -eq 1 ]] || { umount -Rl "$ROOT/proc" "$ROOT/sys" "$ROOT/dev" "$ROOT/run" 2>/dev/null || true; rm -rf --one-file-system "$ROOT"; }
    exit 0
fi
echo "the root is kept for a look: $ROOT (chroot $ROOT bash)"
exit 1
