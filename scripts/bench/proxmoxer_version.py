"""proxmoxer's SSH backend as a peer for scripts/bench.sh.

Why this exists: proxmoxer (Python, pvesh over paramiko) is the usual way a script talks to a
Proxmox host over SSH instead of the HTTPS API. This helper does what such a script does for one
read: build ProxmoxAPI(backend="ssh_paramiko", sudo=True) — which opens a new SSH connection —
then call .version.get(), then close. It prints information only.

  proxmoxer_version.py --once  ...   one call; prints the result as JSON (for timing whole
                                     processes: interpreter start-up + imports + the call)
  proxmoxer_version.py --runs N ...  N timed calls in this process after 3 warm-up calls; prints
                                     {"median_ms", "min_ms", "max_ms", "runs"} (the call alone)
  proxmoxer_version.py --batch N ... N calls over ONE ProxmoxAPI (one SSH connection), one after
                                     another, as a script doing many reads would; prints
                                     {"calls": N} (for timing the whole process)

Host keys: the ssh_paramiko backend sets paramiko.AutoAddPolicy and loads no known_hosts, so it
accepts any host key without checking it; that is why this helper is only ever pointed at the
loopback test bed. Remote command it sends: `sudo pvesh get /version --output-format json`.
Any failure prints {"error": "..."} and exits 1: the benchmark reports it, never a fake number.
"""

import argparse
import json
import statistics
import sys
import time


def connect(args):
    from proxmoxer import ProxmoxAPI

    return ProxmoxAPI(
        args.host,
        port=args.port,
        user=args.user,
        backend="ssh_paramiko",
        private_key_file=args.key,
        sudo=True,
        timeout=10,
    )


def checked(result):
    if not isinstance(result, dict) or "version" not in result:
        raise RuntimeError(f"unexpected answer to version.get(): {result!r}")
    return result


def one_call(args):
    api = connect(args)
    try:
        return checked(api.version.get())
    finally:
        api._backend.session.ssh_client.close()


def batch(args):
    api = connect(args)
    try:
        for _ in range(args.batch):
            checked(api.version.get())
    finally:
        api._backend.session.ssh_client.close()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--user", required=True)
    p.add_argument("--key", required=True)
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--once", action="store_true")
    mode.add_argument("--runs", type=int)
    mode.add_argument("--batch", type=int)
    args = p.parse_args()
    try:
        if args.once:
            print(json.dumps(one_call(args)))
            return 0
        if args.batch:
            batch(args)
            print(json.dumps({"calls": args.batch}))
            return 0
        for _ in range(3):
            one_call(args)
        times = []
        for _ in range(args.runs):
            t0 = time.perf_counter_ns()
            one_call(args)
            times.append((time.perf_counter_ns() - t0) / 1e6)
        summary = {"median_ms": statistics.median(times), "min_ms": min(times), "max_ms": max(times)}
        print(json.dumps(summary | {"runs": args.runs}))
        return 0
    except Exception as e:  # report any failure as information, never as a number
        print(json.dumps({"error": f"{type(e).__name__}: {e}"}))
        return 1


if __name__ == "__main__":
    sys.exit(main())
