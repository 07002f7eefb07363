#!/usr/bin/env bash
# What a warm MCP tool call costs next to the same op through the CLI. Information only: it prints
# numbers and asserts nothing.
#
#   scripts/bench-mcp.sh            # 50 MCP calls, 20 CLI runs
#   N=200 RUNS=50 scripts/bench-mcp.sh
#
# MCP: one `pxagent mcp` session driven by the official Python SDK (tests/mcp_client.py
# --bench): one warm-up call opens the SSH connection, then N `pve_version` calls, each timed
# by the client; the server's own time per call comes from its -v log, so the difference is
# what MCP itself adds (JSON-RPC over stdio, the SDK, serialization).
# CLI: RUNS runs of `pxagent version`, each a new process with a new SSH connection.
# Needs the sandbox host (`scripts/testbed.sh up`); the Python MCP SDK comes from the venv
# scripts/test.sh uses (target/venv, env PXAGENT_VENV; made here when missing, scripts/lib/deps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
DEPS_WHO=bench-mcp
# shellcheck source=scripts/lib/deps.sh
. scripts/lib/deps.sh
deps_venv

N=${N:-50}
RUNS=${RUNS:-20}
if [ -z "${PXAGENT_BIN:-}" ]; then
    cargo build --locked --release --quiet -p pxagent
    PXAGENT_BIN="$PWD/target/release/pxagent"
fi
if [ -z "${PXAGENT_HOST:-}" ]; then
    eval "$(scripts/testbed.sh env)"
fi
export PXAGENT_HOST PXAGENT_PORT PXAGENT_USER PXAGENT_IDENTITY PXAGENT_KNOWN_HOSTS

# Audit records of the runs go to a throwaway state dir, not the caller's log.
export XDG_STATE_HOME
XDG_STATE_HOME=$(mktemp -d)
trap 'rm -rf "$XDG_STATE_HOME"' EXIT

mcp=$("$DEPS_PYTHON_BIN" tests/mcp_client.py "$PXAGENT_BIN" --bench "$N")

"$DEPS_PYTHON_BIN" - "$PXAGENT_BIN" "$RUNS" "$mcp" <<'EOF'
import json
import statistics
import subprocess
import sys
import time

binary, runs, mcp = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
if "error" in mcp:
    sys.exit(f"bench-mcp: the MCP call failed: {mcp['error']}")
cli = []
for _ in range(runs):
    t = time.perf_counter()
    p = subprocess.run([binary, "-o", "json", "version"], capture_output=True)
    cli.append((time.perf_counter() - t) * 1000)
    if p.returncode != 0:
        sys.exit(f"bench-mcp: `pxagent version` failed: {p.stderr.decode()}")
m, s, c = mcp["median_ms"], mcp["server_median_ms"], statistics.median(cli)
print(f"warm MCP tool call  pve_version x{mcp['calls']} over one session: median {m:.2f} ms "
      f"(min {mcp['min_ms']:.2f}, max {mcp['max_ms']:.2f}; first call with connect {mcp['first_ms']:.1f} ms)")
print(f"  of which the server's own work (engine + SSH channel + sudo + tool): median {s:.2f} ms")
print(f"CLI  pxagent version x{runs}, new process and SSH connection each: median {c:.2f} ms")
print(f"per-call MCP overhead (client-observed - server-side): {m - s:.2f} ms")
print(f"warm MCP call / CLI run: {m / c:.2f}")
EOF

# What the tool list costs a client's context on every turn: the bytes of the `tools/list`
# answer (one JSON-RPC line) for each way of serving it. Nothing is connected for this.
echo
echo "tools/list answer, bytes:"
set -f # the patterns of --tools are not file names
for mode in "" "--output-schemas" "--tools compact" "--tools vm.*,task.*" "--profile operator"; do
    # shellcheck disable=SC2086 # the mode is one or two words
    bytes=$(printf '%s\n' \
        '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"0"}}}' \
        '{"jsonrpc":"2.0","method":"notifications/initialized"}' \
        '{"jsonrpc":"2.0","id":1,"method":"tools/list"}' |
        "$PXAGENT_BIN" mcp $mode 2>/dev/null | tail -n 1 | wc -c)
    printf '  %-22s %7d\n' "${mode:-(default)}" "$bytes"
done
