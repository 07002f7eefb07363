//! Commands inside guests through the real binary: guest-agent exec / exec-status /
//! file-write / file-read and `pct exec`, with the commands really running in the sandbox
//! (an unprivileged account, a per-guest directory under the temp state directory).
//!
//! These tests need root (the sandbox creates its account and chowns its directories, and the
//! simulator refuses everyone else): they fail, loudly, when run as anyone else.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use pve_sim::{Env, access, b64};
use serde_json::{Value, json};

struct Bed {
    dir: tempfile::TempDir,
    /// The binary under test, copied where the sandbox account can run it: the sandbox re-runs
    /// it as that account, and the build's own copy may sit in a directory it cannot enter
    /// (a clone in root's 0700 home).
    exe: PathBuf,
}

struct Run {
    stdout: Vec<u8>,
    stderr: String,
    code: i32,
}

impl Run {
    fn text(&self) -> String {
        String::from_utf8(self.stdout.clone()).unwrap()
    }
}

/// One copy of the binary for the whole test process, made before any test runs it: a copy
/// per test raced with the other tests' forks, whose children briefly held the copy's write
/// descriptor, and exec then failed with "Text file busy" (seen in a bare Debian 12 run).
static EXE: std::sync::LazyLock<(tempfile::TempDir, PathBuf)> = std::sync::LazyLock::new(|| {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
    let exe = dir.path().join("pve-sim");
    std::fs::copy(env!("CARGO_BIN_EXE_pve-sim"), &exe).unwrap();
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
    (dir, exe)
});

fn am_root() -> bool {
    access::real_euid() == Some(0)
}

impl Bed {
    fn new() -> Self {
        assert!(
            am_root(),
            "the guest-exec tests need root (sandbox account, chown); run them as root"
        );
        let dir = tempfile::tempdir().unwrap();
        // The sandbox account must be able to reach `<state dir>/guests/<vmid>/root`.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
        Bed {
            dir,
            exe: EXE.1.clone(),
        }
    }
    fn state(&self) -> PathBuf {
        self.dir.path().join("state/state.json")
    }
    fn cmd(&self, words: &[&str]) -> Command {
        let mut c = Command::new(&self.exe);
        c.args(words)
            .env("PVE_SIM_STATE", self.state())
            .env("PVE_SIM_FAULTS", self.dir.path().join("faults.json"));
        c
    }
    fn run_in(&self, words: &[&str], stdin: Option<&[u8]>) -> Run {
        let mut c = self.cmd(words);
        c.stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        let mut child = c.spawn().unwrap();
        if let Some(data) = stdin {
            child.stdin.take().unwrap().write_all(data).unwrap();
        }
        let o = child.wait_with_output().unwrap();
        Run {
            stdout: o.stdout,
            stderr: String::from_utf8(o.stderr).unwrap(),
            code: o.status.code().unwrap_or(-1),
        }
    }
    fn run(&self, words: &[&str]) -> Run {
        self.run_in(words, None)
    }
    /// `pvesh VERB PATH ARGS… --output-format json`, expecting success; the JSON (Null when
    /// nothing was printed).
    fn pvesh(&self, verb: &str, path: &str, args: &[&str]) -> Value {
        let r = self.pvesh_raw(verb, path, args);
        assert_eq!(r.code, 0, "pvesh {verb} {path} {args:?}: {}", r.stderr);
        let text = r.text();
        if text.is_empty() {
            return Value::Null;
        }
        assert_eq!(text.lines().count(), 1, "one line: {text}");
        serde_json::from_str(&text).unwrap()
    }
    fn pvesh_raw(&self, verb: &str, path: &str, args: &[&str]) -> Run {
        let mut w = vec!["pvesh", verb, path];
        w.extend_from_slice(args);
        w.extend(["--output-format", "json"]);
        self.run(&w)
    }
    /// `--command` words for `argv`.
    fn exec(&self, node: &str, vmid: u32, argv: &[&str], extra: &[&str]) -> i64 {
        let mut args = Vec::new();
        for a in argv {
            args.extend(["--command", a]);
        }
        args.extend_from_slice(extra);
        let v = self.pvesh(
            "create",
            &format!("/nodes/{node}/qemu/{vmid}/agent/exec"),
            &args,
        );
        assert_eq!(v.as_object().unwrap().len(), 1, "{v}");
        v["pid"].as_i64().unwrap()
    }
    fn status(&self, node: &str, vmid: u32, pid: i64) -> Value {
        self.pvesh(
            "get",
            &format!("/nodes/{node}/qemu/{vmid}/agent/exec-status"),
            &["--pid", &pid.to_string()],
        )
    }
    /// Poll exec-status until `exited` is 1 (the way a client does).
    fn wait(&self, node: &str, vmid: u32, pid: i64) -> Value {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let v = self.status(node, vmid, pid);
            if v["exited"] == 1 {
                return v;
            }
            assert_eq!(
                v,
                json!({"exited": 0}),
                "a running command shows only exited:0"
            );
            assert!(Instant::now() < deadline, "pid {pid} did not finish");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    fn guest_root(&self, vmid: u32) -> PathBuf {
        self.dir.path().join(format!("state/guests/{vmid}/root"))
    }
}

const AGENT_100: &str = "/nodes/pve1/qemu/100/agent";

#[test]
fn exec_returns_pid_then_status_with_exit_code_and_output() {
    let bed = Bed::new();
    let pid = bed.exec(
        "pve1",
        100,
        &["sh", "-c", "printf 'out\\n'; printf err >&2; exit 3"],
        &[],
    );
    let v = bed.wait("pve1", 100, pid);
    assert_eq!(
        v,
        // Each stream with data carries its truncation flag (QEMU 10.1's fixed agent).
        json!({"exited": 1, "exitcode": 3, "out-data": "out\n", "out-truncated": 0,
               "err-data": "err", "err-truncated": 0})
    );
    // pvesh's canonical one-line JSON.
    let r = bed.pvesh_raw("get", &format!("{AGENT_100}/exec-status"), &["--pid", "1"]);
    assert_eq!(
        (r.stderr.as_str(), r.code),
        ("Agent error: PID 1 does not exist\n", 255)
    );
    // The agent forgets a finished process once it reported it.
    let r = bed.pvesh_raw(
        "get",
        &format!("{AGENT_100}/exec-status"),
        &["--pid", &pid.to_string()],
    );
    assert_eq!(r.stderr, format!("Agent error: PID {pid} does not exist\n"));
    assert_eq!(r.code, 255);

    // Asynchronous: exec returns while the command runs.
    let t = Instant::now();
    let pid = bed.exec("pve1", 100, &["sleep", "1"], &[]);
    assert!(
        t.elapsed() < Duration::from_millis(900),
        "exec must not wait"
    );
    assert_eq!(bed.status("pve1", 100, pid), json!({"exited": 0}));
    assert_eq!(
        bed.wait("pve1", 100, pid),
        json!({"exited": 1, "exitcode": 0})
    );

    // A VM on another node: the same through pvesh's proxy; argv words are not split by a
    // shell; the command runs as the unprivileged sandbox account in the guest's `/`.
    let pid = bed.exec(
        "pve2",
        101,
        &[
            "sh",
            "-c",
            "id -un; pwd; echo \"$HOME\"; echo \"$1\"",
            "sh",
            "a b; c",
        ],
        &[],
    );
    let v = bed.wait("pve2", 101, pid);
    let root = bed.guest_root(101);
    assert_eq!(
        v["out-data"],
        format!(
            "pve-sim-guest\n{}\n{}\na b; c\n",
            root.display(),
            root.join("root").display()
        )
    );
    assert_eq!(v["exitcode"], 0);
    // Killed by a signal: `signal`, no `exitcode`.
    let pid = bed.exec("pve1", 100, &["sh", "-c", "kill -TERM $$"], &[]);
    assert_eq!(
        bed.wait("pve1", 100, pid),
        json!({"exited": 1, "signal": 15})
    );
}

#[test]
fn input_data_is_stdin() {
    let bed = Bed::new();
    let pid = bed.exec(
        "pve1",
        100,
        &["sort"],
        &["--input-data", "pear\napple\nfig\n"],
    );
    assert_eq!(bed.wait("pve1", 100, pid)["out-data"], "apple\nfig\npear\n");
    // Without input-data stdin is /dev/null: cat ends at once with nothing to say.
    let pid = bed.exec("pve1", 100, &["cat"], &[]);
    assert_eq!(
        bed.wait("pve1", 100, pid),
        json!({"exited": 1, "exitcode": 0})
    );
    // input-data maxLength 65536 (Agent.pm).
    let big = "x".repeat(65_537);
    let r = bed.pvesh_raw(
        "create",
        &format!("{AGENT_100}/exec"),
        &["--command", "cat", "--input-data", &big],
    );
    assert_eq!(r.code, 255);
    assert!(
        r.stderr.starts_with(
            "400 Parameter verification failed.\ninput-data: value may only be 65536 characters long\n"
        ),
        "{}",
        r.stderr
    );
    let ok = "y".repeat(65_536);
    let pid = bed.exec("pve1", 100, &["wc", "-c"], &["--input-data", &ok]);
    assert_eq!(
        bed.wait("pve1", 100, pid)["out-data"]
            .as_str()
            .unwrap()
            .trim(),
        "65536"
    );
}

#[test]
fn output_beyond_the_limit_is_truncated_and_flagged() {
    let bed = Bed::new();
    let r = bed.run(&["sandbox"]);
    assert_eq!(r.text(), "out-limit=16777216 timeout=300\n");
    let r = bed.run(&["sandbox", "out-limit=8"]);
    assert_eq!(r.text(), "out-limit=8 timeout=300\n");
    let pid = bed.exec(
        "pve1",
        100,
        &["sh", "-c", "printf 0123456789abcdef; printf 12345678 >&2"],
        &[],
    );
    assert_eq!(
        bed.wait("pve1", 100, pid),
        json!({"exited": 1, "exitcode": 0, "out-data": "01234567", "out-truncated": 1,
               "err-data": "12345678", "err-truncated": 0})
    );
    // Big output keeps draining (the writer is not blocked) and is cut at the limit.
    let pid = bed.exec("pve1", 100, &["head", "-c", "1000000", "/dev/zero"], &[]);
    let v = bed.wait("pve1", 100, pid);
    assert_eq!(
        (v["out-data"].as_str().unwrap().len(), &v["out-truncated"]),
        (8, &json!(1))
    );
}

#[test]
fn agent_preconditions_fail_like_pve() {
    let bed = Bed::new();
    let fail = |path: &str, args: &[&str]| {
        let r = bed.pvesh_raw("create", path, args);
        assert_eq!(r.code, 255, "{path}: {}", r.stderr);
        assert!(r.stdout.is_empty());
        r.stderr
    };
    let cmd = ["--command", "true"];
    // Order of assert_agent_available: configured, running, answering.
    assert_eq!(
        fail("/nodes/pve1/qemu/102/agent/exec", &cmd),
        "No QEMU guest agent configured\n"
    );
    let e = fail("/nodes/pve2/qemu/104/agent/exec", &cmd);
    // Proxied to pve2: the remote's last stderr line is pvesh's proxy error.
    assert_eq!(e, "proxy handler failed: VM 104 is not running\n");
    assert_eq!(
        fail("/nodes/pve1/qemu/110/agent/exec", &cmd),
        "QEMU guest agent is not running\n"
    );
    assert_eq!(
        fail(
            "/nodes/pve1/qemu/110/agent/file-write",
            &["--file", "/tmp/x", "--content", "x"]
        ),
        "QEMU guest agent is not running\n"
    );
    // The knob: the agent comes up.
    assert_eq!(bed.run(&["qga", "110", "up"]).code, 0);
    let pid = bed.exec("pve1", 110, &["true"], &[]);
    assert_eq!(bed.wait("pve1", 110, pid)["exitcode"], 0);
    assert_eq!(bed.run(&["qga", "110", "down"]).code, 0);
    assert_eq!(
        fail("/nodes/pve1/qemu/110/agent/exec", &cmd),
        "QEMU guest agent is not running\n"
    );
    // A paused VM's agent does not answer either.
    bed.pvesh("create", "/nodes/pve1/qemu/100/status/suspend", &[]);
    assert_eq!(
        fail("/nodes/pve1/qemu/100/agent/exec", &cmd),
        "QEMU guest agent is not running\n"
    );
    bed.pvesh("create", "/nodes/pve1/qemu/100/status/resume", &[]);
    // The path's node must be the VM's.
    let r = bed.pvesh_raw("create", "/nodes/pve2/qemu/100/agent/exec", &cmd);
    assert_eq!(
        r.stderr,
        "proxy handler failed: Configuration file 'nodes/pve2/qemu-server/100.conf' does not exist\n"
    );
    // A RHEL-family agent answers but refuses commands and files (its allow list).
    assert_eq!(bed.run(&["qga", "100", "no-exec"]).code, 0);
    assert_eq!(
        fail(&format!("{AGENT_100}/exec"), &cmd),
        "Agent error: Command guest-exec has been disabled: the command is not allowed\n"
    );
    assert_eq!(
        fail(
            &format!("{AGENT_100}/file-write"),
            &["--file", "/tmp/x", "--content", "x"]
        ),
        "Agent error: Command guest-file-open has been disabled: the command is not allowed\n"
    );
    assert_eq!(bed.run(&["qga", "100", "up"]).code, 0);
    // A program that cannot start is the agent's error, synchronously.
    assert_eq!(
        fail(
            &format!("{AGENT_100}/exec"),
            &["--command", "no-such-program"]
        ),
        "Agent error: Guest agent command failed, error was 'Failed to execute child process “no-such-program” (No such file or directory)'\n"
    );
    // command is required (type array, not optional).
    let e = fail(&format!("{AGENT_100}/exec"), &[]);
    assert!(
        e.starts_with(
            "400 Parameter verification failed.\ncommand: property is missing and it is not optional\n"
        ),
        "{e}"
    );
    // exec-status is a GET: no 'create' handler.
    let r = bed.pvesh_raw(
        "create",
        &format!("{AGENT_100}/exec-status"),
        &["--pid", "1"],
    );
    assert_eq!(r.code, 1);
}

#[test]
fn file_write_sort_file_read_round_trip() {
    let bed = Bed::new();
    let v = bed.pvesh(
        "create",
        &format!("{AGENT_100}/file-write"),
        &["--file", "/tmp/in.txt", "--content", "pear\napple\nfig\n"],
    );
    assert_eq!(v, Value::Null, "file-write prints nothing");
    let pid = bed.exec(
        "pve1",
        100,
        &["sort", "-o", "/tmp/out.txt", "/tmp/in.txt"],
        &[],
    );
    assert_eq!(
        bed.wait("pve1", 100, pid),
        json!({"exited": 1, "exitcode": 0})
    );
    let v = bed.pvesh(
        "get",
        &format!("{AGENT_100}/file-read"),
        &["--file", "/tmp/out.txt"],
    );
    assert_eq!(
        v,
        json!({"bytes-read": 15, "content": "apple\nfig\npear\n"})
    );
    // The file lives in the guest's root, written by the sandbox account.
    let host = bed.guest_root(100).join("tmp/out.txt");
    assert_eq!(
        std::fs::read_to_string(&host).unwrap(),
        "apple\nfig\npear\n"
    );
    // New files from file-write are 0666 like the agent makes them.
    let mode = std::fs::metadata(bed.guest_root(100).join("tmp/in.txt"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o666);

    // Binary: every byte value, sent as base64 with --encode 0.
    let all: Vec<u8> = (0..=255u8).collect();
    bed.pvesh(
        "create",
        &format!("{AGENT_100}/file-write"),
        &[
            "--file",
            "/root/bin.dat",
            "--content",
            &b64::encode(&all),
            "--encode",
            "0",
        ],
    );
    let v = bed.pvesh(
        "get",
        &format!("{AGENT_100}/file-read"),
        &["--file", "/root/bin.dat", "--decode", "0"],
    );
    assert_eq!(v["bytes-read"], 256);
    assert_eq!(b64::decode(v["content"].as_str().unwrap()).unwrap(), all);
    // Decoded (the default): one character per byte.
    let v = bed.pvesh(
        "get",
        &format!("{AGENT_100}/file-read"),
        &["--file", "/root/bin.dat"],
    );
    let bytes: Vec<u8> = v["content"]
        .as_str()
        .unwrap()
        .chars()
        .map(|c| u8::try_from(u32::from(c)).unwrap())
        .collect();
    assert_eq!(bytes, all);
    // The command sees the same bytes.
    let pid = bed.exec(
        "pve1",
        100,
        &["cmp", "-s", "/root/bin.dat", "/dev/stdin"],
        &[],
    );
    assert_eq!(bed.wait("pve1", 100, pid)["exitcode"], 1, "stdin is empty");
    let pid = bed.exec("pve1", 100, &["wc", "-c", "/root/bin.dat"], &[]);
    assert!(
        bed.wait("pve1", 100, pid)["out-data"]
            .as_str()
            .unwrap()
            .starts_with("256 ")
    );

    // Empty files, both ways.
    for args in [
        &["--content", ""][..],
        &["--content", "", "--encode", "0"][..],
    ] {
        let mut a = vec!["--file", "/tmp/empty"];
        a.extend_from_slice(args);
        bed.pvesh("create", &format!("{AGENT_100}/file-write"), &a);
        let v = bed.pvesh(
            "get",
            &format!("{AGENT_100}/file-read"),
            &["--file", "/tmp/empty"],
        );
        assert_eq!(v, json!({"bytes-read": 0, "content": ""}));
    }

    // --count: stopped before the end → truncated (no warning when count was given).
    let r = bed.pvesh_raw(
        "get",
        &format!("{AGENT_100}/file-read"),
        &["--file", "/tmp/out.txt", "--count", "5"],
    );
    assert_eq!(
        r.text(),
        "{\"bytes-read\":5,\"content\":\"apple\",\"truncated\":1}\n"
    );
    assert_eq!(r.stderr, "");
    let v = bed.pvesh(
        "get",
        &format!("{AGENT_100}/file-read"),
        &["--file", "/tmp/out.txt", "--offset", "6"],
    );
    assert_eq!(v, json!({"bytes-read": 9, "content": "fig\npear\n"}));

    // Limits and errors.
    let big = "x".repeat(61_441);
    let r = bed.pvesh_raw(
        "create",
        &format!("{AGENT_100}/file-write"),
        &["--file", "/tmp/big", "--content", &big],
    );
    assert!(
        r.stderr.starts_with(
            "400 Parameter verification failed.\ncontent: value may only be 61440 characters long\n"
        ),
        "{}",
        r.stderr
    );
    let r = bed.pvesh_raw(
        "get",
        &format!("{AGENT_100}/file-read"),
        &["--file", "/tmp/none"],
    );
    assert_eq!(
        (r.stderr.as_str(), r.code),
        (
            "Agent error: failed to open file '/tmp/none' (mode: 'r'): No such file or directory\n",
            255
        )
    );
    let r = bed.pvesh_raw(
        "create",
        &format!("{AGENT_100}/file-write"),
        &["--file", "/nodir/f", "--content", "x"],
    );
    assert_eq!(
        r.stderr,
        "Agent error: failed to open file '/nodir/f' (mode: 'wb'): No such file or directory\n"
    );
    let r = bed.pvesh_raw(
        "create",
        &format!("{AGENT_100}/file-write"),
        &[
            "--file",
            "/tmp/b",
            "--content",
            "not base64!",
            "--encode",
            "0",
        ],
    );
    assert_eq!(
        r.stderr,
        "Agent error: Base64 data contains invalid characters\n"
    );
    // `..` cannot leave the guest's root.
    bed.pvesh(
        "create",
        &format!("{AGENT_100}/file-write"),
        &["--file", "/../../tmp/up", "--content", "u"],
    );
    assert!(bed.guest_root(100).join("tmp/up").exists());
    // Guest file I/O runs as the sandbox account: a symlink the guest planted to a root-only
    // host file gives nothing away.
    // (/etc/shadow: root-only, and outside the rewritten /tmp, /root, /home.)
    assert!(std::path::Path::new("/etc/shadow").exists());
    let pid = bed.exec(
        "pve1",
        100,
        &["ln", "-s", "/etc/shadow", "/tmp/shadow-link"],
        &[],
    );
    assert_eq!(bed.wait("pve1", 100, pid)["exitcode"], 0);
    let r = bed.pvesh_raw(
        "get",
        &format!("{AGENT_100}/file-read"),
        &["--file", "/tmp/shadow-link"],
    );
    assert_eq!(
        r.stderr,
        "Agent error: failed to open file '/tmp/shadow-link' (mode: 'r'): Permission denied\n"
    );
}

#[test]
fn time_limit_and_restart_end_the_process_record() {
    let bed = Bed::new();
    bed.run(&["sandbox", "timeout=1"]);
    let pid = bed.exec("pve1", 100, &["sleep", "30"], &[]);
    assert_eq!(
        bed.wait("pve1", 100, pid),
        json!({"exited": 1, "signal": 9})
    );
    // After a restart the agent knows nothing of earlier processes.
    let pid = bed.exec("pve1", 100, &["true"], &[]);
    std::thread::sleep(Duration::from_millis(300));
    bed.pvesh("create", "/nodes/pve1/qemu/100/status/stop", &[]);
    let r = bed.pvesh_raw(
        "get",
        &format!("{AGENT_100}/exec-status"),
        &["--pid", &pid.to_string()],
    );
    assert_eq!(r.stderr, "VM 100 is not running\n");
    // Start a second later, so the boot time differs.
    std::thread::sleep(Duration::from_millis(1100));
    bed.pvesh("create", "/nodes/pve1/qemu/100/status/start", &[]);
    let r = bed.pvesh_raw(
        "get",
        &format!("{AGENT_100}/exec-status"),
        &["--pid", &pid.to_string()],
    );
    assert_eq!(r.stderr, format!("Agent error: PID {pid} does not exist\n"));
}

#[test]
fn pct_exec_passes_stdio_and_exit_code_through() {
    let bed = Bed::new();
    let r = bed.run_in(
        &[
            "pct",
            "exec",
            "200",
            "--",
            "sh",
            "-c",
            "cat; echo E >&2; exit 7",
        ],
        Some(b"abc\x00\xff"),
    );
    assert_eq!(
        (r.stdout.as_slice(), r.stderr.as_str(), r.code),
        (&b"abc\x00\xff"[..], "E\n", 7)
    );
    // Files: the same path rewrite as for VMs, and the data crosses stdin/stdout.
    let r = bed.run_in(
        &["pct", "exec", "200", "--", "tee", "/tmp/f"],
        Some(b"data"),
    );
    assert_eq!((r.code, r.text().as_str()), (0, "data"));
    let r = bed.run(&["pct", "exec", "200", "--", "cat", "/tmp/f"]);
    assert_eq!((r.code, r.text().as_str()), (0, "data"));
    assert!(bed.guest_root(200).join("tmp/f").exists());
    let r = bed.run(&["pct", "exec", "200", "--keep-env", "0", "--", "id", "-un"]);
    assert_eq!(r.text(), "pve-sim-guest\n");
    let r = bed.run(&["pct", "exec", "200", "--", "sh", "-c", "kill -KILL $$"]);
    assert_eq!(r.code, 137);
    // Errors in pct.pm's order.
    let r = bed.run(&["pct", "exec", "201", "--", "true"]);
    assert_eq!(
        (r.stderr.as_str(), r.code),
        (
            "Configuration file 'nodes/pve1/lxc/201.conf' does not exist\n",
            2
        )
    );
    let r = bed.run(&["pct", "exec", "202", "--", "true"]);
    assert_eq!(
        (r.stderr.as_str(), r.code),
        ("container '202' not running!\n", 255)
    );
    let r = bed.run(&["pct", "exec", "200"]);
    assert_eq!(
        (r.stderr.as_str(), r.code),
        (
            "missing command at /usr/share/perl5/PVE/CLI/pct.pm line 246.\n",
            255
        )
    );
    // lxc-attach's line in the form of the real capture, exit 127 (ENOENT).
    let r = bed.run(&["pct", "exec", "200", "--", "/nonexistent"]);
    assert_eq!(r.code, 127);
    let real = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/fixtures/pve/pct_exec_missing_program_lxc_attach.txt"
    ))
    .unwrap();
    assert_eq!(
        r.stderr,
        real.replace("102", "200")
            .replace("\"pihole\"", "\"/nonexistent\"")
    );
    // [sim-only] time limit.
    bed.run(&["sandbox", "timeout=1"]);
    let t = Instant::now();
    let r = bed.run(&["pct", "exec", "200", "--", "sleep", "30"]);
    assert_eq!(r.code, 137);
    assert!(t.elapsed() < Duration::from_secs(10));
}

#[test]
fn non_root_callers_are_still_refused() {
    let bed = Bed::new();
    let env = Env {
        euid: Some(1000),
        state_path: bed.state(),
        faults_path: bed.dir.path().join("faults.json"),
        now: None,
    };
    for line in [
        "pvesh create /nodes/pve1/qemu/100/agent/exec --command id --output-format json",
        "pvesh get /nodes/pve1/qemu/100/agent/exec-status --pid 1 --output-format json",
        "pvesh get /nodes/pve1/qemu/100/agent/file-read --file /etc/hostname --output-format json",
        "pct exec 200 -- id",
    ] {
        let argv: Vec<String> = line.split(' ').map(String::from).collect();
        let out = pve_sim::run(&argv, &env);
        assert_eq!(
            (out.stderr.as_str(), out.code),
            (access::REFUSAL, 255),
            "{line}"
        );
    }
    // And for real: the binary run by an unprivileged uid.
    use std::os::unix::process::CommandExt;
    let o = bed
        .cmd(&["pct", "exec", "200", "--", "id"])
        .uid(65_534)
        .gid(65_534)
        .output()
        .unwrap();
    assert_eq!(
        (String::from_utf8_lossy(&o.stderr).as_ref(), o.status.code()),
        (access::REFUSAL, Some(255))
    );
    assert!(o.stdout.is_empty());
    assert!(!bed.dir.path().join("state/guests").exists(), "nothing ran");
}
