//! Tasks held running by a `hold` fault, through the real binary: visible as running, holding
//! their guest's lock, refusing or delaying other changes the way PVE does, stopped through
//! `pvesh delete /nodes/{node}/tasks/{upid}`, and reaped when their process dies
//! (`sim/src/running.rs`, `sim/src/locks.rs`; sources cited there).

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

struct Bed {
    dir: tempfile::TempDir,
}

struct Run {
    stdout: String,
    stderr: String,
    code: i32,
}

impl From<Output> for Run {
    fn from(o: Output) -> Run {
        Run {
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
            code: o.status.code().unwrap_or(-1),
        }
    }
}

impl Bed {
    fn new() -> Bed {
        Bed {
            dir: tempfile::tempdir().unwrap(),
        }
    }
    fn cmd(&self, argv: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_pve-sim"));
        c.args(argv)
            .env("PVE_SIM_STATE", self.dir.path().join("state/state.json"))
            .env("PVE_SIM_FAULTS", self.dir.path().join("faults.json"));
        c
    }
    fn run(&self, line: &str) -> Run {
        let argv: Vec<&str> = line.split(' ').collect();
        self.cmd(&argv).output().unwrap().into()
    }
    fn spawn(&self, line: &str) -> Child {
        let argv: Vec<&str> = line.split(' ').collect();
        self.cmd(&argv)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }
    fn json(&self, line: &str) -> Value {
        let r = self.run(&format!("{line} --output-format json"));
        assert_eq!(r.code, 0, "{line}: {}", r.stderr);
        serde_json::from_str(&r.stdout).unwrap()
    }
    fn fault(&self, rule: &str) {
        let r: Run = self.cmd(&["fault", "add", rule]).output().unwrap().into();
        assert_eq!(r.code, 0, "{}", r.stderr);
    }
    fn guest(&self, vmid: u64) -> Value {
        self.json("pvesh get /cluster/resources --type vm")
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["vmid"] == vmid)
            .cloned()
            .unwrap()
    }
    /// Wait until the node's active task list has a task of `kind`; its UPID.
    fn running_task(&self, node: &str, kind: &str) -> String {
        let until = Instant::now() + Duration::from_secs(10);
        loop {
            let list = self.json(&format!("pvesh get /nodes/{node}/tasks --source active"));
            if let Some(t) = list.as_array().unwrap().iter().find(|t| t["type"] == kind) {
                assert_eq!(t["status"], "RUNNING", "{t}");
                assert!(t.get("endtime").is_none(), "{t}");
                return t["upid"].as_str().unwrap().to_string();
            }
            assert!(Instant::now() < until, "no running {kind} task: {list}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    fn status(&self, node: &str, upid: &str) -> Value {
        self.json(&format!("pvesh get /nodes/{node}/tasks/{upid}/status"))
    }
    fn archives(&self, vmid: u64) -> usize {
        self.json("pvesh get /nodes/pve1/storage/local/content --content backup")
            .as_array()
            .unwrap()
            .iter()
            .filter(|v| v["vmid"] == vmid)
            .count()
    }
}

/// SIGTERM to a spawned tool, as sudo relays it.
fn term(child: &Child) {
    assert!(
        Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .unwrap()
            .success()
    );
}

fn finish(child: Child) -> Run {
    child.wait_with_output().unwrap().into()
}

#[test]
fn a_held_backup_runs_locks_its_guest_and_then_finishes_under_its_upid() {
    let bed = Bed::new();
    let before = bed.archives(100);
    bed.fault(r#"{"match":"vzdump 100","action":"hold","seconds":3,"times":1}"#);
    let backup = bed.spawn("vzdump 100 --storage local");
    let upid = bed.running_task("pve1", "vzdump");
    assert_eq!(bed.status("pve1", &upid)["status"], "running");
    assert!(bed.status("pve1", &upid).get("exitstatus").is_none());
    // The lock is visible and refuses changes: a snapshot task fails with PVE's text.
    assert_eq!(bed.guest(100)["lock"], "backup");
    let cfg = bed.json("pvesh get /nodes/pve1/qemu/100/config");
    assert_eq!(cfg["lock"], "backup");
    let snap = bed.run("qm snapshot 100 during");
    assert_eq!(snap.code, 255);
    assert_eq!(snap.stderr, "VM is locked (backup)\n");
    let shutdown =
        bed.run("pvesh create /nodes/pve1/qemu/100/status/shutdown --output-format json");
    assert_eq!(shutdown.code, 0, "pvesh exits 0 although the task failed");
    assert_eq!(shutdown.stderr, "VM is locked (backup)\n");
    // A running VM under backup: `qm start` only resumes it (no error).
    assert_eq!(bed.run("qm start 100").code, 0);
    // The archive list is unchanged while the backup runs.
    assert_eq!(bed.archives(100), before);
    let done = finish(backup);
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert!(
        done.stdout
            .contains("INFO: Backup job finished successfully")
    );
    let st = bed.status("pve1", &upid);
    assert_eq!(
        (st["status"].as_str(), st["exitstatus"].as_str()),
        (Some("stopped"), Some("OK"))
    );
    assert!(bed.guest(100).get("lock").is_none(), "the lock is released");
    assert_eq!(bed.archives(100), before + 1);
    assert_eq!(bed.run("qm snapshot 100 after").code, 0);
}

#[test]
fn stopping_a_backup_interrupts_it_and_leaves_no_archive() {
    let bed = Bed::new();
    let before = bed.archives(100);
    bed.fault(r#"{"match":"vzdump","action":"hold","seconds":60,"times":1}"#);
    let backup = bed
        .spawn("pvesh create /nodes/pve1/vzdump --vmid 100 --storage local --output-format json");
    let upid = bed.running_task("pve1", "vzdump");
    let t = Instant::now();
    let stop = bed.run(&format!(
        "pvesh delete /nodes/pve1/tasks/{upid} --output-format json"
    ));
    assert_eq!(
        (stop.code, stop.stdout.as_str()),
        (0, ""),
        "{}",
        stop.stderr
    );
    // `stop_task` returns once the worker is gone (it waits up to 5 s).
    assert!(t.elapsed() < Duration::from_secs(5));
    let st = bed.status("pve1", &upid);
    assert_eq!(
        (st["status"].as_str(), st["exitstatus"].as_str()),
        (Some("stopped"), Some("interrupted by signal"))
    );
    let done = finish(backup);
    assert_eq!(done.code, 0, "pvesh exits 0 for a failed task");
    assert_eq!(done.stderr, "interrupted by signal\n");
    assert!(
        done.stdout
            .contains("ERROR: Backup of VM 100 failed - interrupted by signal"),
        "{}",
        done.stdout
    );
    assert!(done.stdout.trim_end().ends_with(&format!("\"{upid}\"")));
    assert!(!done.stdout.contains("Backup job finished"));
    let log = bed.json(&format!("pvesh get /nodes/pve1/tasks/{upid}/log"));
    assert_eq!(
        log.as_array().unwrap().last().unwrap()["t"],
        "TASK ERROR: interrupted by signal"
    );
    assert_eq!(
        bed.archives(100),
        before,
        "a stopped backup leaves no archive"
    );
    assert!(bed.guest(100).get("lock").is_none());
    // Stopping it again (finished) is silent; unknown and unparsable UPIDs are refused.
    let again = bed.run(&format!("pvesh delete /nodes/pve1/tasks/{upid}"));
    assert_eq!((again.code, again.stderr.as_str()), (0, ""));
    let other_node = bed.run(&format!("pvesh delete /nodes/pve3/tasks/{upid}"));
    assert!(
        other_node.stderr.contains("upid: no such task"),
        "{}",
        other_node.stderr
    );
    let bad = bed.run("pvesh delete /nodes/pve1/tasks/UPID:nonsense");
    assert!(
        bad.stderr
            .starts_with("400 Parameter verification failed.\nupid: unable to parse worker upid\n")
    );
}

/// SIGTERM to the tool while its worker runs: the CLI passes it on to the worker (pve-common
/// `RESTEnvironment.pm` `$tee_worker`), so the backup ends interrupted, without an archive and
/// with its lock released, as a stop ends it. Before the worker exists (a hang), the signal
/// ends the call and nothing is started.
#[test]
fn sigterm_to_a_tool_interrupts_its_running_task_and_before_it_starts_nothing() {
    let bed = Bed::new();
    let before = bed.archives(100);
    bed.fault(r#"{"match":"vzdump","action":"hold","seconds":60,"times":1}"#);
    let backup = bed
        .spawn("pvesh create /nodes/pve1/vzdump --vmid 100 --storage local --output-format json");
    let upid = bed.running_task("pve1", "vzdump");
    let t = Instant::now();
    term(&backup);
    let done = finish(backup);
    assert!(t.elapsed() < Duration::from_secs(5));
    assert_eq!(done.stderr, "interrupted by signal\n");
    let st = bed.status("pve1", &upid);
    assert_eq!(
        (st["status"].as_str(), st["exitstatus"].as_str()),
        (Some("stopped"), Some("interrupted by signal"))
    );
    assert_eq!(
        bed.archives(100),
        before,
        "an interrupted backup leaves no archive"
    );
    assert!(bed.guest(100).get("lock").is_none());

    bed.fault(r#"{"match":"vzdump","action":"hang","seconds":60,"times":1}"#);
    let tasks = |bed: &Bed| {
        bed.json("pvesh get /nodes/pve1/tasks --source all")
            .as_array()
            .unwrap()
            .len()
    };
    let listed = tasks(&bed);
    let hung = bed
        .spawn("pvesh create /nodes/pve1/vzdump --vmid 100 --storage local --output-format json");
    std::thread::sleep(Duration::from_millis(300));
    term(&hung);
    let done = hung.wait_with_output().unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(done.status.signal(), Some(15));
    assert_eq!(
        tasks(&bed),
        listed,
        "a call killed before its worker started a task"
    );
    assert_eq!(bed.archives(100), before);
}

/// With `detach`, the worker outlives its tool: SIGTERM ends the tool at once, the task runs on
/// (held by a process of its own, so it is not reaped), and a stop ends it interrupted.
#[test]
fn a_detached_worker_outlives_its_tool_until_it_is_stopped() {
    let bed = Bed::new();
    let before = bed.archives(100);
    bed.fault(r#"{"match":"vzdump","action":"hold","seconds":60,"times":1}"#);
    bed.fault(r#"{"match":"vzdump","action":"detach","times":1}"#);
    let backup = bed
        .spawn("pvesh create /nodes/pve1/vzdump --vmid 100 --storage local --output-format json");
    let upid = bed.running_task("pve1", "vzdump");
    term(&backup);
    let done = finish(backup);
    assert_eq!(done.code, 143, "{}", done.stderr);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        bed.status("pve1", &upid)["status"],
        "running",
        "the worker died with its tool"
    );
    assert_eq!(bed.guest(100)["lock"], "backup");
    let stop = bed.run(&format!("pvesh delete /nodes/pve1/tasks/{upid}"));
    assert_eq!(stop.code, 0, "{}", stop.stderr);
    let st = bed.status("pve1", &upid);
    assert_eq!(
        (st["status"].as_str(), st["exitstatus"].as_str()),
        (Some("stopped"), Some("interrupted by signal"))
    );
    assert_eq!(bed.archives(100), before);
    assert!(bed.guest(100).get("lock").is_none());
}

#[test]
fn stopping_a_snapshot_leaves_no_snapshot() {
    let bed = Bed::new();
    bed.fault(r#"{"match":"qm snapshot 102","action":"hold","seconds":60,"times":1}"#);
    let snap = bed.spawn("qm snapshot 102 held");
    let upid = bed.running_task("pve1", "qmsnapshot");
    assert_eq!(bed.guest(102)["lock"], "snapshot");
    assert_eq!(
        bed.run(&format!("pvesh delete /nodes/pve1/tasks/{upid}"))
            .code,
        0
    );
    let done = finish(snap);
    assert_eq!(done.code, 255);
    // `die "$err\n"` in snapshot_create, folded by fork_worker: a trailing space.
    assert_eq!(done.stderr, "received interrupt \n");
    assert!(
        done.stdout
            .contains("snapshot create failed: starting cleanup")
    );
    let snaps = bed.json("pvesh get /nodes/pve1/qemu/102/snapshot");
    assert!(
        !snaps
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["name"] == "held")
    );
    assert!(bed.guest(102).get("lock").is_none());
}

#[test]
fn a_running_clone_holds_its_source_flock_until_others_time_out() {
    let bed = Bed::new();
    bed.fault(r#"{"match":"qemu/100/clone","action":"hold","seconds":14,"times":1}"#);
    let clone =
        bed.spawn("pvesh create /nodes/pve1/qemu/100/clone --newid 150 --output-format json");
    bed.running_task("pve1", "qmclone");
    let t = Instant::now();
    let stop = bed.run("qm stop 100");
    assert!(
        t.elapsed() >= Duration::from_secs(10),
        "lock_config waits 10 s"
    );
    assert_eq!(stop.code, 255);
    assert_eq!(
        stop.stderr,
        "trying to acquire lock...\ncan't lock file '/var/lock/qemu-server/lock-100.conf' - got timeout\n"
    );
    assert_eq!(finish(clone).code, 0);
    assert_eq!(bed.guest(150)["status"], "stopped");
    assert_eq!(bed.guest(100)["status"], "running");
}

#[test]
fn a_short_flock_wait_goes_on_once_the_clone_ended() {
    let bed = Bed::new();
    bed.fault(r#"{"match":"qemu/102/clone","action":"hold","seconds":2,"times":1}"#);
    let clone =
        bed.spawn("pvesh create /nodes/pve1/qemu/102/clone --newid 151 --output-format json");
    bed.running_task("pve1", "qmclone");
    // 102 is stopped: the clone holds a shared flock, the exclusive one of `qm start` waits.
    let start = bed.run("qm start 102");
    assert_eq!(start.code, 0, "{}", start.stderr);
    assert_eq!(start.stderr, "trying to acquire lock...\n OK\n");
    assert_eq!(finish(clone).code, 0);
    assert_eq!(bed.guest(102)["status"], "running");
}

#[test]
fn a_second_backup_job_waits_for_the_global_lock() {
    let bed = Bed::new();
    bed.fault(r#"{"match":"vzdump 100","action":"hold","seconds":2,"times":1}"#);
    let first = bed.spawn("vzdump 100 --storage local");
    bed.running_task("pve1", "vzdump");
    let second = bed.run("vzdump 102 --storage local");
    assert_eq!(second.code, 0, "{}", second.stderr);
    assert!(
        second
            .stdout
            .starts_with("INFO: trying to get global lock - waiting...\nINFO: got global lock\n"),
        "{}",
        second.stdout
    );
    assert_eq!(finish(first).code, 0);
}

#[test]
fn a_task_whose_process_died_ends_unexpectedly_and_keeps_its_lock() {
    let bed = Bed::new();
    bed.fault(r#"{"match":"vzdump 110","action":"hold","seconds":60,"times":1}"#);
    let mut backup = bed.spawn("vzdump 110 --storage local");
    let upid = bed.running_task("pve1", "vzdump");
    backup.kill().unwrap();
    backup.wait().unwrap();
    let st = bed.status("pve1", &upid);
    assert_eq!(
        (st["status"].as_str(), st["exitstatus"].as_str()),
        (Some("stopped"), Some("unexpected status"))
    );
    assert_eq!(bed.guest(110)["lock"], "backup", "nothing removed the lock");
    let r = bed.run("qm shutdown 110");
    assert_eq!(
        (r.code, r.stderr.as_str()),
        (255, "VM is locked (backup)\n")
    );
    assert_eq!(bed.run("qm unlock 110").code, 0);
    assert!(bed.guest(110).get("lock").is_none());
    assert_eq!(bed.run("qm shutdown 110").code, 0);
}

#[test]
fn the_pmxcfs_down_fault_answers_like_pve_as_root() {
    let bed = Bed::new();
    bed.fault(r#"{"match":"","action":"pmxcfs-down","times":1}"#);
    let r = bed.run("pvesh get /version --output-format json");
    assert_eq!(r.code, 111);
    let fixture = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures/pve/pmxcfs_down_root_connection_refused.txt"),
    )
    .unwrap();
    assert_eq!(r.stderr, fixture);
    assert_eq!(bed.run("pvesh get /version --output-format json").code, 0);
}

#[test]
fn setting_options_waits_for_a_clone_flock_and_refuses_under_a_backup() {
    let bed = Bed::new();
    // `update_vm` runs under `lock_config`: a clone of stopped 102 holds its shared flock.
    bed.fault(r#"{"match":"qemu/102/clone","action":"hold","seconds":2,"times":1}"#);
    let clone =
        bed.spawn("pvesh create /nodes/pve1/qemu/102/clone --newid 152 --output-format json");
    bed.running_task("pve1", "qmclone");
    let set = bed.run("pvesh set /nodes/pve1/qemu/102/config --cores 2");
    assert_eq!(set.code, 0, "{}", set.stderr);
    assert!(
        set.stderr.starts_with("trying to acquire lock...\n OK\n"),
        "{}",
        set.stderr
    );
    assert_eq!(finish(clone).code, 0);
    assert_eq!(
        bed.json("pvesh get /nodes/pve1/qemu/102/config")["cores"],
        2
    );
    // Under a backup the config's `lock: backup` refuses the change.
    bed.fault(r#"{"match":"vzdump 100","action":"hold","seconds":2,"times":1}"#);
    let backup = bed.spawn("vzdump 100 --storage local");
    bed.running_task("pve1", "vzdump");
    let set = bed.run("pvesh set /nodes/pve1/qemu/100/config --cores 2");
    assert_eq!(
        (set.code, set.stderr.as_str()),
        (255, "VM is locked (backup)\n")
    );
    assert_eq!(finish(backup).code, 0);
}

#[test]
fn a_delayed_backup_task_appears_late_then_runs_and_stops_like_any_other() {
    let bed = Bed::new();
    let before = bed.archives(102);
    bed.fault(r#"{"match":"vzdump --vmid 102","action":"delay-task","seconds":3,"times":1}"#);
    bed.fault(r#"{"match":"vzdump --vmid 102","action":"hold","seconds":60,"times":1}"#);
    let sent = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let t = Instant::now();
    let backup = bed
        .spawn("pvesh create /nodes/pve1/vzdump --vmid 102 --storage local --output-format json");
    // Until the worker forks, nothing of it is listed and the guest is not locked.
    std::thread::sleep(Duration::from_millis(1500));
    let all = bed.json("pvesh get /nodes/pve1/tasks --source all --vmid 102");
    assert!(
        all.as_array()
            .unwrap()
            .iter()
            .all(|t| t["type"] != "vzdump"),
        "a delayed task is listed before it started: {all}"
    );
    assert!(bed.guest(102).get("lock").is_none());
    // A read is not delayed by the rule (it starts no task).
    let read = Instant::now();
    bed.json("pvesh get /cluster/resources --type vm");
    assert!(read.elapsed() < Duration::from_secs(2));
    let upid = bed.running_task("pve1", "vzdump");
    assert!(
        t.elapsed() >= Duration::from_secs(3),
        "the task appeared after {:?}",
        t.elapsed()
    );
    let started = i64::from_str_radix(upid.split(':').nth(4).unwrap(), 16).unwrap();
    assert!(
        started >= sent + 2,
        "the UPID's start time is the fork's, not the call's: {upid}"
    );
    assert_eq!(bed.guest(102)["lock"], "backup");
    let stop = bed.run(&format!("pvesh delete /nodes/pve1/tasks/{upid}"));
    assert_eq!(stop.code, 0, "{}", stop.stderr);
    let st = bed.status("pve1", &upid);
    assert_eq!(st["exitstatus"], "interrupted by signal", "{st}");
    let done = finish(backup);
    assert_eq!(done.stderr, "interrupted by signal\n");
    assert!(done.stdout.trim_end().ends_with(&format!("\"{upid}\"")));
    assert_eq!(bed.archives(102), before);
}
