"""One Proxmox API call through proxmoxer's SSH backend, as a peer for scripts/bench/actions.sh.

Why this exists: section 8 of scripts/bench.sh times pxagent's actions (a status read, a start …)
beside what a Python script built on proxmoxer does for the same action: open a connection with
ProxmoxAPI(backend="ssh_paramiko", sudo=True), make the one call, close. proxmoxer turns the call
into `sudo pvesh VERB PATH [-name value …] --output-format json` on the host.

  proxmoxer_call.py --host H --port P --user U --key K [--times N] METHOD PATH

METHOD is get or post, PATH an API path (/nodes/pve1/qemu/100/status/current). With --times N it
makes N calls over the one connection. Host keys: the ssh_paramiko backend accepts any host key
(AutoAddPolicy, no known_hosts), so this is only ever pointed at the loopback test bed. It prints
{"calls": N} or {"error": "..."} (exit 1): the benchmark reports a failure, never a fake number.
"""

import argparse
import json
import sys


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--host", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--user", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--times", type=int, default=1)
    p.add_argument("method", choices=["get", "post"])
    p.add_argument("path")
    a = p.parse_args()
    try:
        from proxmoxer import ProxmoxAPI

        api = ProxmoxAPI(
            a.host,
            port=a.port,
            user=a.user,
            backend="ssh_paramiko",
            private_key_file=a.key,
            sudo=True,
            timeout=600,
        )
        try:
            for _ in range(a.times):
                getattr(api(a.path), a.method)()
        finally:
            api._backend.session.ssh_client.close()
    except Exception as e:  # noqa: BLE001 - reported, never hidden
        print(json.dumps({"error": f"{type(e).__name__}: {e}"}))
        return 1
    print(json.dumps({"calls": a.times}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
