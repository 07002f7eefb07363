#!/usr/bin/env node
// A real MCP client, the official TypeScript SDK (@modelcontextprotocol/sdk, pinned in
// package-lock.json), driving `pxagent mcp` over stdio.
//
// Usage: node tests/mcp_ts/client.mjs PXAGENT_BIN           # prints one JSON report on stdout
//        node tests/mcp_ts/client.mjs PXAGENT_BIN --modes   # the default (lean) list and
//                                                           # --tools compact, each called
//
// tests/mcp.rs runs it against the sandbox host (the PXAGENT_* variables of
// `scripts/testbed.sh env` pass through to the server) after adding a `hold` fault for the
// backup of VM 101, and asserts the report: this script records what happened and decides
// nothing. scripts/lib/deps.sh installs the SDK with `npm ci` into tests/mcp_ts/node_modules;
// without it this exits 3 saying so.

let sdk;
try {
  sdk = {
    ...(await import("@modelcontextprotocol/sdk/client/index.js")),
    ...(await import("@modelcontextprotocol/sdk/client/stdio.js")),
  };
} catch (e) {
  process.stderr.write(
    `client.mjs: the TypeScript MCP SDK is not installed (${e.message}); scripts/test.sh installs it with npm ci in tests/mcp_ts\n`,
  );
  process.exit(3);
}

const binary = process.argv[2];
if (!binary) {
  process.stderr.write("usage: node tests/mcp_ts/client.mjs PXAGENT_BIN\n");
  process.exit(2);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** One tool call as a plain object: a tool result or a protocol error. */
async function call(client, name, args, options = {}) {
  const started = performance.now();
  try {
    const r = await client.callTool({ name, arguments: args }, undefined, options);
    return {
      tool: name,
      protocol_error: false,
      is_error: Boolean(r.isError),
      // After the first block, which is the structured content as JSON.
      text: (r.content || [])
        .filter((c) => c.type === "text")
        .slice(1)
        .map((c) => c.text)
        .join("\n"),
      first_text: (r.content || [])[0]?.text ?? null,
      structured: r.structuredContent ?? null,
      ms: performance.now() - started,
    };
  } catch (e) {
    return {
      tool: name,
      protocol_error: true,
      code: e.code ?? null,
      message: String(e.message ?? e),
      ms: performance.now() - started,
    };
  }
}

const data = (step) => step?.structured?.data;

async function main() {
  const transport = new sdk.StdioClientTransport({
    command: binary,
    // PXAGENT_TEST_MCP_ARGS: more `pxagent mcp` flags (`--output-schemas`).
    args: ["-v", "mcp", ...(process.env.PXAGENT_TEST_MCP_ARGS ?? "").split(" ").filter(Boolean)],
    env: { ...process.env },
    stderr: "pipe",
  });
  let serverLog = "";
  transport.stderr?.on("data", (d) => (serverLog += d.toString()));
  const report = { steps: {}, protocol: null };
  const steps = report.steps;
  // The SDK tells the transport the version initialize agreed on.
  transport.setProtocolVersion = (v) => (report.protocol = v);
  const client = new sdk.Client({ name: "pxagent-ts-test", version: "0" });
  await client.connect(transport);
  report.server = client.getServerVersion();

  const { tools } = await client.listTools();
  report.tools = Object.fromEntries(
    tools.map((t) => [
      t.name,
      {
        title: t.title ?? null,
        read_only: t.annotations?.readOnlyHint ?? null,
        destructive: t.annotations?.destructiveHint ?? null,
        idempotent: t.annotations?.idempotentHint ?? null,
        open_world: t.annotations?.openWorldHint ?? null,
        has_output_schema: Boolean(t.outputSchema),
      },
    ]),
  );

  // A read (the SDK checks its structured content against the tool's output schema).
  steps.vm_list = await call(client, "vm_list", {});
  const guests = data(steps.vm_list) || [];
  const status = (id) => guests.find((g) => g.vmid === id)?.status;
  const target = [102, 103].find((id) => status(id) === "stopped") ?? null;
  report.start_target = target;

  // The confirm flow: a confirm op without its phrase, then with it.
  if (target !== null) {
    steps.vm_start = await call(client, "vm_start", { vmid: target });
    steps.vm_stop_unconfirmed = await call(client, "vm_stop", { vmid: target });
    steps.vm_stop_confirmed = await call(client, "vm_stop", {
      vmid: target,
      confirm: `yes stop ${target}`,
    });
  }

  // An invalid argument: a result the model can read (isError), not a protocol error.
  steps.status_99 = await call(client, "vm_status", { vmid: 99 });
  steps.unknown_tool = await call(client, "qm_monitor", {});

  // A command inside a guest.
  steps.vm_exec = await call(client, "vm_exec", { vmid: 100, command: ["uname", "-a"] });

  // Progress of a backup (percentages with total 100), then its archive removed again.
  const archives = async () =>
    new Set((data(await call(client, "backup_list", { vmid: 100 })) || []).map((b) => b.volid));
  const before = await archives();
  const progress = [];
  steps.backup_create = await call(
    client,
    "backup_create",
    { vmid: 100 },
    { onprogress: (p) => progress.push(p) },
  );
  steps.backup_create.progress = progress;
  const fresh = [...(await archives())].filter((v) => !before.has(v));
  report.backup_archives = fresh;
  for (const volid of fresh) {
    steps.backup_remove = await call(client, "backup_remove", {
      archive: volid,
      confirm: `yes remove ${volid}`,
    });
  }

  // Cancelling a long backup (VM 101's is held running by the simulator): aborting the
  // request sends notifications/cancelled; the server must stop the task.
  const node = guests.find((g) => g.vmid === 101)?.node;
  report.cancel_node = node ?? null;
  const listed = data(await call(client, "task_list", { vmid: 101, node })) || [];
  const known = new Set(listed.map((t) => t.upid));
  const backupsBefore = data(await call(client, "backup_list", { vmid: 101 })) || [];
  const abort = new AbortController();
  const cancelled = call(client, "backup_create", { vmid: 101 }, {
    signal: abort.signal,
    timeout: 600000,
  });
  await sleep(4000);
  abort.abort("the user changed their mind");
  steps.cancelled_backup = await cancelled;
  const started = performance.now();
  let task = null;
  for (let i = 0; i < 60 && !task; i++) {
    const tasks = data(await call(client, "task_list", { vmid: 101, node })) || [];
    const mine = tasks.find((t) => t.type === "vzdump" && !known.has(t.upid));
    if (mine && mine.status && mine.status !== "RUNNING") task = mine;
    else await sleep(500);
  }
  report.cancel = {
    task,
    seconds: (performance.now() - started) / 1000,
    backups_before: backupsBefore.map((b) => b.volid),
    backups_after: (data(await call(client, "backup_list", { vmid: 101 })) || []).map((b) => b.volid),
  };
  steps.after_cancel = await call(client, "pve_version", {});

  await client.close();
  report.server_stderr = serverLog;
  process.stdout.write(JSON.stringify(report) + "\n");
}

/** A connected client of `pxagent mcp FLAGS…`, and its server's stderr so far. */
async function connect(flags) {
  const transport = new sdk.StdioClientTransport({
    command: binary,
    args: ["-v", "mcp", ...flags],
    env: { ...process.env },
    stderr: "pipe",
  });
  const log = { text: "" };
  transport.stderr?.on("data", (d) => (log.text += d.toString()));
  const client = new sdk.Client({ name: "pxagent-ts-test", version: "0" });
  await client.connect(transport);
  return { client, log };
}

/** The tool list's size as sent (the SDK keeps each tool as the server wrote it). */
const listedBytes = (tools) => Buffer.byteLength(JSON.stringify({ tools }));

/** The default (lean) tool list and `--tools compact`, each listed and called (issue 26). */
async function modes() {
  const report = { lean: {}, compact: {} };
  {
    const { client, log } = await connect([]);
    const { tools } = await client.listTools();
    report.lean.bytes = listedBytes(tools);
    report.lean.tools = Object.fromEntries(
      tools.map((t) => [t.name, [...(t.inputSchema?.required ?? [])].sort()]),
    );
    report.lean.has_output_schema = tools.some((t) => Boolean(t.outputSchema));
    report.lean.vm_status = await call(client, "vm_status", { vmid: 100 });
    report.lean.vm_destroy = await call(client, "vm_destroy", { vmid: 9000 });
    report.lean.health = await call(client, "health", { since: "1h" });
    report.lean.health_bad = await call(client, "health", { since: "yesterday" });
    await client.close();
    report.lean.server_stderr = log.text;
  }
  {
    const { client, log } = await connect(["--tools", "compact"]);
    const { tools } = await client.listTools();
    report.compact.bytes = listedBytes(tools);
    report.compact.names = tools.map((t) => t.name).sort();
    const run = (tool, args) => call(client, "run_operation", { tool, arguments: args });
    report.compact.found = await call(client, "find_operation", { query: "destroy" });
    report.compact.described = await call(client, "describe_operation", { tool: "vm_destroy" });
    report.compact.status = await run("vm_status", { vmid: 100 });
    report.compact.destroy = await run("vm_destroy", { vmid: 9000 });
    report.compact.invalid = await run("vm_status", { vmid: 99 });
    report.compact.health = await call(client, "health", {});
    await client.close();
    report.compact.server_stderr = log.text;
  }
  process.stdout.write(JSON.stringify(report) + "\n");
}

(process.argv[3] === "--modes" ? modes() : main()).catch((e) => {
  process.stderr.write(`client.mjs: ${e.stack ?? e}\n`);
  process.exit(1);
});
