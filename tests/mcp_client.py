#!/usr/bin/env python3
"""A real MCP client (the official Python SDK) driving `pxagent mcp` over stdio.

Usage:
    python3 tests/mcp_client.py PXAGENT_BIN            # the live scenario; prints a JSON report
    python3 tests/mcp_client.py PXAGENT_BIN --cancel   # cancel a backup held running; report
    python3 tests/mcp_client.py PXAGENT_BIN --approve KEY  # a read the gated host wants approved
    python3 tests/mcp_client.py PXAGENT_BIN --readonly # a --profile readonly server's tools and refusals
    python3 tests/mcp_client.py PXAGENT_BIN --lean     # the default tool list: bytes, tools, calls
    python3 tests/mcp_client.py PXAGENT_BIN --prompts  # the skill prompt and the resources, read
    python3 tests/mcp_client.py PXAGENT_BIN --compact [KEY]  # --tools compact: find, describe, run
    python3 tests/mcp_client.py PXAGENT_BIN --bench N  # N warm `pve_version` calls; prints timings
    python3 tests/mcp_client.py PXAGENT_BIN --calls JSON  # [[tool, args], …] in one session, in order

`tests/mcp.rs` runs the scenario against the sandbox host (the PXAGENT_* variables of
`scripts/testbed.sh env` are passed through to the server) and asserts the report, so this
script records what happened and decides nothing itself. `scripts/bench-mcp.sh` uses --bench.
Needs the `mcp` package (scripts/test.sh installs it into the venv target/venv: run this with
target/venv/bin/python3); without it this exits 3 saying so.
"""

import json
import os
import re
import subprocess
import sys
import tempfile
import time

try:
    import anyio
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client
except ImportError as e:  # pragma: no cover - the Rust test turns this into a loud failure
    print(
        f"mcp_client.py: the Python MCP SDK is not importable ({e}); "
        "scripts/test.sh installs 'mcp>=1.0' into the venv target/venv; run this script with "
        "its target/venv/bin/python3",
        file=sys.stderr,
    )
    sys.exit(3)


def server_params(binary, extra=()):
    # The SDK passes only a few variables by default: hand over the whole environment (the
    # test isolates HOME and sets the bed's PXAGENT_* variables). -v: one stderr line per call.
    # PXAGENT_TEST_MCP_ARGS: more `pxagent mcp` flags for every server (`--output-schemas`).
    more = os.environ.get("PXAGENT_TEST_MCP_ARGS", "").split()
    return StdioServerParameters(
        command=binary, args=["-v", "mcp", *more, *extra], env=dict(os.environ)
    )


def listed_bytes(tools):
    """The tool list as the server sent it, in bytes (the SDK's models, without absent fields)."""
    dumped = [t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in tools]
    return len(json.dumps({"tools": dumped}, separators=(",", ":")).encode())


async def lean(binary):
    """The default tool list: its size, every tool's required arguments, and calls that work."""
    log = server_log()
    report = {}
    async with stdio_client(server_params(binary), errlog=log) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            tools = (await session.list_tools()).tools
            report["bytes"] = listed_bytes(tools)
            report["tools"] = {
                t.name: sorted((field(t, "input_schema", "inputSchema") or {}).get("required", []))
                for t in tools
            }
            report["has_output_schema"] = any(field(t, "output_schema", "outputSchema") for t in tools)
            report["vm_status"] = await call(session, "vm_status", {"vmid": 100})
            # VM 9000, a template, is never running: its destroy is asked for.
            report["vm_destroy"] = await call(session, "vm_destroy", {"vmid": 9000})
    log.seek(0)
    report["server_stderr"] = log.read()
    return report


async def prompts(binary):
    """The skill as a prompt and the read-only resources: listed and read."""
    log = server_log()
    report = {}
    async with stdio_client(server_params(binary), errlog=log) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            await session.call_tool("pve_version", {})
            report["prompts"] = [p.name for p in (await session.list_prompts()).prompts]
            got = await session.get_prompt("pxagent-skill")
            report["prompt_text"] = "".join(
                getattr(m.content, "text", "") for m in got.messages
            )
            report["resources"] = [str(r.uri) for r in (await session.list_resources()).resources]
            report["read"] = {}
            for uri in report["resources"]:
                res = await session.read_resource(uri)
                report["read"][uri] = "".join(getattr(c, "text", "") for c in res.contents)
    log.seek(0)
    report["server_stderr"] = log.read()
    return report


async def compact(binary, key=None):
    """`--tools compact`: three tools that find, describe and run every operation; a read, a
    change that needs a phrase and (with `key`, on the gated bed) an approval through
    run_operation, each beside the same call of the operation's own tool."""
    log = server_log()
    report = {}
    async with stdio_client(server_params(binary, ["--tools", "compact"]), errlog=log) as (
        read,
        write,
    ):
        async with ClientSession(read, write) as session:
            await session.initialize()
            tools = (await session.list_tools()).tools
            report["bytes"] = listed_bytes(tools)
            report["names"] = sorted(t.name for t in tools)
            report["found"] = await call(session, "find_operation", {"query": "snapshot"})
            report["all"] = await call(session, "find_operation", {})
            report["described"] = await call(session, "describe_operation", {"tool": "vm_delsnapshot"})

            def run(tool, args):
                return call(session, "run_operation", {"tool": tool, "arguments": args})

            if key:
                await relay_approval(binary, key, report, lambda args: run("vm_config", args))
            else:
                report["status_run"] = await run("vm_status", {"vmid": 100})
                report["status_own"] = await call(session, "vm_status", {"vmid": 100})
                name = "compact%d" % os.getpid()
                report["snapshot"] = await run("vm_snapshot", {"vmid": 100, "snapshot": name})
                args = {"vmid": 100, "snapshot": name}
                report["del_run"] = await run("vm_delsnapshot", args)
                report["del_own"] = await call(session, "vm_delsnapshot", args)
                phrase = (
                    ((report["del_run"].get("structured") or {}).get("error") or {}).get("phrase")
                )
                report["deleted"] = await run("vm_delsnapshot", {**args, "confirm": phrase or ""})
                report["unknown"] = await run("vm_nonsense", {})
    log.seek(0)
    report["server_stderr"] = log.read()
    return report


def server_log():
    """A file for the server's stderr (the report carries its text)."""
    return tempfile.TemporaryFile(mode="w+")


def field(obj, *names):
    """An attribute under its SDK 2.x (snake_case) or 1.x (camelCase) name."""
    for n in names:
        if obj is not None and hasattr(obj, n):
            return getattr(obj, n)
    return None


def texts(result):
    return [
        getattr(c, "text", "") for c in (result.content or []) if getattr(c, "type", "") == "text"
    ]


def text_of(result):
    """What the model reads after the first block (which is the structured content as JSON)."""
    return "\n".join(texts(result)[1:])


async def call(session, name, args, progress=None):
    """One tool call, recorded as a plain dict: a tool result or a protocol error."""
    started = time.perf_counter()
    try:
        result = await session.call_tool(name, args, progress_callback=progress)
    except Exception as e:  # the SDK raises for JSON-RPC errors
        error = getattr(e, "error", None)
        return {
            "tool": name,
            "protocol_error": True,
            "code": getattr(error, "code", getattr(e, "code", None)),
            "message": getattr(error, "message", str(e)),
            "ms": (time.perf_counter() - started) * 1000,
        }
    return {
        "tool": name,
        "protocol_error": False,
        "is_error": bool(field(result, "is_error", "isError")),
        "text": text_of(result),
        "first_text": (texts(result) or [None])[0],
        "structured": field(result, "structured_content", "structuredContent"),
        "ms": (time.perf_counter() - started) * 1000,
    }


def guest_status(list_result, vmid):
    for g in (list_result.get("structured") or {}).get("data") or []:
        if g.get("vmid") == vmid:
            return g.get("status")
    return None


async def scenario(binary):
    log = server_log()
    try:
        return await scenario_logged(binary, log)
    finally:
        log.seek(0)
        sys.stderr.write(log.read())


async def scenario_logged(binary, log):
    report = {"steps": {}}
    steps = report["steps"]
    async with stdio_client(server_params(binary), errlog=log) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            info = field(init, "server_info", "serverInfo")
            report["server"] = {
                "name": info.name,
                "version": info.version,
                "protocol": str(field(init, "protocol_version", "protocolVersion")),
            }
            tools = (await session.list_tools()).tools
            report["tools"] = {
                t.name: {
                    "read_only": field(t.annotations, "read_only_hint", "readOnlyHint"),
                    "destructive": field(t.annotations, "destructive_hint", "destructiveHint"),
                    "idempotent": field(t.annotations, "idempotent_hint", "idempotentHint"),
                    "open_world": field(t.annotations, "open_world_hint", "openWorldHint"),
                    "required": (field(t, "input_schema", "inputSchema") or {}).get("required", []),
                    "title": field(t, "title"),
                    "has_output_schema": bool(field(t, "output_schema", "outputSchema")),
                }
                for t in tools
            }

            steps["vm_list"] = await call(session, "vm_list", {})
            # A stopped VM to start: 102 (pve1) or 103 (pve3), whichever is stopped.
            target = None
            for vmid in (102, 103):
                if guest_status(steps["vm_list"], vmid) == "stopped":
                    target = vmid
                    break
            report["start_target"] = target
            if target is not None:
                progress = []

                async def on_progress(value, total, message):
                    progress.append({"progress": value, "total": total, "message": message})

                steps["vm_start"] = await call(session, "vm_start", {"vmid": target}, on_progress)
                steps["vm_start"]["progress"] = progress
                steps["status_after_start"] = await call(session, "vm_status", {"vmid": target})
                steps["vm_stop_unconfirmed"] = await call(session, "vm_stop", {"vmid": target})
                steps["vm_stop_confirmed"] = await call(
                    session, "vm_stop", {"vmid": target, "confirm": f"yes stop {target}"}
                )
                steps["status_after_stop"] = await call(session, "vm_status", {"vmid": target})

            steps["vm_destroy_unconfirmed"] = await call(session, "vm_destroy", {"vmid": 103})
            steps["vm_destroy_running"] = await call(session, "vm_destroy", {"vmid": 100})
            steps["status_100_after_refusal"] = await call(session, "vm_status", {"vmid": 100})

            # A throwaway VM, destroyed with the phrase.
            nextid = await call(session, "cluster_nextid", {})
            steps["cluster_nextid"] = nextid
            data = (nextid.get("structured") or {}).get("data")
            new = int(data) if isinstance(data, (int, str)) and str(data).isdigit() else None
            report["throwaway"] = new
            if new is not None:
                steps["vm_create"] = await call(
                    session,
                    "vm_create",
                    {
                        "vmid": new,
                        "name": "mcp-throwaway",
                        "iso": "local:iso/debian-13.2.0-amd64-netinst.iso",
                        "memory": 512,
                        "cores": 1,
                        "disk_size": 1,
                    },
                )
                steps["vm_destroy_wrong_phrase"] = await call(
                    session, "vm_destroy", {"vmid": new, "confirm": "yes destroy 100"}
                )
                steps["vm_destroy_confirmed"] = await call(
                    session, "vm_destroy", {"vmid": new, "confirm": f"yes destroy {new}"}
                )
                steps["status_after_destroy"] = await call(session, "vm_status", {"vmid": new})

            # Arguments that do not fit the schema: since 2025-11-25 a tool result with isError
            # (SEP-1303), nothing sent.
            steps["bad_vmid"] = await call(session, "vm_start", {"vmid": 99})
            steps["status_99"] = await call(session, "vm_status", {"vmid": 99})
            # An integral number written as a float is an integer (JSON Schema's rule).
            steps["integral_vmid"] = await call(session, "vm_status", {"vmid": 100.0})
            steps["bad_snapshot_name"] = await call(
                session, "vm_snapshot", {"vmid": 100, "snapshot": "; rm"}
            )
            steps["unknown_property"] = await call(session, "vm_status", {"vmid": 100, "force": True})
            steps["variant_without_switch"] = await call(
                session, "vm_snapshot_vmstate", {"vmid": 100, "snapshot": "before"}
            )
            # The lean list folds the variant into vm_snapshot: its switch chooses it there.
            steps["variant_through_base"] = await call(
                session, "vm_snapshot", {"vmid": 100, "snapshot": "before", "vmstate": True}
            )
            steps["unknown_tool"] = await call(session, "qm_monitor", {"vmid": 100})

            # A backup: its log's percentages arrive as progress with total 100; then the
            # archive is removed again (with its phrase) so the bed stays as it was.
            before = steps["backup_list_before"] = await call(session, "backup_list", {"vmid": 100})
            backup_progress = []

            async def on_backup_progress(value, total, message):
                backup_progress.append({"progress": value, "total": total, "message": message})

            steps["backup_create"] = await call(
                session, "backup_create", {"vmid": 100}, on_backup_progress
            )
            steps["backup_create"]["progress"] = backup_progress
            after = steps["backup_list_after"] = await call(session, "backup_list", {"vmid": 100})
            old = {b.get("volid") for b in (before.get("structured") or {}).get("data") or []}
            new = [
                b.get("volid")
                for b in (after.get("structured") or {}).get("data") or []
                if b.get("volid") not in old
            ]
            report["backup_archives"] = new
            for volid in new:
                steps["backup_remove"] = await call(
                    session, "backup_remove", {"archive": volid, "confirm": f"yes remove {volid}"}
                )

            # Concurrent reads share the one connection (separate channels).
            results = {}

            async def one(key, name, args):
                results[key] = await call(session, name, args)

            async with anyio.create_task_group() as tg:
                tg.start_soon(one, "a", "vm_status", {"vmid": 100})
                tg.start_soon(one, "b", "vm_status", {"vmid": 101})
                tg.start_soon(one, "c", "ct_status", {"vmid": 200})
                tg.start_soon(one, "d", "pve_version", {})
                tg.start_soon(one, "e", "node_list", {})
            steps["concurrent"] = results

            # Kill the server's SSH session on the host (sshd's per-connection processes of
            # the agent account); the next read must reconnect and work.
            user = os.environ.get("PXAGENT_USER", "zen-agent")
            killed = subprocess.run(
                ["pkill", "-KILL", "-f", f"^sshd(-session)?: {user}( |@)"], check=False
            ).returncode
            report["sshd_killed"] = killed == 0
            await anyio.sleep(0.3)
            steps["after_kill"] = await call(session, "vm_list", {})
            steps["after_kill_again"] = await call(session, "pve_version", {})
            # Again, now with a call that changes state first: it must not be retried.
            subprocess.run(["pkill", "-KILL", "-f", f"^sshd(-session)?: {user}( |@)"], check=False)
            await anyio.sleep(0.3)
            steps["change_after_kill"] = await call(session, "vm_start", {"vmid": 100})
            steps["read_after_change_failed"] = await call(session, "vm_status", {"vmid": 100})

            # The exec rate limit: only when the catalog has an exec tool. The limit counts in fixed
            # UTC minutes: start the burst early in a minute so all eleven calls land in the same
            # window.
            if "vm_exec" in report["tools"]:
                if time.time() % 60 > 40:
                    await anyio.sleep(60 - time.time() % 60 + 0.5)
                report["exec"] = [
                    await call(session, "vm_exec", {"vmid": 100, "command": ["uptime"]})
                    for _ in range(11)
                ]
    log.seek(0)
    report["server_stderr"] = log.read()
    return report


async def cancel(binary):
    """Cancel a backup of VM 101 that the simulator holds running (the Rust test adds the
    `hold` fault first): the server must stop its task, so no archive appears and the task
    list shows it stopped. Records what the client saw afterwards."""
    log = server_log()
    report = {}
    async with stdio_client(server_params(binary), errlog=log) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            guests = await call(session, "vm_list", {})
            node = next(
                g.get("node")
                for g in (guests.get("structured") or {}).get("data") or []
                if g.get("vmid") == 101
            )
            report["node"] = node
            report["backups_before"] = await call(session, "backup_list", {"vmid": 101})
            listed = await call(session, "task_list", {"vmid": 101, "node": node})
            known = {t.get("upid") for t in (listed.get("structured") or {}).get("data") or []}
            report["cancelled"] = False
            started = time.perf_counter()
            # Leaving the scope cancels the call: the SDK sends notifications/cancelled.
            with anyio.move_on_after(4) as scope:
                report["answer"] = await call(session, "backup_create", {"vmid": 101})
            report["cancelled"] = scope.cancelled_caught
            # The server stops the task in the background: watch the task list.
            task = None
            for _ in range(60):
                tasks = await call(session, "task_list", {"vmid": 101, "node": node})
                vzdump = [
                    t
                    for t in (tasks.get("structured") or {}).get("data") or []
                    if t.get("type") == "vzdump" and t.get("upid") not in known
                ]
                if vzdump and vzdump[0].get("status") not in (None, "RUNNING"):
                    task = vzdump[0]
                    break
                await anyio.sleep(0.5)
            report["task"] = task
            report["seconds"] = time.perf_counter() - started
            report["backups_after"] = await call(session, "backup_list", {"vmid": 101})
            # The session is still usable.
            report["after"] = await call(session, "pve_version", {})
    log.seek(0)
    report["server_stderr"] = log.read()
    return report


async def relay_approval(binary, key, report, vm_config):
    """An approval round trip: `vm_config({"vmid": 100})` is refused with the host's
    statement, the approver (`pxagent approve --key KEY`) signs it, and the same call with
    `approval` runs. Records `refused`, `signed` and `approved` in `report`."""
    report["refused"] = first = await vm_config({"vmid": 100})
    statement = (
        ((first.get("structured") or {}).get("error") or {}).get("approval_request") or {}
    ).get("statement")
    report["signed"] = False
    if statement:
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "statement.txt")
            with open(path, "w") as f:
                f.write(statement)
            signed = subprocess.run(
                [binary, "approve", "--key", key, path],
                capture_output=True,
                text=True,
                check=False,
            )
        report["signed"] = signed.returncode == 0
        report["approved"] = await vm_config({"vmid": 100, "approval": signed.stdout})


async def approve(binary, key):
    """On the gated bed, whose host policy says `vm.config: approve`: the read is refused with
    the approval request, a human approver (here `pxagent approve --key KEY`) signs the
    statement, and the same call with `approval` runs."""
    log = server_log()
    report = {}
    async with stdio_client(server_params(binary), errlog=log) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            await relay_approval(
                binary, key, report, lambda args: call(session, "vm_config", args)
            )
    log.seek(0)
    report["server_stderr"] = log.read()
    return report


async def readonly(binary):
    """A server with --profile readonly: only reads listed, others refused when called."""
    log = server_log()
    report = {}
    async with stdio_client(server_params(binary, ["--profile", "readonly"]), errlog=log) as (
        read,
        write,
    ):
        async with ClientSession(read, write) as session:
            await session.initialize()
            tools = (await session.list_tools()).tools
            report["tools"] = sorted(t.name for t in tools)
            report["vm_start"] = await call(session, "vm_start", {"vmid": 102})
            # VM 9000, a template, is never running: its destroy is asked for.
            report["vm_destroy"] = await call(session, "vm_destroy", {"vmid": 9000})
    log.seek(0)
    report["server_stderr"] = log.read()
    return report


async def bench(binary, n):
    log = server_log()
    async with stdio_client(server_params(binary), errlog=log) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            # Warm: the first call opens the SSH connection.
            first = await call(session, "pve_version", {})
            times = []
            for _ in range(n):
                r = await call(session, "pve_version", {})
                if r.get("protocol_error") or r.get("is_error"):
                    return {"error": r}
                times.append(r["ms"])
    # The server's own time per call (its -v line: "pve_version: ok (12.34 ms)"), so the
    # difference is what MCP adds: JSON-RPC over stdio, the SDK, serialization.
    log.seek(0)
    server = [
        float(m.group(1))
        for m in re.finditer(r"pve_version: ok \(([0-9.]+) ms\)", log.read())
    ][1:]
    times.sort()
    server.sort()
    return {
        "calls": n,
        "first_ms": first["ms"],
        "median_ms": times[len(times) // 2],
        "min_ms": times[0],
        "max_ms": times[-1],
        "server_median_ms": server[len(server) // 2] if server else None,
    }


async def calls(binary, spec):
    """The calls of `spec` ([[tool, args], …]) one after the other in one session."""
    log = server_log()
    report = {"calls": []}
    async with stdio_client(server_params(binary), errlog=log) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            for name, args in spec:
                report["calls"].append(await call(session, name, args))
    log.seek(0)
    report["server_stderr"] = log.read()
    return report


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    binary = sys.argv[1]
    if len(sys.argv) >= 4 and sys.argv[2] == "--bench":
        out = anyio.run(bench, binary, int(sys.argv[3]))
    elif len(sys.argv) >= 4 and sys.argv[2] == "--approve":
        out = anyio.run(approve, binary, sys.argv[3])
    elif len(sys.argv) >= 3 and sys.argv[2] == "--cancel":
        out = anyio.run(cancel, binary)
    elif len(sys.argv) >= 4 and sys.argv[2] == "--calls":
        out = anyio.run(calls, binary, json.loads(sys.argv[3]))
    elif len(sys.argv) >= 3 and sys.argv[2] == "--prompts":
        out = anyio.run(prompts, binary)
    elif len(sys.argv) >= 3 and sys.argv[2] == "--lean":
        out = anyio.run(lean, binary)
    elif len(sys.argv) >= 3 and sys.argv[2] == "--compact":
        out = anyio.run(compact, binary, sys.argv[3] if len(sys.argv) >= 4 else None)
    elif len(sys.argv) >= 3 and sys.argv[2] == "--readonly":
        out = anyio.run(readonly, binary)
    else:
        out = anyio.run(scenario, binary)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
