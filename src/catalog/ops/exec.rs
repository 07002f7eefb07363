//! Commands run inside guests: `vm exec` through the QEMU guest agent, its
//! exec-status and file steps, and `ct exec` through `pct exec`. All of risk `exec`: rate
//! limited, argv-validated, and in a sudoers profile only as [`super::super::Profile`]
//! decides.
//!
//! Guest-agent exec reaches a VM on any node (pvesh proxies). The agent's exec returns a
//! PID at once; `vm exec` then polls exec-status until the process exited. Guest words
//! travel as `--command WORD` each: PVE's get_options declares array parameters as
//! Getopt::Long `command=s@`, and a mandatory string value is taken as is even when it
//! starts with `-` (`--command -la`), so no guest word can become a pvesh option.

use super::*;

/// `pxagent vm exec VMID -- PROGRAM [ARGS…]`
pub static VM_EXEC: Op = Op {
    id: "vm.exec",
    cli: &["vm", "exec"],
    about: "Run a command in a VM through its guest agent: exit code and output",
    risk: Risk::Exec,
    area: Area::Vm,
    params: &[VMID, GUEST_COMMAND, INPUT_DATA, GUEST_NODE],
    args: pvesh!(
        "create",
        "/nodes/{node}/qemu/{vmid}/agent/exec",
        Arg::List("command", Some("--command")),
        Arg::Opt("input_data", &["--input-data", "{input_data}"])
    ),
    view: View::Object,
    ..ROW
};

/// `pxagent vm exec-status VMID PID`
pub static VM_EXEC_STATUS: Op = Op {
    id: "vm.exec-status",
    cli: &["vm", "exec-status"],
    about: "Show the state and output of a process the guest agent started",
    risk: Risk::Exec,
    area: Area::Vm,
    params: &[VMID, GUEST_PID, GUEST_NODE],
    args: pvesh!(
        "get",
        "/nodes/{node}/qemu/{vmid}/agent/exec-status",
        Arg::Word("--pid"),
        Arg::Word("{pid}")
    ),
    view: View::Object,
    ..ROW
};

/// A step of `pxagent vm exec --push`. file-write opens with mode `wb` (truncates): there
/// is no append, so a file travels in one call, at most 60 KiB of base64 (`--encode 0`:
/// pxagent encodes, binary-safe).
pub static VM_FILE_WRITE: Op = Op {
    id: "vm.file-write",
    cli: &["vm", "file-write"],
    about: "Write a file inside a VM through the guest agent (a step of `vm exec --push`)",
    risk: Risk::Exec,
    area: Area::Vm,
    params: &[VMID, GUEST_FILE, GUEST_CONTENT, GUEST_NODE],
    args: pvesh!(
        "create",
        "/nodes/{node}/qemu/{vmid}/agent/file-write",
        Arg::Word("--file"),
        Arg::Word("{file}"),
        Arg::Word("--content"),
        Arg::Word("{content}"),
        Arg::Word("--encode"),
        Arg::Word("0")
    ),
    view: View::Object,
    step: true,
    ..ROW
};

/// A step of `pxagent vm exec --pull`.
pub static VM_FILE_READ: Op = Op {
    id: "vm.file-read",
    cli: &["vm", "file-read"],
    about: "Read a file inside a VM through the guest agent (a step of `vm exec --pull`)",
    risk: Risk::Exec,
    area: Area::Vm,
    params: &[VMID, GUEST_FILE, GUEST_NODE],
    args: pvesh!(
        "get",
        "/nodes/{node}/qemu/{vmid}/agent/file-read",
        Arg::Word("--file"),
        Arg::Word("{file}")
    ),
    view: View::Object,
    step: true,
    ..ROW
};

/// `pxagent ct exec VMID -- PROGRAM [ARGS…]`. `pct exec` runs only on the container's own
/// node (pct is local), blocks until the command ends and passes stdin, stdout and the exit
/// status through. `--` ends pct's options, so guest words are never read as pct options.
/// File sync runs `tee`/`cat` through this same rule: never `pct push`/`pct pull`, which
/// write host paths as root.
pub static CT_EXEC: Op = Op {
    id: "ct.exec",
    cli: &["ct", "exec"],
    about: "Run a command in a container through `pct exec` (needs `sudoers render --ct-exec`)",
    risk: Risk::Exec,
    area: Area::Ct,
    params: &[CTID, GUEST_COMMAND],
    tool: Tool::Pct,
    args: &[
        Arg::Word("exec"),
        Arg::Word("{vmid}"),
        Arg::Word("--"),
        Arg::List("command", None),
    ],
    view: View::Object,
    ..ROW
};

const GUEST_COMMAND: Param = Param {
    name: "command",
    kind: Kind::GuestArgv,
    how: How::Positional,
    help: "the program to run in the guest, then its arguments (after `--`)",
};
const INPUT_DATA: Param = Param {
    name: "input_data",
    kind: Kind::GuestData,
    how: How::Option,
    help: "data the guest command reads on stdin",
};
const GUEST_PID: Param = Param {
    name: "pid",
    kind: Kind::Pid,
    how: How::Positional,
    help: "the PID `vm exec` reported",
};
const GUEST_FILE: Param = Param {
    name: "file",
    kind: Kind::GuestPath,
    how: How::Required,
    help: "the absolute path inside the guest",
};
const GUEST_CONTENT: Param = Param {
    name: "content",
    kind: Kind::GuestData,
    how: How::Required,
    help: "the file's content, base64-encoded",
};
